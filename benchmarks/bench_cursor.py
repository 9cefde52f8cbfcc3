"""Cursor-wait benchmark: the delta of a wait costs the same on a long Lead log as on a short one.

D1: time to build the delta of a cursor wait (five tasks changed after the cursor)
    on a 100k-event Lead log over the same on a 1k-event log with the same board
    (goal: at most 1.2; the delta reads the fold's change index, never the log).

Also printed: the delta's size as the model receives it (compact JSON bytes).
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import measure, report  # noqa: E402
from benchmarks.team_setup import BIG, SMALL, lead_events  # noqa: E402
from dsh_team.core import replay, team_delta  # noqa: E402
from host_spec.schema import compact_json  # noqa: E402

#: Tasks changed after the cursor in each measured delta.
CHANGED = 5
ROUNDS = 5
SEGMENT = 0.2


def run() -> list[tuple[str, float, float]]:
    states = {count: replay(lead_events(count, "lead"), "lead") for count in (SMALL, BIG)}
    statuses = {"lead": "running"}

    def builder(count: int) -> Callable[[], int]:
        state = states[count]
        since = state.position - CHANGED

        def step() -> int:
            team_delta(state, since, "lead", statuses)
            return 1

        return step

    ratios = []
    for _ in range(ROUNDS):  # paired short segments; the median ratio resists noise
        small = measure(builder(SMALL), seconds=SEGMENT)
        big = measure(builder(BIG), seconds=SEGMENT)
        ratios.append(small / big)
    delta = team_delta(states[BIG], states[BIG].position - CHANGED, "lead", statuses)
    size = len(compact_json(delta).encode())
    print(f"cursor: delta of {CHANGED} changed tasks at {SMALL} events {small:8.0f}/s, at {BIG} events {big:8.0f}/s "
          f"(median time ratio {statistics.median(ratios):.2f}); {size} B as the model reads it")
    return [("D1", statistics.median(ratios), 1.2)]


if __name__ == "__main__":
    for bench_id, ratio, goal in run():
        report(bench_id, ratio, goal)
