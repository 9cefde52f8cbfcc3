"""Peers on the PostgreSQL server ``bench_distributed`` starts: what a user would pick instead of us.

Every peer runs on the same server in the same run as our figure, with the
server's durability (``fsync`` on, ``synchronous_commit`` on, the default), one
durable operation per call, serially:

* :class:`PgFloor`: a single-row ``INSERT`` in its own transaction through
  psycopg (the floor of any durable write on this server; X1f);
* :class:`LangGraphPut`: LangGraph's ``PostgresSaver.put`` of a checkpoint whose
  one channel holds the same event line our log stores (X1p);
* ``eventsourcing``: its PostgreSQL aggregate recorder's ``insert_events`` of one
  stored event of the same bytes;
* ``dbos``: a DBOS workflow of one step (what a durable step costs there);
* ``procrastinate``: the latency from ``defer`` until the worker starts the job
  (LISTEN/NOTIFY), next to our commit -> NOTIFY -> cursor read (X3).

They are bench-only dependencies (the ``bench`` extra, which ``make bench``
installs); nothing here is imported by the package. The last three run in a
child process each (``python -m benchmarks.pg_peers NAME URL``: DBOS keeps
process-wide state, and a peer that crashes must not take the bench with it),
which prints one JSON line; a peer that cannot be imported or started prints a
reason instead (:func:`run_child` returns it as a string).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

__all__ = ["CHILD_PEERS", "LangGraphPut", "PgFloor", "run_child"]

REPO = Path(__file__).resolve().parent.parent
#: The peers measured in a child process each, and what their figure is.
CHILD_PEERS = ("eventsourcing", "dbos", "procrastinate")


class PgFloor:
    """A single-row ``INSERT`` committed on its own: the floor of a durable write on this server."""

    def __init__(self, url: str, data: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute("CREATE TABLE IF NOT EXISTS floor_rows (data text)")
        self.data = data

    def serial(self) -> int:
        self.conn.execute("INSERT INTO floor_rows VALUES (%s)", (self.data,))
        return 1

    def close(self) -> None:
        self.conn.close()


class LangGraphPut:
    """LangGraph's ``PostgresSaver.put``: one checkpoint per call, its channel holding ``data``.

    Raises:
        ImportError: ``langgraph-checkpoint-postgres`` is not installed.
    """

    def __init__(self, url: str, data: str) -> None:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        # as PostgresSaver.from_conn_string connects
        self.conn = psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)  # type: ignore[arg-type]
        self.saver = PostgresSaver(self.conn)
        self.saver.setup()
        self.config: Any = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
        self.data, self.step = data, 0

    def serial(self) -> int:
        from langgraph.checkpoint.base import empty_checkpoint

        self.step += 1
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"task": self.data}
        checkpoint["channel_versions"] = {"task": self.step}
        self.config = self.saver.put(self.config, checkpoint, {"source": "loop", "step": self.step}, {"task": self.step})
        return 1

    def close(self) -> None:
        self.conn.close()


def _rate(step: Any, seconds: float, rounds: int) -> list[float]:
    """Operations per second of ``step()`` in ``rounds`` segments of ``seconds`` (after a short warm-up)."""
    for _ in range(20):
        step()
    rates = []
    for _ in range(rounds):
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            step()
            count += 1
        rates.append(count / (time.perf_counter() - start))
    return rates


def _eventsourcing(url: str, data: bytes, seconds: float, rounds: int) -> dict[str, Any]:
    from eventsourcing.persistence import StoredEvent
    from eventsourcing.postgres import PostgresAggregateRecorder, PostgresDatastore
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(url)
    datastore = PostgresDatastore(str(info["dbname"]), str(info["host"]), str(info.get("port", 5432)),
                                  str(info.get("user", "postgres")), str(info.get("password", "")))
    recorder = PostgresAggregateRecorder(datastore)
    recorder.create_table()
    originator, version = uuid.uuid4(), [0]

    def step() -> None:
        version[0] += 1
        recorder.insert_events([StoredEvent(originator_id=originator, originator_version=version[0], topic="bench", state=data)])

    try:
        return {"rates": _rate(step, seconds, rounds)}
    finally:
        datastore.close()


def _dbos(url: str, data: bytes, seconds: float, rounds: int) -> dict[str, Any]:
    import logging

    from dbos import DBOS

    logging.getLogger("dbos").setLevel(logging.WARNING)
    DBOS(config={"name": "dshbench", "system_database_url": url.replace("postgresql://", "postgresql+psycopg://", 1),
                 "log_level": "WARNING"})
    text = data.decode()

    @DBOS.step()
    def one_step(value: str) -> int:
        return len(value)

    @DBOS.workflow()
    def flow(value: str) -> int:
        return one_step(value)

    DBOS.launch()
    try:
        return {"rates": _rate(lambda: flow(text), seconds, rounds)}
    finally:
        DBOS.destroy()


def _procrastinate(url: str, samples: int = 60, gap: float = 0.01) -> dict[str, Any]:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))
    started: dict[int, float] = {}

    @app.task(name="ping")
    async def ping(number: int) -> None:
        started[number] = time.perf_counter()

    async def main() -> list[float]:
        async with app.open_async():
            await app.schema_manager.apply_schema_async()
            worker = asyncio.create_task(app.run_worker_async(wait=True, install_signal_handlers=False))
            sent: dict[int, float] = {}
            for number in range(-1, samples):  # job -1 warms up: the worker may not listen yet (it polls every 5 s)
                await asyncio.sleep(gap)
                sent[number] = time.perf_counter()
                await ping.defer_async(number=number)
                deadline = time.perf_counter() + 30
                while number not in started and time.perf_counter() < deadline:
                    await asyncio.sleep(0.0002)
            worker.cancel()
            try:
                await worker
            except asyncio.CancelledError:
                pass
            return [(started[n] - sent[n]) * 1000 for n in sent if n in started and n >= 0]

    return {"latencies_ms": asyncio.run(main())}


def run_child(name: str, url: str, data: str, *, seconds: float, rounds: int) -> dict[str, Any] | str:
    """Measure peer ``name`` in a child process: its JSON figures, or why it could not run (a string)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    try:
        done = subprocess.run([sys.executable, "-m", "benchmarks.pg_peers", name, url, str(seconds), str(rounds)],
                              input=data, capture_output=True, text=True, env=env, timeout=300, cwd=REPO)
    except subprocess.TimeoutExpired:
        return "did not finish in 300 s"
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"failed (exit {done.returncode}): {last}"
    found: dict[str, Any] | str = json.loads(lines[-1])
    return found


def _main(argv: list[str]) -> int:
    name, url, seconds, rounds = argv[0], argv[1], float(argv[2]), int(argv[3])
    data = sys.stdin.read().encode()
    try:
        if name == "eventsourcing":
            figures = _eventsourcing(url, data, seconds, rounds)
        elif name == "dbos":
            figures = _dbos(url, data, seconds, rounds)
        elif name == "procrastinate":
            figures = _procrastinate(url)
        else:
            raise SystemExit(f"unknown peer {name}")
    except ImportError as exc:
        print(json.dumps(f"not installed: {exc} (make bench installs the bench extra)"))
        return 0
    print(json.dumps(figures), flush=True)
    return 0


def median_rate(figures: dict[str, Any]) -> float:
    """The median of a child's segment rates."""
    return statistics.median(figures["rates"])


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
