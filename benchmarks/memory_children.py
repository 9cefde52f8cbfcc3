"""The memory figures' measurements, each in a fresh interpreter (``python benchmarks/memory_children.py <kind> <directory>``).

Resident memory is only comparable between processes that start alike, so each
measurement runs in a new interpreter and prints one JSON object;
:mod:`benchmarks.bench_memory` starts them and reports the figures.

* ``live-<events>``: resume the Lead log of ``<events>`` Team events in
  ``<directory>/<events>``, fold the Team, answer ``list_tasks``, then do one
  durable task update as a live Lead does (its flush is when a session lets go
  of the events it no longer needs). Prints the process's resident bytes and
  what the host added since before it opened, plus the events the Lead session
  still holds decoded.
* ``pglive-<events>`` / ``pgall-<events>``: the same as ``live-<events>`` for
  the Lead log in the PostgreSQL database at the URL given instead of a
  directory; ``pgall`` keeps every event decoded (as every session on that
  store did before it read its history back by seq), for comparison.
* ``soak-<events>``: a live Lead on a JSONL store updates its constant board of
  tasks (16 concurrent callers, compare-and-set edits) until its log holds
  ``<events>`` events; prints the resident bytes at 10% of them and at the end.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.scale_children import LEAD, LIVE, _rss  # noqa: E402
from benchmarks.team_setup import teams_of  # noqa: E402
from host_spec.host.app import Host  # noqa: E402
from host_spec.host.models.scripted import ScriptedModel  # noqa: E402

#: Concurrent callers of the soak (they share the Lead's group commit).
SOAK_CALLERS = 16


async def _open(directory: Path | str) -> Host:
    host = await Host.open(directory, None, ScriptedModel.from_mapping({}, record=False))
    host.plugins.load("dsh-team", {"max_tasks": LIVE + 8})
    return host


async def _live(directory: Path | str, *, keep_all: bool = False) -> dict[str, Any]:
    before = _rss()
    host = await _open(directory)
    if keep_all:
        host.sessions.kept_events = 1 << 62
    lead = host.start_agent(await host.resume_session(LEAD), name="lead", source="resume")
    teams = teams_of(host)
    tasks = teams.list_tasks(lead)
    assert len(tasks) == LIVE
    first = tasks[0]
    await teams.update_task(lead, task_id=first.id, expected_revision=first.revision, action="edit", subject="live")
    gc.collect()
    result = {"rss": _rss(), "added": _rss() - before, "held": lead.session.held_events,
              "events": lead.session.last_seq}
    await host.close()
    return result


async def _soak(directory: Path, events: int) -> dict[str, Any]:
    host = await _open(directory)
    lead = host.start_agent(await host.create_session("soak"), name="lead")
    teams = teams_of(host)
    for index in range(LIVE):
        await teams.create_task(lead, subject=f"task {index}", description="one of the live board")
    session = lead.session
    samples: dict[str, int] = {}

    async def caller(offset: int) -> None:
        mine = [f"task-{number}" for number in range(1 + offset, LIVE + 1, SOAK_CALLERS)]
        revisions = dict.fromkeys(mine, 1)
        turn = 0
        while session.last_seq < events:
            task_id = mine[turn % len(mine)]
            view = await teams.update_task(
                lead, task_id=task_id, expected_revision=revisions[task_id], action="edit",
                subject=f"edit {turn} of {task_id}",
            )
            revisions[task_id] = view.revision
            turn += 1
            if "tenth" not in samples and session.last_seq >= events // 10:
                gc.collect()
                samples["tenth"] = _rss()

    await asyncio.gather(*(caller(offset) for offset in range(SOAK_CALLERS)))
    gc.collect()
    samples["end"] = _rss()
    result = {"tenth": samples["tenth"], "end": samples["end"], "events": session.last_seq,
              "held": session.held_events, "tasks": len(teams.list_tasks(lead))}
    await host.close()
    return result


def _child(kind: str, where: str) -> None:
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    name, count = kind.rsplit("-", 1)
    if name == "live":
        result = asyncio.run(_live(Path(where) / count))
    elif name in ("pglive", "pgall"):
        result = asyncio.run(_live(where, keep_all=name == "pgall"))
    else:
        result = asyncio.run(_soak(Path(where), int(count)))
    print(json.dumps(result))


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
