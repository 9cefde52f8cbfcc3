"""Per-part tallies of the reliability suite: attempted, passed, and every violation found."""

from __future__ import annotations

import attrs

__all__ = ["Figures"]


@attrs.define
class Figures:
    """One part's result; a case passes when it shows no violation."""

    part: str
    attempted: int = 0
    passed: int = 0
    violations: list[str] = attrs.field(factory=list)

    def record(self, case: str, problems: list[str]) -> None:
        self.attempted += 1
        if problems:
            self.violations.extend(f"{case}: {problem}" for problem in problems)
        else:
            self.passed += 1

    def line(self) -> str:
        return f"{self.part:<22} attempted {self.attempted:>6}  passed {self.passed:>6}  violations {len(self.violations)}"
