"""``docs/configuration.md`` lists every config key the plugins accept, and no key they refuse.

The oracle is the config classes themselves (``attrs.fields``, read independently
of the page): every field of :class:`~dsh_team.config.TeamConfig` (a nested table's
fields as ``table.field``, a table of named entries as ``table.NAME``) must be a
row of the page's ``dsh-team`` table, and every row must name a real field; the
same for the ``dsh-team-tools`` table and :class:`~dsh_team_tools.config.ToolsConfig`.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from dsh_team.config import TeamConfig
from dsh_team_tools.config import ToolsConfig

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def documented(heading: str) -> set[str]:
    """The keys (first column) of the table under ``### `heading``` on the page."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"### `{heading}`")
    end = text.find("\n### ", start + 1)
    section = text[start:] if end < 0 else text[start:end]
    return set(re.findall(r"^\| `([^`]+)` \|", section, flags=re.M))


def keys_of(cls: type, prefix: str = "") -> set[str]:
    """Every key a table of ``cls`` accepts, as the page should name it."""
    hints = typing.get_type_hints(cls)
    keys: set[str] = set()
    for field in attrs.fields(cls):
        kind: Any = hints[field.name]
        name = prefix + field.name
        if attrs.has(kind):
            keys |= keys_of(kind, name + ".")
        elif typing.get_origin(kind) is Mapping:
            keys.add(name + ".NAME")
        else:
            keys.add(name)
    return keys


def test_every_dsh_team_key_is_documented_and_every_documented_key_exists() -> None:
    expected = keys_of(TeamConfig)
    assert {"shutdown_timeout_ms", "plan_approval", "checks.NAME", "gates.timeout_ms", "roles.NAME"} <= expected
    rows = documented("dsh-team")
    assert expected - rows == set(), "missing from docs/configuration.md"
    assert rows - expected == set(), "documented but not a config key"


def test_every_dsh_team_tools_key_is_documented() -> None:
    assert documented("dsh-team-tools") == keys_of(ToolsConfig)
