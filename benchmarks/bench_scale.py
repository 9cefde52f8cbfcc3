"""Scale figures: a million-event Lead, a thousand live tasks, a 32-member mail storm.

R1: cold resume of a Lead log of 1,000,000 Team events (open the host, resume the
    Lead, fold the Team, answer ``list_tasks``) against a typed msgspec decode of
    the same file (goal: at least 0.5 of its speed; the seconds are printed with
    the 3 s goal as ``R1s``). Each contender runs in a fresh interpreter, alternating, so one
    run's heap does not tax the other; the file is written once per run into a
    temporary directory and deleted afterwards.
R2: the bytes the folded Team state keeps for a log of tasks and mail (one event
    in three; every message read, none pending) with the same live board (200
    tasks) at 1M events over 100k events (resident growth of a fresh interpreter;
    the events are generated, never held); goal: at most 1.5, the board and the
    mailbox follow live tasks and open mail, not the history. Also printed: the
    resident memory the resume adds, per 100k events, beside what the stored
    events alone cost (a plain ``store.read``), and the Team state after 100k
    events of task churn (deleted tasks stay on the board as tombstones: the one
    part of the fold still proportional to history, shown so it is tracked).
R3: ``list_tasks`` at 1,000 live tasks (microseconds per call, printed).
R4: 32 members exchanging 10,000 messages (queued, delivered into the target's
    session, acknowledged) on an in-memory host: time per message of the last
    thousand over the first thousand (goal: at most 1.25, flat in history). One
    thousand is a few seconds of a busy interpreter, where one full garbage
    collection or a neighbour's burst moves it by a quarter, so the exchange runs
    ``MAIL_ROUNDS`` times on fresh hosts and the median of the runs' ratios is the
    figure (each run's first and last thousand are printed).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import report  # noqa: E402
from benchmarks.team_setup import TypedLine, lead_events, teams_of, write_log  # noqa: E402
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
from host_spec.messages import text_block  # noqa: E402

EVENTS = 1_000_000
LIVE = 200
ROUNDS = 2
LIST_TASKS = 1_000
MEMBERS = 32
MESSAGES = 10_000
MAIL_ROUNDS = 3
LEAD = "lead"
STATE_SIZES = (100_000, 1_000_000)
CHURN = 100_000


def _rss() -> int:
    """Resident bytes of this process (Linux ``/proc``)."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# ---------------------------------------------------------------- children (fresh interpreters)


def _child_typed(directory: Path) -> dict[str, float]:
    import msgspec

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


async def _child_resume(directory: Path) -> dict[str, float]:
    before = _rss()
    start = time.perf_counter()
    host = await Host.open(directory, None, ScriptedModel.from_mapping({}))
    host.plugins.load("dsh-team", {})
    lead = host.start_agent(await host.resume_session(LEAD), name="lead", source="resume")
    tasks = len(teams_of(host).list_tasks(lead))
    seconds = time.perf_counter() - start
    rss = _rss() - before
    await host.close()
    assert tasks == LIVE
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


def _spawn(kind: str, directory: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, kind, str(directory)], check=True, capture_output=True, text=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _resume_figures(directory: Path) -> dict[str, float]:
    started = time.perf_counter()
    write_log(JsonlStore(directory), LEAD, lead_events(EVENTS, LEAD, LIVE))
    written = time.perf_counter() - started
    size = JsonlStore(directory).path(LEAD).stat().st_size
    typed, resumed = [], []
    for _ in range(ROUNDS):
        typed.append(_spawn("typed", directory)["seconds"])
        resumed.append(_spawn("resume", directory))
    read = _spawn("read", directory)
    state = {count: _spawn(f"state-{count}", directory) for count in STATE_SIZES}
    churn = _spawn(f"churn-{CHURN}", directory)
    return {
        "state": state,
        "churn": churn,
        "written": written,
        "size": size,
        "typed": min(typed),
        "resume": min(r["seconds"] for r in resumed),
        "rss": min(r["rss"] for r in resumed),
        "events_rss": read["rss"],
    }


# ---------------------------------------------------------------- list_tasks, mail


async def _live_board(host: Host) -> float:
    teams = teams_of(host)
    lead = host.start_agent(await host.create_session("board"), name="lead")
    for index in range(LIST_TASKS):
        await teams.create_task(lead, subject=f"task {index}", description="one of a thousand live tasks")
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < 1.0:
        assert len(teams.list_tasks(lead)) == LIST_TASKS
        calls += 1
    return (time.perf_counter() - start) / calls


