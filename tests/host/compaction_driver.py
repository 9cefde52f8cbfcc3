"""Compaction crash driver: a long scripted session on a small window, SIGKILLed at a chosen point.

Usage: ``python compaction_driver.py DATA_DIR POINT``

A real host on a JSONL store runs the root ``lead`` through a long scripted job of
echo calls, with a context window small enough that it compacts. It kills this very
process with SIGKILL (no cleanup, no final flush) at:

``during-summary``  inside the summary call: nothing of the compaction is written yet
``after-record``    right after the group commit that made the compaction record durable

Any other point never kills; exit status 3 means the run finished without being killed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agent_kit import echo_tool  # noqa: E402
from host_spec import hookimpl  # noqa: E402
from host_spec.events import EventType  # noqa: E402
from host_spec.host.app import Host  # noqa: E402
from host_spec.host.models.scripted import ScriptedModel, parse_script  # noqa: E402

WINDOW = 1500
PROMPT = "[first] do the long job"
SCRIPT = {"lead": [*({"tool_calls": [{"name": "echo", "arguments": {"text": f"[m{i}] " + "x" * 400}}]}
                     for i in range(8)), {"text": "all done"}]}


class KillingModel(ScriptedModel):
    """The scripted model, killing the process inside its first summary call (``during-summary``)."""

    point: str = ""

    async def complete(self, request: Any) -> Any:
        if request.purpose == "compaction" and self.point == "during-summary":
            os.kill(os.getpid(), signal.SIGKILL)
        return await super().complete(request)


class KillAfterRecord:
    """Kills the process once a compaction record is durable."""

    @hookimpl
    def dsh_session_flushed(self, session: Any, durable_seq: int) -> None:
        if any(e.type == EventType.CONTEXT_COMPACTED and e.seq <= durable_seq for e in session.events):
            os.kill(os.getpid(), signal.SIGKILL)


def model(point: str = "") -> KillingModel:
    found = KillingModel(parse_script(SCRIPT), context_window=WINDOW)
    found.point = point
    return found


async def main(data_dir: str, point: str) -> None:
    extra = [("killer", KillAfterRecord())] if point == "after-record" else []
    host = await Host.open(data_dir, None, model(point), extra_plugins=extra)
    host.tools.register(echo_tool())
    await host.run(PROMPT, session_id="lead")
    await host.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
    sys.exit(3)
