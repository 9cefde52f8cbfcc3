"""SessionStore over real JSONL files (and in memory): create, seed, resume, inspect, dispose."""

from __future__ import annotations

import asyncio
import math
import os
import threading
from pathlib import Path

import pytest
from _store_kit import Clock, Recorder
from structlog.testing import capture_logs

from host_spec.errors import (
    InvalidEventError,
    SessionError,
    SessionExistsError,
    SessionLockedError,
    SessionNotFoundError,
    SessionNotLiveError,
)
from host_spec.events import Event, encode_data
from host_spec.host.store.session import Session
from host_spec.host.store.sessions import PersistedSession, SessionStore
from host_spec.host.store.jsonl import JsonlStore


def disk(tmp_path: Path, observer: Recorder | None = None) -> SessionStore:
    return SessionStore(JsonlStore(tmp_path), observer, clock=Clock())


def foreign(n: int, start: int = 40) -> list[Event]:
    """Events from another session, with that session's seqs."""
    return [Event(start + i, 7, "user/message", encode_data({"text": f"m{i}"})) for i in range(n)]


class TestCreate:
    def test_create_registers_a_live_session(self, tmp_path: Path) -> None:
        """create() returns a live session visible through get/list/exists, header filled from the arguments."""
        store = disk(tmp_path)
        session = store.create("lead", cwd="/work", delegation_depth=1, origin="subagent", parent_session="p")
        assert store.get("lead") is session and store.list() == (session,) and store.exists("lead")
        head = session.header
        assert (head.id, head.created_at, head.cwd, head.delegation_depth, head.origin, head.parent_session) == (
            "lead", 1001, "/work", 1, "subagent", "p",
        )
        assert store.get("other") is None and "live=1" in repr(store)

    async def test_minted_ids_skip_taken_ones(self, tmp_path: Path) -> None:
        """Without an id the store mints session-<n>, never reusing a live or stored id."""
        store = disk(tmp_path)
        taken = store.create("session-1")
        taken.append("a/b", {})
        await store.dispose(taken)
        assert [store.create().id, store.create().id] == ["session-2", "session-3"]

    @pytest.mark.parametrize(
        ("kwargs", "code"),
        [({"session_id": ""}, "SESSION_INVALID_ID"), ({"cwd": "relative/dir"}, "SESSION_INVALID_HEADER"),
         ({"delegation_depth": -1}, "SESSION_INVALID_HEADER")],
    )
    def test_invalid_arguments_are_refused(self, tmp_path: Path, kwargs: dict[str, object], code: str) -> None:
        """Bad ids, relative cwd and negative depth raise a typed error and register nothing."""
        store = disk(tmp_path)
        with pytest.raises(SessionError) as info:
            store.create(**kwargs)  # type: ignore[arg-type]
        assert info.value.code == code and store.list() == ()

    async def test_duplicate_ids_are_refused(self, tmp_path: Path) -> None:
        """An id that is live, or stored on disk, cannot be created again."""
        store = disk(tmp_path)
        live = store.create("x")
        with pytest.raises(SessionExistsError):
            store.create("x")
        live.append("a/b", {})
        await store.dispose(live)
        with pytest.raises(SessionExistsError):
            disk(tmp_path).create("x")

    async def test_seed_becomes_the_inherited_prefix(self, tmp_path: Path) -> None:
        """Seed events get seqs 1..n and seed_length n, are not observed, and are stored by the first flush."""
        observer = Recorder()
        store = disk(tmp_path, observer)
        session = store.create("child", seed=foreign(3), parent_session="lead")
        assert [e.seq for e in session.events] == [1, 2, 3] and session.header.seed_length == 3
        assert [e.value() for e in session.events] == [{"text": "m0"}, {"text": "m1"}, {"text": "m2"}]
        mine = session.append("a/b", {})
        assert mine.seq == 4 and list(session.own_events()) == [mine]
        await store.flush(session)
        assert observer.calls == [("pre", 4), ("committed", 4), ("flushed", 4)]
        head, events = JsonlStore(tmp_path).read("child")
        assert head.seed_length == 3 and events == list(session.events)


