"""The bounded sample of ``make reliability`` that every ``make test`` runs (see docs/reliability.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from driver import PLANS, run_parts
from figures import Figures

pytestmark = pytest.mark.slow


def test_every_part_of_the_sample_runs_and_finds_no_violation(tmp_path: Path) -> None:
    """Each part attempts cases, and none shows a violation (crash, torn tail, matrices, processes, machine)."""
    seen: list[Figures] = []
    run_parts(PLANS["sample"], tmp_path, lambda figures, seconds: seen.append(figures))
    assert [f.part for f in seen] == ["crash+resume", "resume killed", "torn final line", "malformed arguments",
                                      "impersonation", "concurrent runs", "one process per Team",
                                      "mailbox state machine"]  # fmt: skip
    for figures in seen:
        assert figures.attempted > 0 and figures.passed == figures.attempted, (figures.part, figures.violations)
