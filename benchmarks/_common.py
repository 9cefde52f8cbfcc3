"""A tiny benchmark harness: rates measured over a time budget, and goal lines.

Benchmarks compare our code against a raw baseline measured in the same process
and directory, so the ratio stays meaningful on slow or noisy machines.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable

__all__ = ["Rounds", "Totals", "atimed", "measure", "report", "timed"]


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


def report(bench_id: str, ratio: float, goal: float | None) -> str:
    """Print and return the machine-readable goal line ``<ID> <measured> <goal>`` (goal ``None``: ``-``).

    A ratio prints with two decimals; a count or a size (an ``int``: bytes of M1,
    turns of Q1) prints exactly. Which way a goal points is the bench's own
    statement: ratios are at least their goal (higher is better), while sizes,
    counts and slowdowns (M1, W1, P4, Q1) are at most theirs (lower is better). A
    figure printed beside a peer without a goal of its own has goal ``-``.
    """
    measured = str(ratio) if type(ratio) is int else f"{ratio:.2f}"
    line = f"{bench_id} {measured} {'-' if goal is None else format(goal, 'g')}"
    print(line, flush=True)
    return line


def timed(step: Callable[[], int], seconds: float) -> tuple[int, float]:
    """Run ``step()`` (returning ops done) for at least ``seconds``; return ``(ops, elapsed)``."""
    clock = time.perf_counter
    ops, start = 0, clock()
    while True:
        ops += step()
        now = clock()
        if now - start >= seconds:
            return ops, now - start


async def atimed(step: Callable[[], Awaitable[int]], seconds: float) -> tuple[int, float]:
    """:func:`timed` for a coroutine step."""
    clock = time.perf_counter
    ops, start = 0, clock()
    while True:
        ops += await step()
        now = clock()
        if now - start >= seconds:
            return ops, now - start


class Totals(dict[str, tuple[int, float]]):
    """Ops and seconds summed per contender over interleaved segments."""

    def add(self, key: str, result: tuple[int, float]) -> None:
        ops, elapsed = self.get(key, (0, 0.0))
        self[key] = (ops + result[0], elapsed + result[1])

    def rate(self, key: str) -> float:
        ops, elapsed = self[key]
        return ops / elapsed


class Rounds(Totals):
    """:class:`Totals` that also keep each round's rate, for the median of per-round ratios.

    A ratio of totals lets one disturbed segment (another process taking the
    core or the disk for a moment) move the whole figure; the contenders of one
    round ran next to each other, so the median of the rounds' ratios is the
    figure a noisy machine moves least. Every segment still does the full work.
    """

    def __init__(self) -> None:
        super().__init__()
        self.per_round: dict[str, list[float]] = {}

    def add(self, key: str, result: tuple[int, float]) -> None:
        super().add(key, result)
        self.per_round.setdefault(key, []).append(result[0] / result[1])

    def median_ratio(self, key: str, base: str) -> float:
        """Median over rounds of ``rate(key) / rate(base)`` within the same round."""
        return statistics.median(a / b for a, b in zip(self.per_round[key], self.per_round[base], strict=True))
