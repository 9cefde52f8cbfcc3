"""``docs/architecture.md`` is the map a newcomer reads first: every room and module is on it.

A module added without a line on the map fails here, naming the module, so the map
cannot silently drift from the tree. A module must be named in its own room's part of
the map (the room's heading section, or its row in the reference host's table).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("dsh_team", "dsh_team_tools", "dsh_team_invariant", "host_spec/host")


def _modules() -> list[Path]:
    return [
        path
        for top in PACKAGES
        for path in sorted((ROOT / top).rglob("*.py"))
        if path.name != "__init__.py"
    ]


def _part(marker: str) -> str:
    """The map's text about ``marker``: its heading's section, or every table row naming it."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    found: list[str] = []
    for index, line in enumerate(lines):
        if marker not in line:
            continue
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            end = next(
                (i for i in range(index + 1, len(lines)) if lines[i].startswith("#") and len(lines[i]) - len(lines[i].lstrip("#")) <= level),
                len(lines),
            )
            found.extend(lines[index:end])
        elif line.startswith("|"):
            found.append(line)
    return "\n".join(found)


def _marker(path: Path) -> str:
    relative = path.relative_to(ROOT)
    parts = relative.parts
    if parts[:2] == ("host_spec", "host"):
        return f"`{parts[2]}/`" if len(parts) > 3 else f"`{parts[2]}`"
    if len(parts) > 2:
        return f"`{parts[1]}/`"
    return f"`{parts[0]}`"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_is_on_the_map(path: Path) -> None:
    """The module's file name appears in its room's part of the map."""
    assert f"`{path.name}`" in _part(_marker(path)), f"add {path.relative_to(ROOT)} to docs/architecture.md"


def test_every_room_is_on_the_map() -> None:
    """Each sub-package (room) of the domain and of the reference host has its heading or row."""
    rooms = sorted({p.parent.name for top in ("dsh_team", "host_spec/host") for p in (ROOT / top).glob("*/__init__.py")})
    assert rooms and [room for room in rooms if not _part(f"`{room}/`")] == []
