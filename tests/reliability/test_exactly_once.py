"""The exactly-once checker itself: silent on a clean run, loud on each kind of damage it must catch."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from crash_sweep import Demo
from exactly_once import violations

from host_spec.host.store.jsonl import JsonlStore

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    demo = Demo(tmp_path_factory.mktemp("oracle"))
    _, data = demo.writes_of_run()
    return data


def _copy(clean: Path, tmp_path: Path) -> tuple[Path, JsonlStore]:
    data = tmp_path / "data"
    shutil.copytree(clean, data)
    return data, JsonlStore(data)


def _rewrite(store: JsonlStore, session_id: str, edit: object) -> None:
    path = store.path(session_id)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(edit(lines)))  # type: ignore[operator]


def _delivered_copy(store: JsonlStore) -> tuple[str, int]:
    """A teammate and the index of a line holding a delivered Team message."""
    for session_id in store.list_ids():
        lines = store.path(session_id).read_bytes().splitlines()
        for index, line in enumerate(lines[1:], 1):
            event = json.loads(line)
            if event["type"] == "user/message" and (event["data"].get("source") or {}).get("kind") == "team-message":
                return session_id, index
    raise AssertionError("no delivered Team message")


def test_a_clean_run_has_no_violation(clean: Path) -> None:
    assert violations(clean) == []


def test_a_message_recorded_twice_is_caught(clean: Path, tmp_path: Path) -> None:
    data, store = _copy(clean, tmp_path)
    session_id, index = _delivered_copy(store)

    def twice(lines: list[bytes]) -> list[bytes]:
        copy = json.loads(lines[index])
        copy["seq"] = len(lines)  # appended as a new, contiguous event
        return [*lines, json.dumps(copy).encode() + b"\n"]

    _rewrite(store, session_id, twice)
    assert any("history 2 times" in problem for problem in violations(data))


def test_a_lost_message_a_gap_and_a_repeated_tool_call_are_caught(clean: Path, tmp_path: Path) -> None:
    data, store = _copy(clean, tmp_path)
    session_id, index = _delivered_copy(store)
    lines = store.path(session_id).read_bytes().splitlines(keepends=True)
    event = json.loads(lines[index])
    event["data"]["source"]["kind"] = "user"  # the Team message is no longer in the history
    lines[index] = json.dumps(event).encode() + b"\n"
    calls = [i for i, line in enumerate(lines[1:], 1) if json.loads(line)["type"] == "tool/call"]
    repeated = json.loads(lines[calls[1]])
    repeated["data"]["call_id"] = json.loads(lines[calls[0]])["data"]["call_id"]
    lines[calls[1]] = json.dumps(repeated).encode() + b"\n"
    store.path(session_id).write_bytes(b"".join(lines))
    problems = violations(data)
    assert any("history 0 times" in p for p in problems) and any("recorded 2 times" in p for p in problems)
    _rewrite(store, session_id, lambda rows: [*rows[:3], *rows[4:]])  # a missing line: a seq gap
    assert any("unreadable" in p or "not contiguous" in p for p in violations(data))
