"""Storage benchmarks: the cost of durability through ``Session`` + ``JsonlStore``.

S1: one writer doing append+flush, against a raw ``os.write`` + ``os.fsync`` loop
    of the same bytes in the same directory (goal: at least 0.8 of raw).
S2: 16 concurrent writers each doing append+flush (group commit), against the
    raw serial rate (goal: at least 4x raw).

fsync latency drifts a lot on shared machines, so the raw loop and ours run in
alternating short segments and each ratio compares totals of interleaved runs.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import report  # noqa: E402
from host_spec.events import Cause, SessionHeader, encode_event  # noqa: E402
from host_spec.host.store.session import Session  # noqa: E402
from host_spec.host.store.jsonl import JsonlStore  # noqa: E402

SEGMENT = 0.5  # seconds per measurement segment
ROUNDS = 6  # segments per contender and benchmark
WRITERS = 16
TYPE = "team/message/queued"
CAUSE = Cause(agent_id="bench-agent", call_id="call-0001", tool="team_send")
PAYLOAD = {
    "id": "msg-0001",
    "role": "user",
    "content": [{"type": "text", "text": "status update: parser done, starting the test suite now"}],
    "source": {"kind": "team-message", "teamId": "team-1", "senderId": "member-2"},
}


def _timed(step, seconds: float) -> tuple[int, float]:
    """Run ``step()`` (returning ops done) for ``seconds``; return ``(ops, elapsed)``."""
    clock = time.perf_counter
    ops, start = 0, clock()
    end = start + seconds
    while True:
        ops += step()
        now = clock()
        if now >= end:
            return ops, now - start


async def _atimed(step, seconds: float) -> tuple[int, float]:
    clock = time.perf_counter
    ops, start = 0, clock()
    end = start + seconds
    while True:
        ops += await step()
        now = clock()
        if now >= end:
            return ops, now - start


async def _compare(directory: Path) -> dict[str, float]:
    header = SessionHeader(id="bench", created_at=0)
    session = Session(header, backend=JsonlStore(directory).create(header))
    session.append(TYPE, PAYLOAD, cause=CAUSE)
    await session.flush()  # materialize, start an I/O worker
    line = encode_event(session.events[-1]) + b"\n"
    fd = os.open(directory / "raw.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def raw() -> int:
        os.write(fd, line)
        os.fsync(fd)
        return 1

    async def serial() -> int:
        session.append(TYPE, PAYLOAD, cause=CAUSE)
        await session.flush()
        return 1

    async def one() -> None:
        session.append(TYPE, PAYLOAD, cause=CAUSE)
        await session.flush()

    async def group() -> int:
        await asyncio.gather(*[one() for _ in range(WRITERS)])
        return WRITERS

    totals = dict.fromkeys(("raw", "serial", "group"), (0, 0.0))

    def add(key: str, result: tuple[int, float]) -> None:
        ops, elapsed = totals[key]
        totals[key] = (ops + result[0], elapsed + result[1])

    try:
        for _ in range(ROUNDS):
            add("raw", _timed(raw, SEGMENT))
            add("serial", await _atimed(serial, SEGMENT))
            add("group", await _atimed(group, SEGMENT))
        assert session.durable_seq == session.last_seq
    finally:
        os.close(fd)
        session.close()
    rates = {key: ops / elapsed for key, (ops, elapsed) in totals.items()}
    rates["line"] = len(line)
    return rates


def run() -> list[tuple[str, float, float]]:
    with tempfile.TemporaryDirectory(dir=os.environ.get("DSH_BENCH_DIR")) as tmp:
        rates = asyncio.run(_compare(Path(tmp)))
    raw, serial, group = rates["raw"], rates["serial"], rates["group"]
    print(f"store: event line {rates['line']:.0f} B, {ROUNDS} interleaved segments of {SEGMENT}s each")
    print(f"store: raw os.write+os.fsync      {raw:9.0f} ops/s")
    print(f"store: Session append+flush       {serial:9.0f} ops/s  ({serial / raw:.2f} of raw)")
    print(f"store: {WRITERS} concurrent append+flush {group:9.0f} ops/s  ({group / raw:.2f} of raw)")
    return [("S1", serial / raw, 0.8), ("S2", group / raw, 4.0)]


if __name__ == "__main__":
    for bench_id, ratio, goal in run():
        report(bench_id, ratio, goal)
