"""Run every ``benchmarks/bench_*.py`` and end with one ``<ID> <ratio> <goal>`` line per goal.

Arguments name a subset (``bench_memory bench_scale``, the ``bench_`` prefix may be
left out), so a goal that must hold in consecutive runs can be re-measured without
the whole suite; an unknown name is an error before anything runs.

Each bench module exposes ``run() -> list[tuple[id, ratio, goal]]`` (goal ``None``: a
ratio beside a peer, printed with goal ``-``) and prints its
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


def _chosen(names: list[str]) -> list[Path]:
    """The bench modules to run: every one, or those named (``SystemExit`` names an unknown one)."""
    every = sorted(HERE.glob("bench_*.py"))
    if not names:
        return every
    by_stem = {path.stem: path for path in every}
    stems = [name if name.startswith("bench_") else f"bench_{name}" for name in names]
    unknown = [stem for stem in stems if stem not in by_stem]
    if unknown:
        raise SystemExit(f"unknown benchmark {', '.join(unknown)}; known: {', '.join(by_stem)}")
    return [by_stem[stem] for stem in stems]


def main(names: list[str]) -> int:
    paths = _chosen(names)
    # The runner is an application: it, not the library, decides that host and
    # plugin logs below WARNING would only drown the figures (and cost time).
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    results: list[tuple[str, float, float | None]] = []
    failed: list[str] = []
    for path in paths:
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
    sys.exit(main(sys.argv[1:]))