async def _mail(host: Host) -> list[float]:
    """Seconds per thousand messages, 32 members each sending to the next one at once."""
    teams = teams_of(host)
    root = host.start_agent(await host.create_session("mail"), name="lead")
    for index in range(MEMBERS):
        await teams.spawn_teammate(
            root, name=f"m{index}", description="bench", prompt=[text_block("wait for mail")], context="fresh", provider="spawn"
        )
    targets = [f"m{index}" for index in range(MEMBERS)]
    content = [{"type": "text", "text": "status: parser done, starting the test suite now"}]
    per_thousand, sent, start = [], 0, time.perf_counter()
    while sent < MESSAGES:
        results = await asyncio.gather(
            *(teams.send_message(root, target=target, content=content) for target in targets)
        )
        assert all(result.status == "accepted" for result in results), results
        sent += MEMBERS
        if sent // 1000 > len(per_thousand):
            now = time.perf_counter()
            per_thousand.append(now - start)
            start = now
    return per_thousand


async def _volatile_host() -> Host:
    config = {"max_members": MEMBERS + 8, "max_tasks": LIST_TASKS + 8, "allow_volatile_store": True}
    # The scripted model keeps no request log here: it would hold every conversation it saw.
    host = await Host.open(None, None, ScriptedModel.from_mapping({}, record=False))
    host.plugins.load("dsh-team", config)
    return host


async def _live(directory: Path) -> dict[str, Any]:
    host = await _volatile_host()
    try:
        board = await _live_board(host)
    finally:
        await host.close()
    runs = []
    for _ in range(MAIL_ROUNDS):  # a fresh host each time: no run inherits another's heap
        host = await _volatile_host()
        try:
            runs.append(await _mail(host))
        finally:
            await host.close()
    return {"list_tasks": board, "mail": runs}


def run() -> list[tuple[str, float, float]]:
    with tempfile.TemporaryDirectory(dir=os.environ.get("DSH_BENCH_DIR")) as tmp:
        resume = _resume_figures(Path(tmp) / "resume")
        live = asyncio.run(_live(Path(tmp) / "live"))
    per = 100_000 / EVENTS
    print(
        f"scale: {EVENTS} Team events ({resume['size'] / 1e6:.0f} MB, written in {resume['written']:.1f} s): "
        f"typed decode {resume['typed']:.2f} s, cold resume {resume['resume']:.2f} s (goal <= 3 s; "
        f"{resume['typed'] / resume['resume']:.2f} of decode speed; best of {ROUNDS})"
    )
    team_rss = resume["rss"] - resume["events_rss"]
    print(
        f"scale: resident memory after resume {resume['rss'] * per / 1e6:.1f} MB per 100k events; "
        f"the stored events alone {resume['events_rss'] * per / 1e6:.1f} MB per 100k; "
        f"host + Team state beyond them {team_rss / 1e6:.1f} MB for {LIVE} live tasks"
    )
    small, big = (resume["state"][count] for count in STATE_SIZES)
    print(
        f"scale: Team state folded from a log of tasks and mail ({LIVE} live tasks, no mail pending): "
        f"{small['bytes'] / 1e6:.1f} MB at {STATE_SIZES[0]} events, {big['bytes'] / 1e6:.1f} MB at {STATE_SIZES[1]} "
        f"({big['bytes'] / small['bytes']:.1f}x for {STATE_SIZES[1] // STATE_SIZES[0]}x the history; "
        f"{big['messages']:.0f} of {big['queued']:.0f} messages kept)"
    )
    churn = resume["churn"]
    print(
        f"scale: Team state after {CHURN} events of task churn (create, delete the oldest; {LIVE} live): "
        f"{churn['bytes'] / 1e6:.1f} MB; {churn['deleted']:.0f} deleted tasks kept as tombstones "
        f"({churn['bytes'] / max(churn['deleted'], 1):.0f} B each; not yet bounded)"
    )
    print(f"scale: list_tasks at {LIST_TASKS} live tasks {live['list_tasks'] * 1e6:.0f} us per call")
    runs = live["mail"]
    print(
        f"scale: {MEMBERS} members, {MESSAGES} messages, {MAIL_ROUNDS} runs: first/last thousand "
        + ", ".join(f"{run[0] * 1000:.0f}/{run[-1] * 1000:.0f}" for run in runs)
        + " us/msg"
    )
    return [
        ("R1", resume["typed"] / resume["resume"], 0.5),
        ("R1s", resume["resume"], 3.0),
        # Team state at 1M events over 100k events, same live board, no mail pending: flat in history.
        ("R2", big["bytes"] / small["bytes"], 1.5),
        ("R4", statistics.median(run[-1] / run[0] for run in runs), 1.25),
    ]


def _child(kind: str, directory: Path) -> None:
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if kind == "resume":
        result = asyncio.run(_child_resume(directory))
    elif kind.startswith("state-"):
        result = _child_state(int(kind.removeprefix("state-")))
    elif kind.startswith("churn-"):
        result = _child_churn(int(kind.removeprefix("churn-")))
    else:
        result = {"typed": _child_typed, "read": _child_read}[kind](directory)
    print(json.dumps(result))


if __name__ == "__main__":
    if len(sys.argv) == 3:
        _child(sys.argv[1], Path(sys.argv[2]))
    else:
        for bench_id, ratio, goal in run():
            report(bench_id, ratio, goal)
