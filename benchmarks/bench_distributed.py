"""Shared-store benchmarks: the Team on PostgreSQL (a real server, ``fsync`` on).

X1: serial durable ``update_task`` through the full service on a host whose store
    is PostgreSQL, against the same CAS board in PostgreSQL written directly (one
    ``UPDATE ... WHERE revision = %s`` plus its event row, one statement, one
    commit per mutation; :class:`PgBoard`), goal >= 0.8.
X1f: the same serial update against a single-row ``INSERT`` committed on its own
    (the floor of a durable write on this server), goal >= 0.8.
X1p: the same against LangGraph's ``PostgresSaver.put`` of a checkpoint holding
    the same event line, goal >= 1.3.
X3: cross-process wake-up latency: a batch committed by one process (the
    ``pg_notify`` inside its transaction) until another process, woken by
    LISTEN, has read the new events from its cursor; p50 and p99 in
    milliseconds, goal p99 <= 50 ms. It measures the wake-up path (commit,
    notification, cursor read); a member's call reaching the worker that runs it
    is ``bench_workers``' X3t.

Printed beside a peer, without a goal (``-``; :mod:`.pg_peers`, each in a child
process on a fresh database of the same server): X1e, our serial rate over
eventsourcing's PostgreSQL recorder ``insert_events`` of one event; X1d, over a
DBOS workflow of one step; X3q, procrastinate's ``defer`` -> job started p50
over X3's p50. A peer that is not installed or does not start prints why.

Printed without a goal: 16 members of one Lead process updating their own tasks
at once on PostgreSQL (group commit) against the serial rate; the followed
panel's push latency (``dsh team serve --store``): from before a Team record's
commit by another connection until the panel's feed has folded it and queued the
server-sent event for an open page (NOTIFY, cursor read, fold, encode); and the
memory of a live Lead resumed from a PostgreSQL log of 100,000 Team events (as M3
measures it on JSONL: resident, added by the host, events held decoded), against
the same Lead keeping every event (what each session on this store did before it
read its older events back by seq), each in a fresh interpreter. X2 (16 members
across 4 worker processes) is measured by ``bench_workers``.

The server is started by ``tests/kit_postgres.py`` in a temporary directory; when
none can start (no PostgreSQL binaries) the bench prints why and reports nothing.
The direct board, the floor, LangGraph's put and our updates alternate in short segments and the goal ratio is the median of the
rounds' ratios, as in ``bench_team``.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import Rounds, atimed, timed  # noqa: E402
from benchmarks.pg_peers import CHILD_PEERS, LangGraphPut, PgFloor, median_rate, run_child  # noqa: E402
from benchmarks.scale_children import LEAD, LIVE  # noqa: E402
from benchmarks.team_setup import claimed_board, lead_events, write_log  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SEGMENT = 0.4  # seconds per durable-write segment
ROUNDS = 6
MEMBERS = 16
WAKEUPS = 200  # cross-process wake-ups measured for X3
WAKEUP_GAP = 0.01  # seconds between two of them
PUSHES = 100  # followed-panel pushes measured
MEMORY_EVENTS = int(os.environ.get("DSH_BENCH_PG_MEMORY_EVENTS", "100000"))  # the Lead log of the memory line

_LISTEN = textwrap.dedent(
    """
    import json, sys, time
    from host_spec.host.store.postgres import Listener, PostgresStore
    url, session, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    listener, store = Listener(url), PostgresStore(url)
    listener.poll(0.1)
    cursor, seen = 0, {}
    print("ready", flush=True)
    while len(seen) < count:
        wakeup = listener.poll(1.0)
        if wakeup.resync or wakeup.tails.get(session, 0) > cursor:
            _, events = store.read_since(session, cursor)  # the log is the truth; the notice only woke us
            now = time.time_ns()
            for event in events:
                seen[event.seq] = now
            cursor = events[-1].seq if events else cursor
    print(json.dumps(seen), flush=True)
    """
)


class PgBoard:
    """The crew-style CAS board written directly in PostgreSQL: one statement and one commit per edit."""

    def __init__(self, url: str, data: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute("CREATE TABLE IF NOT EXISTS peer_tasks (id text PRIMARY KEY, revision bigint, subject text, data text)")
        self.conn.execute("CREATE TABLE IF NOT EXISTS peer_events (task_id text, revision bigint, data text)")
        self.conn.execute("INSERT INTO peer_tasks VALUES ('task-0', 1, 'bench task', %s) ON CONFLICT DO NOTHING", (data,))
        self.data, self.revision = data, 1

    def serial(self) -> int:
        query = (
            "WITH u AS (UPDATE peer_tasks SET revision = %(next)s, subject = %(subject)s, data = %(data)s "
            "WHERE id = 'task-0' AND revision = %(rev)s RETURNING id) "
            "INSERT INTO peer_events SELECT id, %(next)s, %(data)s FROM u"
        )
        params = {"next": self.revision + 1, "rev": self.revision, "data": self.data,
                  "subject": ("bench task", "bench task, edited")[self.revision % 2]}
        if self.conn.execute(query, params).rowcount != 1:
            raise RuntimeError(f"stale revision {self.revision}")
        self.revision += 1
        return 1

    def close(self) -> None:
        self.conn.close()


async def _board(url: str, skipped: dict[str, str]) -> tuple[dict[str, float], str]:
    """Our serial and grouped updates, alternating with the direct board, the floor and LangGraph's put."""
    from host_spec.events import encode_event
    from host_spec.host.app import Host
    from host_spec.host.models.scripted import ScriptedModel

    host = await Host.open(url, None, ScriptedModel.from_mapping({}))
    teams, session, root, members, views = await claimed_board(host, MEMBERS)
    line = (encode_event(session.events[-1]) + b"\n").decode()
    peer, floor = PgBoard(url, line), PgFloor(url, line)
    contenders: dict[str, Any] = {"direct": peer.serial, "floor": floor.serial}
    try:
        langgraph: LangGraphPut | None = LangGraphPut(url, line)
    except Exception as exc:  # not installed, or it would not start: the rest is measured all the same
        langgraph, skipped["langgraph"] = None, f"{type(exc).__name__}: {exc}"
    else:
        contenders["langgraph"] = langgraph.serial
    labels = ("bench task", "bench task, edited")

    async def edit(member: Any) -> None:
        view = views[member.id]
        views[member.id] = await teams.update_task(member, task_id=view.id, expected_revision=view.revision,
                                                   action="edit", subject=labels[view.revision % 2])

    async def serial() -> int:
        await edit(root)
        return 1

    async def group(seconds: float) -> tuple[int, float]:
        counts, start = [0] * MEMBERS, time.perf_counter()
        end = start + seconds

        async def loop(index: int, agent: Any) -> None:
            while time.perf_counter() < end:
                await edit(agent)
                counts[index] += 1

        await asyncio.gather(*(loop(index, agent) for index, agent in enumerate(members)))
        return sum(counts), time.perf_counter() - start

    rounds = Rounds()
    order = [*contenders, "serial", "group"]
    try:
        for number in range(ROUNDS):
            for key in order if number % 2 == 0 else reversed(order):
                if key == "serial":
                    rounds.add(key, await atimed(serial, SEGMENT))
                elif key == "group":
                    rounds.add(key, await group(SEGMENT))
                else:
                    rounds.add(key, timed(contenders[key], SEGMENT))
        assert session.durable_seq == session.last_seq
    finally:
        peer.close()
        floor.close()
        if langgraph is not None:
            langgraph.close()
        await host.close()
    ratios = {f"{key}_x": rounds.median_ratio("serial", key) for key in contenders}
    figures = {key: rounds.rate(key) for key in rounds} | ratios | {
        "X1": ratios["direct_x"], "group_x": rounds.median_ratio("group", "serial")}
    return figures, line


