"""Scale figures: a million-event Lead, a thousand live tasks, a 32-member mail storm.

R1: cold resume of a Lead log of 1,000,000 Team events (open the host, resume the
    Lead, fold the Team, answer ``list_tasks``) with no checkpoint (the full fold)
    against a typed msgspec decode of the same file (goal: at least 0.5 of its
    speed; its seconds are printed with the old 3 s goal as ``R1f``).
R1s: the same cold resume with the checkpoint the previous run left at its clean
    stop (:mod:`dsh_team.checkpoint`): only the tail after it is folded (goal 0.5 s).
R1x: that checkpointed resume at 1M events over at 100k events (goal at most
    1.2: independent of history). The issue asks for 10M over 1M; a 10M-event log
    is 4 GB on disk and about 7 GB decoded (the host still reads and decodes the
    whole log on resume), more than a shared bench machine should hold, so the
    ratio is kept at a tenth of the size.
    Each contender runs in a fresh interpreter, alternating, so one
    run's heap does not tax the other; the files are written once per run into a
    temporary directory and deleted afterwards. The fresh-interpreter
    measurements are :mod:`benchmarks.scale_children`.
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
    session, acknowledged) on an in-memory host: CPU time per message of the last
    thousand over the first thousand (goal: at most 1.25, flat in history). What
    the host keeps per message must not be walked by every full garbage
    collection (each member's model context holds its messages as JSON, not as
    objects), or each message costs more than the one before. One thousand is
    about a second of a busy interpreter, where one full collection or a
    neighbour's burst moves it by a tenth or more, so the exchange runs
    ``MAIL_ROUNDS`` times on fresh hosts and the median of the runs' ratios is the
    figure (each run's first and last thousand are printed).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import scale_children  # noqa: E402
from benchmarks._common import report  # noqa: E402
from benchmarks.scale_children import EVENTS, LEAD, LIVE, MEMBERS  # noqa: E402
from benchmarks.team_setup import lead_events, teams_of, write_log  # noqa: E402
from host_spec.host.app import Host  # noqa: E402
from host_spec.host.models.scripted import ScriptedModel  # noqa: E402
from host_spec.host.store.jsonl import JsonlStore  # noqa: E402
from host_spec.messages import text_block  # noqa: E402

ROUNDS = 2
LIST_TASKS = 1_000
MESSAGES = 10_000
MAIL_ROUNDS = 5  # the median of five: one run in a busy minute moves its own ratio by a fifth
STATE_SIZES = (100_000, 1_000_000)
CHURN = 100_000


def _spawn(kind: str, directory: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, scale_children.__file__, kind, str(directory)], check=True, capture_output=True, text=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _no_checkpoint(directory: Path) -> None:
    """Remove the checkpoint a clean stop left, so the next resume folds the whole log."""
    JsonlStore(directory).checkpoints.path(LEAD, "team").unlink(missing_ok=True)


def _checkpointed(directory: Path, events: int) -> float:
    """Best-of-``ROUNDS`` seconds of a cold resume that starts from the checkpoint a clean stop left."""
    _no_checkpoint(directory)
    _spawn(f"resume-{events}", directory)  # a full fold, and its clean stop writes the checkpoint
    assert JsonlStore(directory).checkpoints.load(LEAD, "team") is not None
    return min(_spawn(f"resume-{events}", directory)["seconds"] for _ in range(ROUNDS))


def _resume_figures(directory: Path) -> dict[str, float]:
    started = time.perf_counter()
    write_log(JsonlStore(directory), LEAD, lead_events(EVENTS, LEAD, LIVE))
    written = time.perf_counter() - started
    size = JsonlStore(directory).path(LEAD).stat().st_size
    typed, resumed = [], []
    for _ in range(ROUNDS):
        typed.append(_spawn("typed", directory)["seconds"])
        _no_checkpoint(directory)
        resumed.append(_spawn("resume", directory))
    checkpointed = _checkpointed(directory, EVENTS)
    small = directory.parent / "resume-small"
    write_log(JsonlStore(small), LEAD, lead_events(EVENTS // 10, LEAD, LIVE))
    checkpointed_small = _checkpointed(small, EVENTS // 10)
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
        "checkpointed": checkpointed,
        "checkpointed_small": checkpointed_small,
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
    """CPU seconds per thousand messages, 32 members each sending to the next one at once.

    The process's CPU time, not the wall clock: the host is in memory (nothing
    waits on a disk), so the two agree on an idle machine, and on a shared one
    the wall clock also counts the time a neighbour held the core.
    """
    teams = teams_of(host)
    root = host.start_agent(await host.create_session("mail"), name="lead")
    for index in range(MEMBERS):
        await teams.spawn_teammate(
            root, name=f"m{index}", description="bench", prompt=[text_block("wait for mail")], context="fresh", provider="spawn"
        )
    targets = [f"m{index}" for index in range(MEMBERS)]
    content = [{"type": "text", "text": "status: parser done, starting the test suite now"}]
    gc.collect()  # what an earlier run left is freed now, not inside this run's first thousand
    per_thousand, sent, start = [], 0, time.process_time()
    while sent < MESSAGES:
        results = await asyncio.gather(
            *(teams.send_message(root, target=target, content=content) for target in targets)
        )
        assert all(result.status == "accepted" for result in results), results
        sent += MEMBERS
        if sent // 1000 > len(per_thousand):
            now = time.process_time()
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
    print(
        f"scale: cold resume from a checkpoint {resume['checkpointed']:.2f} s at {EVENTS} events, "
        f"{resume['checkpointed_small']:.2f} s at {EVENTS // 10} (the host still reads and decodes the whole log; "
        f"the checkpoint saves the fold)"
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
        ("R1f", resume["resume"], 3.0),
        ("R1s", resume["checkpointed"], 0.5),
        ("R1x", resume["checkpointed"] / resume["checkpointed_small"], 1.2),
        # Team state at 1M events over 100k events, same live board, no mail pending: flat in history.
        ("R2", big["bytes"] / small["bytes"], 1.5),
        ("R4", statistics.median(run[-1] / run[0] for run in runs), 1.25),
    ]


if __name__ == "__main__":
    for bench_id, ratio, goal in run():
        report(bench_id, ratio, goal)
