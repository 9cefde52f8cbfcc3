"""``make reliability``: run every part of the reliability suite and print its figures.

    python tests/reliability/driver.py            # the full sweep (minutes)
    python tests/reliability/driver.py --sample   # the bounded sample ``make test`` also runs

Each part prints ``attempted / passed / violations``; the exit status is 1 when
any part found a violation (each is listed). ``docs/reliability.md`` records the
figures and how to reproduce them.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
for _path in (HERE, HERE.parent):  # the parts, and the kits (kit_postgres)
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import structlog  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402

from crash_sweep import Demo, crash_sweep, resume_kill_sweep, spread  # noqa: E402
from figures import Figures  # noqa: E402
from mailbox_machine import MailboxMachine  # noqa: E402
from matrix import impersonation_matrix, malformed_matrix  # noqa: E402
from processes import concurrent_runs, live_team_refusals  # noqa: E402
from torn import torn_sweep  # noqa: E402

__all__ = ["PLANS", "run_parts"]

#: How much of each part runs: the full sweep, or the bounded sample of ``make test``.
PLANS: dict[str, dict[str, int | None]] = {
    "full": {"crash_points": None, "resume_crash_points": 8, "resume_points": None, "torn_lines": 3,
             "torn_stride": 1, "torn_resumes": 1, "rounds": 5, "width": 4, "examples": 200, "shared_points": 8},
    "sample": {"crash_points": 4, "resume_crash_points": 1, "resume_points": 2, "torn_lines": 1,
               "torn_stride": 7, "torn_resumes": 0, "rounds": 1, "width": 2, "examples": 4},
}  # fmt: skip


def _machine(examples: int) -> Figures:
    figures = Figures("mailbox state machine")
    try:
        run_state_machine_as_test(MailboxMachine, settings=settings(
            max_examples=examples, stateful_step_count=20, deadline=None, database=None,
            suppress_health_check=list(HealthCheck)))  # fmt: skip
    except AssertionError as error:
        figures.attempted, figures.violations = examples, [f"falsified: {error}"]
        return figures
    figures.attempted = figures.passed = examples
    return figures


def run_parts(plan: dict[str, int | None], scratch: Path, report: Callable[[Figures, float], None]) -> list[Figures]:
    """Every part under ``plan``; ``report`` is told each part's figures as it finishes."""
    demo = Demo(scratch)
    total, _ = demo.writes_of_run()
    crash = plan["crash_points"]
    parts: list[Callable[[], Figures]] = [
        lambda: crash_sweep(demo, None if crash is None else spread(total, crash)),
        lambda: resume_kill_sweep(demo, spread(total, int(plan["resume_crash_points"] or 1) + 2)[1:-1],
                                  plan["resume_points"]),
        lambda: torn_sweep(demo, lines=int(plan["torn_lines"] or 1), stride=int(plan["torn_stride"] or 1),
                           resumes_per_line=int(plan["torn_resumes"] or 0)),
        lambda: malformed_matrix(scratch),
        lambda: impersonation_matrix(scratch),
        lambda: concurrent_runs(demo, int(plan["rounds"] or 1), int(plan["width"] or 2)),
        lambda: live_team_refusals(demo, int(plan["rounds"] or 1)),
        lambda: _machine(int(plan["examples"] or 1)),
    ]  # fmt: skip
    # The shared-store parts need a PostgreSQL server; the sample leaves them to
    # tests/reliability/test_shared_store.py, which runs its own bounded cases.
    shared_points = plan.get("shared_points")
    server = None
    if shared_points:
        from kit_postgres import PostgresServer
        from shared_store import SharedStoreDemo, fenced_stale_processes, outages, takeovers
        from shared_outages import outage_takeovers
        from shared_workers import member_takeovers, worker_takeovers

        server = PostgresServer()
        server.start()
        shared = SharedStoreDemo(demo, server)
        points = spread(shared.clean()[0], int(shared_points) + 1)[1:]
        events = [20 * (index + 1) for index in range(int(shared_points))]
        parts += [
            lambda: takeovers(shared, points),
            lambda: fenced_stale_processes(shared, events[: max(1, len(events) // 2)]),
            lambda: outages(shared, events[: max(1, len(events) // 2)]),
            lambda: worker_takeovers(shared, points[: max(1, len(points) // 2)])[0],
            lambda: member_takeovers(shared, [3 * (index + 1) for index in range(int(shared_points))])[0],
            lambda: outage_takeovers(shared, [2 * (index + 1) for index in range(int(shared_points) // 2)],
                                     repeat=2),
        ]
    results = []
    try:
        for part in parts:
            started = time.perf_counter()
            figures = part()
            report(figures, time.perf_counter() - started)
            results.append(figures)
    finally:
        if server is not None:
            server.destroy()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sample", action="store_true", help="the bounded sample instead of the full sweep")
    args = parser.parse_args(argv)
    # An application decides logging: host warnings (torn tails repaired, ...) are expected here.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))

    def report(figures: Figures, seconds: float) -> None:
        print(f"{figures.line()}  ({seconds:.0f} s)", flush=True)
        for violation in figures.violations:
            print(f"    {violation}", flush=True)

    with tempfile.TemporaryDirectory(prefix="dsh-reliability-") as scratch:
        results = run_parts(PLANS["sample" if args.sample else "full"], Path(scratch), report)
    attempted = sum(f.attempted for f in results)
    found = sum(len(f.violations) for f in results)
    print(f"{'total':<22} attempted {attempted:>6}  passed {sum(f.passed for f in results):>6}  violations {found}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