def _wakeups(url: str) -> list[float]:
    """Milliseconds from before each commit to the other process's cursor read of it."""
    from host_spec.events import SessionHeader
    from host_spec.host.store.postgres import PostgresStore
    from host_spec.testing import make_events

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-c", _LISTEN, url, "wake", str(WAKEUPS)], env=env,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert child.stdout is not None
    assert child.stdout.readline().startswith("ready")
    store = PostgresStore(url)
    log = store.create(SessionHeader(id="wake", created_at=1))
    sent: dict[int, int] = {}
    try:
        for seq in range(1, WAKEUPS + 1):
            time.sleep(WAKEUP_GAP)
            log.append(make_events(seq, 1), expected_seq=seq - 1)
            sent[seq] = time.time_ns()
            log.sync()
        seen = json.loads(child.stdout.readline())
    finally:
        log.close()
        store.close()
        child.wait(30)
    return [(seen[str(seq)] - sent[seq]) / 1e6 for seq in sent]


async def _panel_pushes(url: str) -> list[float]:
    """Milliseconds from before each Team record's commit to the followed panel's queued event for it."""
    from dsh_team.web.followed import FollowedRun
    from dsh_team.web.stream import Feed
    from host_spec.events import SessionHeader
    from host_spec.host.cli.backend_reader import BackendReader
    from host_spec.host.store.postgres import PostgresStore

    from benchmarks.team_setup import lead_events

    records = list(lead_events(PUSHES + 1, "lead"))
    store = PostgresStore(url)
    log = store.create(SessionHeader(id="lead", created_at=1))
    log.append(records[:1], expected_seq=0)
    log.sync()
    reader = BackendReader(PostgresStore(url))
    run = FollowedRun(reader.read("lead"), reader)
    feed = Feed(run)
    run.start(feed.poke)
    queue = feed.open(None)
    await queue.get()  # the first snapshot

    def commit(event: Any) -> None:
        log.append([event], expected_seq=event.seq - 1)
        log.sync()

    latencies: list[float] = []
    try:
        for event in records[1:]:
            await asyncio.sleep(WAKEUP_GAP)
            start = time.perf_counter()
            await asyncio.to_thread(commit, event)
            message = await asyncio.wait_for(queue.get(), 30)
            latencies.append((time.perf_counter() - start) * 1000)
            assert message is not None and message["id"] == str(event.seq)
    finally:
        feed.close_all()
        run.close()
        log.close()
        store.close()
        reader.store.close()
    return latencies


