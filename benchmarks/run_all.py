"""Run every ``benchmarks/bench_*.py`` and end with one ``<ID> <ratio> <goal>`` line per goal.

Each bench module exposes ``run() -> list[tuple[id, ratio, goal]]`` and prints its
own human-readable figures; the summary lines come last so tools can parse them.
A bench that crashes is reported on stderr and makes the exit status non-zero.
"""

from __future__ import annotations

import importlib
import logging
import sys
import time
import traceback
from pathlib import Path

import structlog

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

from benchmarks._common import report  # noqa: E402


def main() -> int:
    # The runner is an application: it, not the library, decides that host and
    # plugin logs below WARNING would only drown the figures (and cost time).
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    results: list[tuple[str, float, float]] = []
    failed: list[str] = []
    for path in sorted(HERE.glob("bench_*.py")):
        name = f"benchmarks.{path.stem}"
        print(f"== {path.stem}", flush=True)
        started = time.perf_counter()
        try:
            results.extend(importlib.import_module(name).run())
        except Exception:
            traceback.print_exc()
            failed.append(path.stem)
        print(f"   ({time.perf_counter() - started:.1f}s)", flush=True)
    print("== summary", flush=True)
    for bench_id, ratio, goal in results:
        report(bench_id, ratio, goal)
    for stem in failed:
        print(f"benchmark {stem} failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
