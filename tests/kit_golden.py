"""Golden files: reviewed JSON snapshots, and the one way to update them.

A golden file is compared as text with the value rendered as indented JSON.
``pytest --update-golden`` (or ``DSH_UPDATE_GOLDEN=1``) rewrites every file
whose content differs **and fails that test**, naming the file: an update is
never silently green, so it is always reviewed (``git diff``) and rerun. A
file that already matches is left untouched and passes.

Tests take the ``golden`` fixture (``tests/conftest.py``), which knows whether
this run updates.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

import pytest

UPDATE_HINT = "pytest --update-golden (or DSH_UPDATE_GOLDEN=1), then review the diff"


def render(value: Any, *, sort_keys: bool = False) -> str:
    """The file text of ``value``: two-space JSON, non-ASCII kept, one trailing newline."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=sort_keys) + "\n"


class Golden:
    """Checks values against golden files, or rewrites them in an update run."""

    def __init__(self, *, update: bool) -> None:
        self.update = update

    def check(self, path: Path, value: Any, *, sort_keys: bool = False) -> None:
        """Assert ``path`` holds ``value`` (see :func:`render`); an update run rewrites it and fails.

        Args:
            path: The golden file.
            value: JSON-ready data.
            sort_keys: Sort object keys (for data whose key order means nothing).
        """
        text = render(value, sort_keys=sort_keys)
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            return
        if self.update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            pytest.fail(f"rewrote golden file {path}: review the diff, then rerun without --update-golden")
        if current is None:
            pytest.fail(f"missing golden file {path}; create it with {UPDATE_HINT}")
        diff = difflib.unified_diff(
            current.splitlines(), text.splitlines(), f"{path.name} (golden)", f"{path.name} (actual)", lineterm=""
        )
        shown = list(diff)[:80]
        pytest.fail(f"{path} differs from the reviewed golden file; if intended: {UPDATE_HINT}\n" + "\n".join(shown))
