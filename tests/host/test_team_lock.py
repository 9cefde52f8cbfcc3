"""The per-tree lock behind one process per Team: roots from headers, counting, release."""

from __future__ import annotations

from pathlib import Path

import pytest

from host_spec.errors import SessionError, SessionLockedError
from host_spec.events import SessionHeader
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.store.jsonl_format import header_line
from host_spec.host.store.team_lock import TeamLocks


def stored(store: JsonlStore, session_id: str, parent: str | None = None) -> None:
    """A stored log with one event (the header names ``parent``), written by the real store."""
    header = SessionHeader(id=session_id, created_at=1, parent_session=parent)
    path = store.path(session_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header_line(header))


class TestRoots:
    def test_roots_follow_stored_headers_and_stop_at_an_unknown_parent(self, tmp_path: Path) -> None:
        """child -> mid -> root through stored headers; an unknown parent is taken as the root."""
        store = JsonlStore(tmp_path)
        stored(store, "root")
        stored(store, "mid", "root")
        stored(store, "leaf", "mid")
        locks = TeamLocks(tmp_path, store.sessions_dir)
        assert locks.root_of("leaf", "mid") == "root"
        assert locks.root_of("x", "ghost") == "ghost" and locks.root_of("root", None) == "root"
        (store.sessions_dir / "mid" / "session.jsonl").write_bytes(b"garbage\n")
        assert locks.root_of("leaf", "mid") == "mid"  # unreadable: stop there

    def test_a_cycle_in_damaged_headers_ends(self, tmp_path: Path) -> None:
        store = JsonlStore(tmp_path)
        stored(store, "a", "b")
        stored(store, "b", "a")
        assert TeamLocks(tmp_path, store.sessions_dir).root_of("c", "a") in {"a", "b"}


class TestLocking:
    def test_counted_per_tree_released_by_the_last_and_refused_to_another_store(self, tmp_path: Path) -> None:
        """Lead and teammate share one lock; another store (another process's view) is refused until both close."""
        store = JsonlStore(tmp_path)
        mine, other = TeamLocks(tmp_path, store.sessions_dir), TeamLocks(tmp_path, store.sessions_dir)
        lead = mine.acquire("lead", None)
        mate = mine.acquire("mate", "lead")
        assert mine.root_of("grandchild", "mate") == "lead"  # known from the open session
        with pytest.raises(SessionLockedError) as caught:
            other.acquire("mate", "lead")
        assert caught.value.details["root"] == "lead" and "session tree of lead" in caught.value.message
        lead()
        lead()  # idempotent
        with pytest.raises(SessionLockedError):
            other.acquire("lead", None)
        mate()
        other.acquire("lead", None)()

    def test_an_unusable_lock_directory_is_a_session_error(self, tmp_path: Path) -> None:
        (tmp_path / "teams").write_text("not a directory")
        with pytest.raises(SessionError, match="cannot open the Team lock"):
            TeamLocks(tmp_path, tmp_path / "sessions").acquire("s", None)
