"""A tiny benchmark harness: rates measured over a time budget, and goal lines.

Benchmarks compare our code against a raw baseline measured in the same process
and directory, so the ratio stays meaningful on slow or noisy machines.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["measure", "report"]


def measure(fn: Callable[[], object], *, seconds: float, warmup: float = 0.1) -> float:
    """Call ``fn`` repeatedly for about ``seconds`` (after a warm-up) and return calls per second.

    ``fn`` may do several operations per call and return how many (an ``int``);
    any other return value counts as one operation.
    """
    clock = time.perf_counter
    end = clock() + warmup
    while clock() < end:
        fn()
    ops = 0
    start = clock()
    end = start + seconds
    while True:
        done = fn()
        ops += done if type(done) is int else 1
        now = clock()
        if now >= end:
            return ops / (now - start)


def report(bench_id: str, ratio: float, goal: float) -> str:
    """Print and return the machine-readable goal line ``<ID> <ratio> <goal>``."""
    line = f"{bench_id} {ratio:.2f} {goal:g}"
    print(line, flush=True)
    return line
