"""Memory figures: a live Lead follows its live state, not its history.

M2: resident memory of a live Lead process after 1,000,000 Team events over
    after 100,000 (goal: at most 1.2). Each Lead resumes a log of task records
    with the same live board (200 tasks), folds the Team, answers
    ``list_tasks`` and does one durable update, as a Lead that kept working
    does; the events behind it are read back from the log when asked for, never
    held (:mod:`host_spec.host.store.history`).
M3: megabytes per 100k events that the live Lead of the 1M-event log still
    holds: what the host added since before it opened, per 100k events (goal:
    at most 5; a session that kept every decoded event held about 67).
Soak: a live Lead updates its constant board of tasks (16 concurrent callers)
    until its log holds 1,000,000 events, a day of a busy Team; its resident
    memory at the end is within 10% of its resident memory at 10% of the run
    (printed, with the goal, as the soak line; reported as ``M4``, end over
    tenth, goal at most 1.10). The soak's log is kept in ``/dev/shm`` when the
    machine has it: it measures memory, and the disk's speed would only set how
    long it takes.

Mail index: what a member's mail index (:mod:`dsh_team.mail.message_index`)
    holds after it recorded 100,000 Team messages, each read by its Lead since,
    and what an index that keeps every id holds (printed only, no goal: bounded
    by its window and the open mail, not by the messages).

Every memory figure comes from a fresh interpreter
(:mod:`benchmarks.memory_children`): resident memory is comparable only
between processes that started alike.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import msgspec

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import memory_children  # noqa: E402
from benchmarks._common import report  # noqa: E402
from benchmarks.scale_children import LEAD, LIVE  # noqa: E402
from benchmarks.team_setup import lead_events, write_log  # noqa: E402
from dsh_team.mail.message_index import MessageIndex  # noqa: E402
from host_spec.events import Event, EventType, json_encode  # noqa: E402
from host_spec.host.store.jsonl import JsonlStore  # noqa: E402

SIZES = (100_000, 1_000_000)
#: Team messages a member records for the mail-index line.
MAIL_MESSAGES = 100_000
SOAK_EVENTS = int(os.environ.get("DSH_BENCH_SOAK_EVENTS", "1000000"))


def _spawn(kind: str, directory: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, memory_children.__file__, kind, str(directory)], check=True, capture_output=True, text=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _soak_dir() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else os.environ.get("DSH_BENCH_DIR")


def _mail_events(count: int) -> list[Event]:
    """A member's log of ``count`` Team messages, each answered by a reply."""
    events: list[Event] = []
    reply = msgspec.Raw(json_encode({"turn": 1, "step": 1, "content": []}))
    for number in range(count):
        source = {"kind": "team-message", "team_id": LEAD, "message_id": f"team-message-{number}"}
        body = {"id": f"team-message-{number}", "role": "user", "content": [], "source": source}
        events.append(Event(seq=2 * number + 1, time=0, type=EventType.USER_MESSAGE, data=msgspec.Raw(json_encode(body))))
        events.append(Event(seq=2 * number + 2, time=0, type=EventType.ASSISTANT_MESSAGE, data=reply))
    return events


def mail_index_line(count: int = MAIL_MESSAGES) -> str:
    """The mail-index line: the bounded index (every message read by its Lead) and one that keeps every id."""
    events = _mail_events(count)
    bounded = MessageIndex(settled=lambda team_id, message_id: True).fold(events)
    every = MessageIndex().fold(events)  # no Lead to ask: keeps every Team message
    return (
        f"memory: a member's mail index after {count} Team messages (each read by its Lead): "
        f"{bounded.held} ids and receipts held (an index of every id: {every.held})"
    )


def run() -> list[tuple[str, float, float]]:
    print(mail_index_line())
    with tempfile.TemporaryDirectory(dir=os.environ.get("DSH_BENCH_DIR")) as tmp:
        for count in SIZES:
            write_log(JsonlStore(Path(tmp) / str(count)), LEAD, lead_events(count, LEAD, LIVE))
        live = {count: _spawn(f"live-{count}", Path(tmp)) for count in SIZES}
    with tempfile.TemporaryDirectory(dir=_soak_dir()) as tmp:
        soak = _spawn(f"soak-{SOAK_EVENTS}", Path(tmp))
    small, big = (live[count] for count in SIZES)
    per = 100_000 / SIZES[1]
    for count in SIZES:
        figures = live[count]
        print(
            f"memory: live Lead after {count} Team events: resident {figures['rss'] / 1e6:.1f} MB "
            f"({figures['added'] / 1e6:.1f} MB added by the host; {figures['held']} events held decoded)"
        )
    print(
        f"memory: soak of {soak['events']} events on a constant board of {soak['tasks']} tasks: resident "
        f"{soak['tenth'] / 1e6:.1f} MB at 10%, {soak['end'] / 1e6:.1f} MB at the end "
        f"({soak['end'] / soak['tenth']:.3f}x; goal: within 10%)"
    )
    return [
        ("M2", big["rss"] / small["rss"], 1.2),
        ("M3", big["added"] * per / 1e6, 5.0),
        ("M4", soak["end"] / soak["tenth"], 1.10),
    ]


if __name__ == "__main__":
    for bench_id, ratio, goal in run():
        report(bench_id, ratio, goal)
