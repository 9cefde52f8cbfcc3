"""Team benchmarks: durable task mutations, cold replay, and read cost vs log length.

P1: one member doing durable ``update_task`` (CAS edit through the full service on
    a real host with JSONL persistence) against raw ``os.write`` + ``os.fsync`` of
    the same event line in the same directory (goal: at least 0.8 of raw).
P2: 16 members each updating their own task concurrently (one Lead log, group
    commit; each member loops in its own asyncio task for the segment, as each
    SQLite writer loops in its own thread) against the raw serial ``write+fsync``
    rate (goal: at least 4x raw).
P3: cold replay of a 100k-event Lead log (store read + fold) against a plain typed
    msgspec decode of the same file's lines (goal: at least 0.5 of its speed).
P4: ``list_tasks`` + ``get_task`` time on a 100k-event Lead over the same board at
    1k events (goal: at most 1.2; reads never re-scan the log).
P6: serial durable ``update_task`` against a crew-style SQLite CAS update (WAL,
    ``synchronous=FULL``, one commit per mutation; :mod:`benchmarks.peers`), goal >= 0.95:
    parity. The package stays pure Python, and the serial update is at the disk's
    floor plus the Team's Python; parity is met when the median of three
    consecutive ``make bench`` runs is at least 0.95.
P7: 16 members updating at once against SQLite with 16 writer connections, goal >= 4.

Printed without a goal: the host's own share of a serial update, an event of the
same size appended to another session of the same host and flushed (the store,
its group commit and every plugin's session hooks, but no Team logic), against
SQLite serial, in rounds of their own after the goal lines' rounds. It splits P6
into what the host costs and what the Team adds.

fsync latency drifts on shared machines, so contenders run in alternating short
segments (every other round backwards) and each goal ratio is the median of the
rounds' ratios, each round's contenders having run side by side; the printed
rates are totals. Every segment does the same durable work: one fsync (or
fdatasync) per acknowledged mutation or per group commit.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import Rounds, Totals, report, timed, atimed  # noqa: E402
from benchmarks.peers import RawAppend, RawPreallocated, SqliteBoard  # noqa: E402
from benchmarks.team_setup import BIG, LIVE_TASKS, SMALL, TypedLine, claimed_board, lead_events, teams_of, write_log  # noqa: E402
from dsh_team.core.fold import replay  # noqa: E402
from host_spec.events import encode_event  # noqa: E402
from host_spec.host.app import Host  # noqa: E402
from host_spec.host.models.scripted import ScriptedModel  # noqa: E402
from host_spec.host.store.jsonl import JsonlStore  # noqa: E402

SEGMENT = 0.4  # seconds per measurement segment (reads)
ROUNDS = 5  # segments per contender (reads)
DURABLE_SEGMENT = 0.25  # seconds per durable-write segment
DURABLE_ROUNDS = 10  # rounds of durable-write segments, every contender once per round
FLOOR_EVENT = "bench/note"  # a plain event type no plugin folds
FLOOR_WARMUP = 300
MEMBERS = 16

# ---------------------------------------------------------------- P1 / P2


async def _durable(directory: Path) -> dict[str, float]:
    host = await Host.open(directory, None, ScriptedModel.from_mapping({}))
    teams, session, root, members, views = await claimed_board(host, MEMBERS)
    line = encode_event(session.events[-1]) + b"\n"
    raw, preallocated = RawAppend(directory / "raw.jsonl", line), RawPreallocated(directory / "raw.pre", line)
    sqlite = SqliteBoard(directory / "peer.sqlite", MEMBERS, line.decode())
    labels = ("bench task", "bench task, edited")
    plain = await host.create_session("host-floor")  # no Team logic: the host's share of P6
    note = session.events[-1].data  # the same payload bytes as the Team line

    async def floor() -> int:
        plain.append(FLOOR_EVENT, note, write_ahead=True)
        await plain.flush()
        return 1

    for _ in range(FLOOR_WARMUP):  # past the preallocation threshold, as the Lead log is
        await floor()

    async def edit(member: Any) -> None:
        view = views[member.id]
        views[member.id] = await teams.update_task(
            member,
            task_id=view.id,
            expected_revision=view.revision,
            action="edit",
            subject=labels[view.revision % 2],
        )

    async def serial() -> int:
        await edit(root)
        return 1

    async def group(seconds: float) -> tuple[int, float]:
        """Every member updating its own task in its own task for ``seconds``, like the SQLite writer threads."""
        clock = time.perf_counter
        counts = [0] * MEMBERS
        start = clock()
        end = start + seconds

        async def member(index: int, agent: Any) -> None:
            while clock() < end:
                await edit(agent)
                counts[index] += 1

        await asyncio.gather(*(member(index, agent) for index, agent in enumerate(members)))
        return sum(counts), clock() - start

    async def segment(key: str) -> tuple[int, float]:
        if key == "serial":
            return await atimed(serial, DURABLE_SEGMENT)
        if key == "floor":
            return await atimed(floor, DURABLE_SEGMENT)
        if key == "group":
            return await group(DURABLE_SEGMENT)
        if key == "sqlite_group":
            return sqlite.concurrent(DURABLE_SEGMENT)
        step = {"raw": raw.step, "sqlite": sqlite.serial, "preallocated": preallocated.step}[key]
        return timed(step, DURABLE_SEGMENT)

    rounds = Rounds()
    order = ["raw", "serial", "sqlite", "group", "sqlite_group", "preallocated"]
    share = Rounds()  # its own rounds after the goal lines' rounds, which it leaves as they were
    try:
        for number in range(DURABLE_ROUNDS):
            # Every other round runs the contenders backwards, so a drift inside a
            # round favours nobody.
            for key in order if number % 2 == 0 else reversed(order):
                rounds.add(key, await segment(key))
        assert session.durable_seq == session.last_seq
        for number in range(DURABLE_ROUNDS):
            for key in ("floor", "sqlite") if number % 2 == 0 else ("sqlite", "floor"):
                share.add(key, await segment(key))
    finally:
        raw.close()
        preallocated.close()
        sqlite.close()
        await host.close()
    ratios = {
        "P1": rounds.median_ratio("serial", "raw"),
        "P2": rounds.median_ratio("group", "raw"),
        "P6": rounds.median_ratio("serial", "sqlite"),
        "P7": rounds.median_ratio("group", "sqlite_group"),
        "floor_sqlite": share.median_ratio("floor", "sqlite"),
    }
    return {key: rounds.rate(key) for key in rounds} | ratios | {"floor": share.rate("floor"), "line": float(len(line))}


# ---------------------------------------------------------------- P3 / P4


def _replay_ratio(store: JsonlStore, session_id: str, count: int) -> tuple[float, float, float]:
    path = store.path(session_id)
    typed = msgspec.json.Decoder(TypedLine)

    def baseline() -> int:
        data = path.read_bytes()
        lines = typed.decode_lines(data[data.index(b"\n") + 1 :])
        assert len(lines) == count
        return 1

    def ours() -> int:
        header, events = store.read(session_id)
        state = replay(events, header.id)
        assert state.failure is None and state.position == count
        return 1

    totals = Totals()
    for _ in range(ROUNDS):
        totals.add("typed", timed(baseline, SEGMENT))
        totals.add("replay", timed(ours, SEGMENT))
    typed_rate, replay_rate = totals.rate("typed"), totals.rate("replay")
    return replay_rate / typed_rate, 1 / typed_rate, 1 / replay_rate


async def _reads(directory: Path) -> dict[str, float]:
    store = JsonlStore(directory)
    write_log(store, "big", lead_events(BIG, "big"))
    write_log(store, "small", lead_events(SMALL, "small"))
    replay_ratio, typed_s, replay_s = _replay_ratio(store, "big", BIG)
    host = await Host.open(directory, None, ScriptedModel.from_mapping({}))
    host.plugins.load("dsh-team", {})
    teams = teams_of(host)
    leads = {}
    for name in ("big", "small"):
        leads[name] = host.start_agent(await host.resume_session(name), name="lead", source="resume")

    def reader(agent: Any) -> Callable[[], int]:
        def step() -> int:
            assert len(teams.list_tasks(agent)) == LIVE_TASKS
            teams.get_task(agent, "task-7")
            return 1

        return step

    totals = Totals()
    ratios = []
    try:
        for _ in range(ROUNDS * 3):  # short paired segments; the median pair ratio resists noise
            small_ops, small_s = timed(reader(leads["small"]), SEGMENT / 4)
            big_ops, big_s = timed(reader(leads["big"]), SEGMENT / 4)
            totals.add("small", (small_ops, small_s))
            totals.add("big", (big_ops, big_s))
            ratios.append((small_ops / small_s) / (big_ops / big_s))
    finally:
        await host.close()
    return {
        "replay_ratio": replay_ratio,
        "typed_s": typed_s,
        "replay_s": replay_s,
        "read_small": totals.rate("small"),
        "read_big": totals.rate("big"),
        "read_ratio": statistics.median(ratios),
    }


def run() -> list[tuple[str, float, float]]:
    with tempfile.TemporaryDirectory(dir=os.environ.get("DSH_BENCH_DIR")) as tmp:
        durable = asyncio.run(_durable(Path(tmp) / "durable"))
        reads = asyncio.run(_reads(Path(tmp) / "reads"))
    raw, serial, group = durable["raw"], durable["serial"], durable["group"]
    print(
        f"team: task event line {durable['line']:.0f} B, {DURABLE_ROUNDS} rounds of interleaved "
        f"{DURABLE_SEGMENT}s segments (rates: totals; P1/P2/P6/P7: median of the rounds' ratios)"
    )
    print(f"team: raw os.write+os.fsync           {raw:9.0f} ops/s")
    print(f"team: durable update_task (serial)    {serial:9.0f} ops/s  ({serial / raw:.2f} of raw)")
    print(f"team: {MEMBERS} members updating at once     {group:9.0f} ops/s  ({group / raw:.2f} of raw)")
    pre, sqlite, sqlite_group = durable["preallocated"], durable["sqlite"], durable["sqlite_group"]
    print(f"team: raw pwrite+fdatasync (prealloc) {pre:9.0f} ops/s  ({pre / raw:.2f} of raw)")
    print(f"team: SQLite WAL CAS update (serial)  {sqlite:9.0f} ops/s  ({sqlite / raw:.2f} of raw)")
    print(f"team: SQLite, {MEMBERS} writer connections  {sqlite_group:9.0f} ops/s  ({sqlite_group / raw:.2f} of raw)")
    print(
        f"team: host append+flush, no Team logic {durable['floor']:8.0f} ops/s  "
        f"({durable['floor_sqlite']:.2f} of SQLite serial; P6 is {durable['P6']:.2f}: the rest is the Team's share)"
    )
    print(
        f"team: {BIG} events: typed decode {reads['typed_s'] * 1000:.0f} ms, "
        f"cold replay {reads['replay_s'] * 1000:.0f} ms ({reads['replay_ratio']:.2f} of decode speed)"
    )
    small, big = reads["read_small"], reads["read_big"]
    print(
        f"team: list_tasks+get_task at {SMALL} events {small:8.0f}/s, at {BIG} events {big:8.0f}/s "
        f"(median paired time ratio {reads['read_ratio']:.2f})"
    )
    return [
        ("P1", durable["P1"], 0.8),
        ("P2", durable["P2"], 4.0),
        ("P6", durable["P6"], 0.95),
        ("P7", durable["P7"], 4.0),
        ("P3", reads["replay_ratio"], 0.5),
        ("P4", reads["read_ratio"], 1.2),
    ]


if __name__ == "__main__":
    for bench_id, ratio, goal in run():
        report(bench_id, ratio, goal)