def _memory(url: str) -> dict[str, dict[str, Any]]:
    """A live Lead resumed from a PostgreSQL log of :data:`MEMORY_EVENTS` events, windowed and keeping all."""
    from benchmarks import memory_children
    from host_spec.host.store.postgres import PostgresStore

    store = PostgresStore(url)
    try:
        write_log(store, LEAD, lead_events(MEMORY_EVENTS, LEAD, LIVE))  # type: ignore[arg-type]  # any backend
    finally:
        store.close()
    figures = {}
    for kind in ("pglive", "pgall"):
        done = subprocess.run([sys.executable, memory_children.__file__, f"{kind}-{MEMORY_EVENTS}", url],
                              check=True, capture_output=True, text=True)
        figures[kind] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def run() -> list[tuple[str, float, float | None]]:
    sys.path.insert(0, str(REPO / "tests"))
    try:
        import psycopg  # noqa: F401
        from kit_postgres import PostgresServer, PostgresUnavailable
    except ImportError as exc:
        print(f"distributed: skipped: {exc} (pip install 'dsh-team[postgres]')")
        return []
    try:
        server = PostgresServer(durable=True)
        server.start()
    except PostgresUnavailable as exc:
        print(f"distributed: skipped: no PostgreSQL server could start: {exc}")
        return []
    skipped: dict[str, str] = {}
    try:
        board, line = asyncio.run(_board(server.new_database(), skipped))
        latencies = sorted(_wakeups(server.new_database()))
        peers = {name: run_child(name, server.new_database(), line, seconds=SEGMENT, rounds=ROUNDS) for name in CHILD_PEERS}
        pushes = sorted(asyncio.run(_panel_pushes(server.new_database())))
        memory = _memory(server.new_database())
    finally:
        server.destroy()
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
    print(f"distributed: durable update_task on PostgreSQL (serial) {board['serial']:8.0f} ops/s")
    print(f"distributed: the same CAS board written directly         {board['direct']:8.0f} ops/s  (X1 {board['X1']:.2f})")
    print(f"distributed: a single-row INSERT commit (the floor)      {board['floor']:8.0f} ops/s  (X1f {board['floor_x']:.2f})")
    results: list[tuple[str, float, float | None]] = [("X1", board["X1"], 0.8), ("X1f", board["floor_x"], 0.8)]
    if "langgraph" in board:
        print(f"distributed: LangGraph PostgresSaver.put                 {board['langgraph']:8.0f} ops/s  "
              f"(X1p {board['langgraph_x']:.2f})")
        results.append(("X1p", board["langgraph_x"], 1.3))
    else:
        print(f"distributed: peer langgraph (PostgresSaver.put) not measured: {skipped['langgraph']}")
    for name, bench_id, what in (("eventsourcing", "X1e", "eventsourcing's PostgreSQL recorder insert_events"),
                                 ("dbos", "X1d", "a DBOS workflow of one step")):
        found = peers[name]
        if isinstance(found, str):
            print(f"distributed: peer {name} not measured: {found}")
            continue
        rate = median_rate(found)
        print(f"distributed: {what:47s} {rate:8.0f} ops/s  ({bench_id} {board['serial'] / rate:.2f}: ours over it)")
        results.append((bench_id, board["serial"] / rate, None))
    print(f"distributed: {MEMBERS} members of one process at once       {board['group']:8.0f} ops/s  "
          f"({board['group_x']:.1f}x serial; X2, across 4 worker processes: bench_workers)")
    print(f"distributed: cross-process wake-up (commit -> NOTIFY -> cursor read), {len(latencies)} samples: "
          f"p50 {p50:.2f} ms, p99 {p99:.2f} ms")
    push50 = statistics.median(pushes)
    push99 = pushes[min(len(pushes) - 1, round(0.99 * (len(pushes) - 1)))]
    print(f"distributed: followed panel (commit -> NOTIFY -> cursor read -> fold -> SSE event queued), "
          f"{len(pushes)} samples: p50 {push50:.2f} ms, p99 {push99:.2f} ms")
    kept, every = memory["pglive"], memory["pgall"]
    print(f"distributed: live Lead on PostgreSQL after {kept['events']} Team events: resident {kept['rss'] / 1e6:.1f} MB "
          f"({kept['added'] / 1e6:.1f} MB added by the host; {kept['held']} events held decoded); keeping every event: "
          f"{every['rss'] / 1e6:.1f} MB ({every['added'] / 1e6:.1f} MB added; {every['held']} held)")
    found = peers["procrastinate"]
    if isinstance(found, str):
        print(f"distributed: peer procrastinate not measured: {found}")
    else:
        waits = sorted(found["latencies_ms"])
        wait50 = statistics.median(waits)
        print(f"distributed: procrastinate defer -> job started (LISTEN/NOTIFY), {len(waits)} samples: p50 {wait50:.2f} ms, "
              f"p99 {waits[min(len(waits) - 1, round(0.99 * (len(waits) - 1)))]:.2f} ms "
              f"(X3q {wait50 / p50:.2f}: its p50 over X3's)")
        results.append(("X3q", wait50 / p50, None))
    return results + [("X3p50", p50, 50.0), ("X3p99", p99, 50.0)]


if __name__ == "__main__":
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    from benchmarks._common import report

    for bench_id, measured, goal in run():
        report(bench_id, measured, goal)
