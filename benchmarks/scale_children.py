"""The scale figures' measurements that run in a fresh interpreter, one per process.

A million-event resume, a typed decode of the same file, and the resident size of
a folded Team state are each measured in a new interpreter
(``python benchmarks/scale_children.py <kind> <directory>``), so one
measurement's heap never taxes the next. Each prints one JSON object;
:mod:`benchmarks.bench_scale` starts them and reports the figures.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.team_setup import TypedLine, lead_events, teams_of  # noqa: E402
from dsh_team.core.fold import replay  # noqa: E402
from dsh_team.core.records import (  # noqa: E402
    TEAM_MESSAGE_DELIVERED,
    TEAM_MESSAGE_QUEUED,
    TEAM_MESSAGE_READ,
    VERSION,
    MessageDeliveredRecord,
    MessageQueuedRecord,
    MessageReadRecord,
    TaskRecord,
)
from dsh_team.core.snapshots import TeamMessageSnapshot, TeamTaskSnapshot  # noqa: E402
from host_spec.events import Event, json_encode  # noqa: E402
from host_spec.host.app import Host  # noqa: E402
from host_spec.host.models.scripted import ScriptedModel  # noqa: E402
from host_spec.host.store.jsonl import JsonlStore  # noqa: E402

#: Team events in the resumed Lead log.
EVENTS = 1_000_000
#: Live tasks on every generated board.
LIVE = 200
#: Members of the mail storm (and the targets of the generated mail).
MEMBERS = 32
#: The Lead session id of the generated logs.
LEAD = "lead"


def _rss() -> int:
    """Resident bytes of this process (Linux ``/proc``)."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _child_typed(directory: Path) -> dict[str, float]:
    path = JsonlStore(directory).path(LEAD)
    decoder = msgspec.json.Decoder(TypedLine)
    start = time.perf_counter()
    data = path.read_bytes()
    lines = decoder.decode_lines(data[data.index(b"\n") + 1 :])
    seconds = time.perf_counter() - start
    assert len(lines) == EVENTS
    return {"seconds": seconds}


def _child_read(directory: Path) -> dict[str, float]:
    before = _rss()
    _, events = JsonlStore(directory).read(LEAD)
    assert len(events) == EVENTS
    return {"rss": _rss() - before}


async def _child_resume(directory: Path, events: int = EVENTS) -> dict[str, float]:
    """A cold resume of the Lead (from the checkpoint its last clean stop left, if any), closed cleanly."""
    before = _rss()
    start = time.perf_counter()
    host = await Host.open(directory, None, ScriptedModel.from_mapping({}))
    host.plugins.load("dsh-team", {})
    lead = host.start_agent(await host.resume_session(LEAD), name="lead", source="resume")
    tasks = len(teams_of(host).list_tasks(lead))
    seconds = time.perf_counter() - start
    rss = _rss() - before
    await host.close()
    assert tasks == LIVE and lead.session.last_seq == events
    return {"seconds": seconds, "rss": rss}


def _mixed_events(count: int, team_id: str) -> Iterator[Event]:
    """A Lead log of ``count`` events, one in three mail: the task cycle of :func:`lead_events`
    interleaved with messages queued, delivered and read (none left pending)."""
    tasks = lead_events(count, team_id, LIVE)
    content = ({"type": "text", "text": "status: parser done, starting the test suite now"},)
    for seq in range(1, count + 1):
        number, step = divmod(seq - 1, 9)
        if step < 6:
            event = next(tasks)
            yield Event(seq=seq, time=event.time, type=event.type, data=event.data)
            continue
        message_id, target = f"team-message-{number}", f"member-{number % MEMBERS}"
        if step == 6:
            message = TeamMessageSnapshot(message_id, team_id, "lead", target, content)
            # The queue index, as the writer sets it (every message before this one was queued once).
            record = MessageQueuedRecord(version=VERSION, team_id=team_id, message=message, index=number)
            kind = TEAM_MESSAGE_QUEUED
        elif step == 7:
            kind = TEAM_MESSAGE_DELIVERED
            record = MessageDeliveredRecord(version=VERSION, team_id=team_id, message_id=message_id, target_id=target)
        else:
            kind = TEAM_MESSAGE_READ
            record = MessageReadRecord(version=VERSION, team_id=team_id, message_id=message_id, target_id=target)
        yield Event(seq=seq, time=1_700_000_000_000 + seq, type=kind, data=msgspec.Raw(json_encode(record)))


def _child_state(count: int) -> dict[str, float]:
    """Bytes the folded Team state of a mixed log keeps (the events are generated, never held)."""
    import gc

    before = _rss()
    state = replay(_mixed_events(count, LEAD), LEAD)
    gc.collect()
    retained = _rss() - before
    assert state.failure is None and len(state.tasks.listed()) == LIVE and not state.mail.pending
    return {"bytes": retained, "messages": len(state.mail.messages), "queued": state.mail.next_index}


def _churn_events(count: int, team_id: str) -> Iterator[Event]:
    """A Lead log of task churn: each step creates a task and, past ``LIVE`` live ones, deletes the oldest."""
    description = "a realistic description of what this task is about " * 3
    seq, made, oldest = 0, 0, 1
    while seq < count:
        made += 1
        tasks = [TeamTaskSnapshot(f"task-{made}", 1, f"subject {made}", description, "pending", (), ())]
        if made - oldest >= LIVE:
            tasks.append(TeamTaskSnapshot(f"task-{oldest}", 2, f"subject {oldest}", description, "deleted", (), ()))
            oldest += 1
        for task in tasks[: count - seq]:
            seq += 1
            data = msgspec.Raw(json_encode(TaskRecord(version=VERSION, team_id=team_id, task=task)))
            yield Event(seq=seq, time=1_700_000_000_000 + seq, type="team/task", data=data)


def _child_churn(count: int) -> dict[str, float]:
    """Bytes the folded Team state keeps after task churn: deleted tasks stay on the board as tombstones."""
    import gc

    before = _rss()
    state = replay(_churn_events(count, LEAD), LEAD)
    gc.collect()
    retained = _rss() - before
    assert state.failure is None and len(state.tasks.listed()) == LIVE
    return {"bytes": retained, "deleted": len(state.tasks.tasks) - len(state.tasks.live)}


def _child(kind: str, directory: Path) -> None:
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if kind == "resume":
        result = asyncio.run(_child_resume(directory))
    elif kind.startswith("resume-"):
        result = asyncio.run(_child_resume(directory, int(kind.removeprefix("resume-"))))
    elif kind.startswith("state-"):
        result = _child_state(int(kind.removeprefix("state-")))
    elif kind.startswith("churn-"):
        result = _child_churn(int(kind.removeprefix("churn-")))
    else:
        result = {"typed": _child_typed, "read": _child_read}[kind](directory)
    print(json.dumps(result))


if __name__ == "__main__":
    _child(sys.argv[1], Path(sys.argv[2]))