class TestFlush:
    async def test_concurrent_flushers_group_commit_and_each_returns_durable(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """K tasks appending then flushing cost < K fsyncs; each finds its event on disk when its await returns."""
        real_fsync, lock, fsyncs = os.fsync, threading.Lock(), []

        def counting(fd: int) -> None:
            with lock:
                fsyncs.append(fd)
            real_fsync(fd)

        store = disk(tmp_path)
        session = store.create("lead")
        session.append("a/b", {"warm": True})
        await store.flush(session)  # materialize first: later batches are plain appends
        monkeypatch.setattr(os, "fsync", counting)
        reader = JsonlStore(tmp_path)

        async def writer(i: int) -> int:
            event = session.append("a/b", {"i": i})
            await store.flush(session)
            _, on_disk = reader.read("lead")
            assert on_disk[event.seq - 1] == event
            return event.seq

        seqs = await asyncio.gather(*[writer(i) for i in range(16)])
        assert sorted(seqs) == list(range(2, 18))
        assert 1 <= len(fsyncs) < 16
        assert reader.read("lead")[1] == list(session.events)

    async def test_flushing_a_session_that_is_not_live_here_is_refused(self, tmp_path: Path) -> None:
        """store.flush rejects a disposed session or one from another store."""
        store = disk(tmp_path)
        session = store.create("x")
        await store.dispose(session)
        with pytest.raises(SessionNotLiveError):
            await store.flush(session)
        with pytest.raises(SessionNotLiveError):
            await store.flush(Session(store.create("y").header))

    async def test_nan_is_rejected_and_nothing_reaches_the_disk(self, tmp_path: Path) -> None:
        """A non-lossless payload raises at append; a later flush writes nothing at all."""
        store = disk(tmp_path)
        session = store.create("x")
        with pytest.raises(InvalidEventError):
            session.append("a/b", {"score": math.nan})
        await store.flush(session)
        assert not JsonlStore(tmp_path).exists("x") and session.last_seq == 0


class TestResume:
    async def test_resume_loads_a_stored_session(self, tmp_path: Path) -> None:
        """A disposed session resumes with the same header and events, all durable, and appends continue the seqs."""
        store = disk(tmp_path)
        session = store.create("x", seed=foreign(1))
        session.append("a/b", {"n": 1})
        await store.dispose(session)
        again = disk(tmp_path).resume("x")
        assert again.header == session.header and list(again.events) == list(session.events)
        assert again.durable_seq == again.last_seq == 2 and again.live
        assert again.append("a/b", {}).seq == 3

    async def test_resume_errors(self, tmp_path: Path) -> None:
        """Unknown ids raise SessionNotFoundError; a live id raises SessionExistsError; another holder locks us out."""
        store = disk(tmp_path)
        with pytest.raises(SessionNotFoundError):
            store.resume("nope")
        session = store.create("x")
        session.append("a/b", {})
        await store.flush(session)
        with pytest.raises(SessionExistsError):
            store.resume("x")
        with pytest.raises(SessionLockedError):
            disk(tmp_path).resume("x")
        assert not (tmp_path / "sessions" / "nope").exists()

    async def test_resume_repairs_a_torn_tail(self, tmp_path: Path) -> None:
        """A torn final line is dropped on resume and the next append follows the last complete event."""
        store = disk(tmp_path)
        session = store.create("x")
        for n in range(3):
            session.append("a/b", {"n": n})
        await store.dispose(session)
        path = JsonlStore(tmp_path).path("x")
        path.write_bytes(path.read_bytes()[:-5])
        with capture_logs() as logs:
            again = disk(tmp_path).resume("x")
        assert "session.torn_tail_repaired" in [e["event"] for e in logs]
        assert again.last_seq == 2
        again.append("a/b", {"n": "new"})
        await again.flush()
        assert [e.value()["n"] for e in JsonlStore(tmp_path).read("x")[1]] == [0, 1, "new"]


class TestInspect:
    async def test_inspect_a_live_session_is_a_snapshot(self, tmp_path: Path) -> None:
        """inspect() of a live session returns its current events, unaffected by later appends."""
        store = disk(tmp_path)
        session = store.create("x", seed=foreign(2))
        session.append("a/b", {})
        snap = await store.inspect("x")
        session.append("a/b", {})
        assert isinstance(snap, PersistedSession) and len(snap.events) == 3
        assert snap.own_events() == (snap.events[2],)

    async def test_inspect_a_stored_session_reads_without_activating(self, tmp_path: Path) -> None:
        """inspect() of a stored session reads the file, takes no lock and does not make it live."""
        store = disk(tmp_path)
        session = store.create("x")
        session.append("a/b", {"n": 1})
        await store.dispose(session)
        other = disk(tmp_path)
        snap = await other.inspect("x")
        assert [e.value() for e in snap.events] == [{"n": 1}] and other.get("x") is None
        other.resume("x")  # inspect left no lock behind
        with pytest.raises(SessionNotFoundError):
            await other.inspect("nope")


class TestDispose:
    async def test_dispose_flushes_closes_and_forgets(self, tmp_path: Path) -> None:
        """dispose() makes pending events durable, releases the lock, drops the session; twice is a no-op."""
        store = disk(tmp_path)
        session = store.create("x")
        session.append("a/b", {})
        await store.dispose(session)
        await store.dispose(session)
        assert not session.live and store.get("x") is None and store.exists("x")
        assert len(JsonlStore(tmp_path).read("x")[1]) == 1
        disk(tmp_path).resume("x")  # the lock was released

    async def test_overlapping_disposals_close_once_and_neither_fails(self, tmp_path: Path) -> None:
        """Two disposals awaiting the same final flush: the first removes and closes, the second finds it gone."""
        store = disk(tmp_path)
        session = store.create("x")
        session.append("a/b", {})
        await asyncio.gather(store.dispose(session), store.dispose(session))
        assert not session.live and store.get("x") is None
        assert len(JsonlStore(tmp_path).read("x")[1]) == 1
        disk(tmp_path).resume("x")  # the lock was released

    async def test_a_session_without_events_leaves_nothing(self, tmp_path: Path) -> None:
        """A created and disposed session with no events is not stored."""
        store = disk(tmp_path)
        await store.dispose(store.create("x"))
        assert not store.exists("x") and JsonlStore(tmp_path).list_ids() == []

    async def test_a_failed_final_flush_still_releases_and_raises(self, tmp_path: Path) -> None:
        """If the final flush fails, the session is still closed and removed, and the error surfaces."""
        store = disk(tmp_path)
        session = store.create("x")
        session.append("a/b", {})
        temp = tmp_path / "sessions" / "x" / "session.jsonl.tmp"
        temp.mkdir()  # materialization cannot open its temp file
        with pytest.raises(IsADirectoryError):
            await store.dispose(session)
        assert not session.live and store.get("x") is None
        with pytest.raises(IsADirectoryError):
            disk(tmp_path).create("x")  # the stale temp cannot be cleared either ...
        temp.rmdir()
        disk(tmp_path).create("x")  # ... and that failure did not keep the lock

    def test_discard_drops_pending_events(self, tmp_path: Path) -> None:
        """discard() closes without a final flush: nothing is stored, the id is free again; twice is a no-op."""
        store = disk(tmp_path)
        session = store.create("x")
        session.append("a/b", {})
        store.discard(session)
        store.discard(session)
        assert not session.live and store.get("x") is None and not store.exists("x")
        store.create("x")

    async def test_close_disposes_every_live_session(self, tmp_path: Path) -> None:
        """close() disposes all live sessions; a failing one does not stop the others, and its error is raised."""
        store = disk(tmp_path)
        good = [store.create(f"g{i}") for i in range(2)]
        for session in good:
            session.append("a/b", {})
        bad = store.create("bad")
        bad.append("a/b", {})
        (tmp_path / "sessions" / "bad" / "session.jsonl.tmp").mkdir()
        with capture_logs() as logs, pytest.raises(OSError):
            await store.close()
        assert store.list() == () and [e["event"] for e in logs if e["log_level"] == "error"] == [
            "session.dispose_failed"
        ]
        assert JsonlStore(tmp_path).list_ids() == ["g0", "g1"]
        await disk(tmp_path).close()  # nothing live: a no-op


class TestInMemory:
    async def test_memory_store_round_trip(self) -> None:
        """With store=None: flush reports, dispose keeps a snapshot that inspect and resume use."""
        observer = Recorder()
        store = SessionStore(None, observer)
        session = store.create("x")
        session.append("a/b", {"n": 1})
        await store.flush(session)
        assert observer.kinds("flushed") == [1]
        await store.dispose(session)
        assert store.exists("x") and store.get("x") is None
        with pytest.raises(SessionExistsError):
            store.create("x")
        assert [e.value() for e in (await store.inspect("x")).events] == [{"n": 1}]
        again = store.resume("x")
        assert list(again.events) == list(session.events) and again.durable_seq == 1
        with pytest.raises(SessionNotFoundError):
            store.resume("nope")
        with pytest.raises(SessionNotFoundError):
            await store.inspect("nope")
        assert not store.exists("nope")
