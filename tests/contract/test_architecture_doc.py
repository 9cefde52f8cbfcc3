"""``docs/architecture.md`` is the map a newcomer reads first: every room and module is on it.

A module added without a line on the map fails here, naming the module, so the map
cannot silently drift from the tree.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
MAPPED = ("dsh_team", "dsh_team_tools", "dsh_team_invariant", "host_spec/host")


def _modules() -> list[Path]:
    found = []
    for top in MAPPED:
        for path in sorted((ROOT / top).rglob("*.py")):
            if path.name != "__init__.py":
                found.append(path)
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_is_on_the_map(path: Path) -> None:
    """The module's file name appears on the map (in its room's table)."""
    assert f"`{path.name}`" in DOC.read_text(encoding="utf-8") or f"{path.parent.name}/{path.name}" in DOC.read_text(encoding="utf-8")


def test_every_room_is_on_the_map() -> None:
    """Each sub-package (room) of the domain and of the reference host has its heading or row."""
    text = DOC.read_text(encoding="utf-8")
    rooms = sorted(
        {p.parent.name for top in ("dsh_team", "host_spec/host") for p in (ROOT / top).glob("*/__init__.py")}
    )
    missing = [room for room in rooms if not re.search(rf"`{room}/`", text)]
    assert rooms and missing == []
