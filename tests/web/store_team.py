"""Run the panel kit's Team live on a shared store in its own process: ``python tests/web/store_team.py URL``.

The Lead's prompt runs (two tasks, a builder that claims task-1), then the process
prints ``ready <lead id> <holder>`` and holds the Team (its lease) while it obeys
one command per stdin line, answering ``done <lead log length>`` once the Team is
quiet again:

* ``task SUBJECT`` -- the Lead creates a task;
* ``send TEXT`` -- the Lead messages the builder (``finish now`` makes it write
  ``src/a.py`` and complete task-1).

End of stdin closes the host (the lease is released). Tests use it as "another
process, perhaps on another machine, runs this Team".
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from web_kit import PROMPT, GatedModel, SCRIPT  # noqa: E402

from dsh_team import TeamServiceAPI  # noqa: E402
from host_spec.host.app import Host  # noqa: E402


async def main(url: str) -> None:
    host = await Host.open(url, "agent-teams", GatedModel(SCRIPT))
    workspace = tempfile.mkdtemp(prefix="dsh-store-team-")
    lead = await host.run(PROMPT, cwd=workspace)
    await host.quiesce()
    service = host.service(TeamServiceAPI)
    session = host.sessions.get(lead.id)
    assert session is not None
    print("ready", lead.id, host.store.holder, flush=True)  # type: ignore[union-attr]
    loop = asyncio.get_running_loop()
    while line := (await loop.run_in_executor(None, sys.stdin.readline)).rstrip("\n"):
        command, _, text = line.partition(" ")
        if command == "task":
            await service.create_task(lead, subject=text, description=f"{text}, made by the other process")
        elif command == "send":
            await service.send_message(lead, target="builder", content=[{"type": "text", "text": text}])
        await host.quiesce()
        print("done", session.durable_seq, flush=True)
    await host.close()


if __name__ == "__main__":
    import logging

    import structlog

    # stdout carries the protocol lines: logs go to stderr, warnings and worse only
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
                        logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    asyncio.run(main(sys.argv[1]))
