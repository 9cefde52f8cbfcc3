"""Small units of the workspace room, exercised directly (edge cases the tool tests cannot reach)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import msgspec
import pytest

from host_spec.events import Event
from host_spec.workspace import WORKSPACE_READ, WorkspaceError
from host_spec.host.workspace.files import workspace_of
from host_spec.host.workspace.ignore import Rule, Rules, children, translate
from host_spec.host.workspace.ledger import Ledger, Ledgers
from host_spec.host.workspace.shell import kill_group


def event(kind: str, data: bytes, seq: int = 1) -> Event:
    return Event(seq=seq, time=0, type=kind, data=msgspec.Raw(data))


def test_no_agent_has_no_workspace() -> None:
    with pytest.raises(WorkspaceError) as info:
        workspace_of(None)
    assert info.value.code == "NO_WORKSPACE"


def test_ledger_ignores_other_events_and_keeps_the_last_version() -> None:
    ledger = Ledger()
    ledger.apply(event("tool/call", b"{}"))
    ledger.apply(event(WORKSPACE_READ, b'{"path":"a","sha256":"1"}'))
    ledger.apply(event(WORKSPACE_READ, b'{"path":"a","sha256":"2"}', 2))
    assert ledger.get("a").sha256 == "2" and ledger.get("b") is None


def test_dropping_an_unknown_session_changes_nothing() -> None:
    class Stub:
        id = "s"
        events: list[Event] = []

    ledgers = Ledgers()
    one, other = Stub(), Stub()
    ledgers.of(one)  # type: ignore[arg-type]
    ledgers.drop(other)  # type: ignore[arg-type]  # same id, another object: not ours to drop
    assert "s" in ledgers.by_session
    ledgers.drop(one)  # type: ignore[arg-type]
    assert not ledgers.by_session


def test_character_classes_and_nested_bases() -> None:
    assert translate("[!]a]x") == "[^]a]x" and translate("[x") == "\\[x"
    rule = Rule.parse("docs", "*.md")
    assert rule is not None and rule.matches("docs/a.md", False) and not rule.matches("src/a.md", False)


def test_an_unreadable_directory_has_no_children(tmp_path: Path) -> None:
    assert children(tmp_path, "missing", Rules()) == []


def test_killing_a_group_that_is_gone_is_fine() -> None:
    process = subprocess.Popen(["true"], start_new_session=True)
    process.wait()
    kill_group(process.pid)  # reaped: no such group any more
    kill_group(process.pid)
