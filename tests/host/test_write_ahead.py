"""Write-ahead: an event its writer flushes at once is appended to an idle log before its observers run.

The disk starts on the event while the host is still busy with it, and the flush
only syncs. What must not change: nothing is acknowledged before its sync, an
event appended without the hint stays in memory until a flush, a failed
write-ahead loses nothing (the batch writes the events again), concurrent
flushers still share one write, and a closed log keeps only synced bytes.
Real JSONL files with real ``fsync``/``fdatasync`` where the medium matters; a
recording :class:`~host_spec.storage.SessionLog` where the call order does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
from _store_kit import header
from structlog.testing import capture_logs

from host_spec.errors import SequenceConflictError, SessionNotLiveError
from host_spec.events import Event, SessionHeader, encode_data
from host_spec.host.store import writeback
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.store.session import Session
from host_spec.storage import SessionLog


class AheadLog:
    """An in-memory inline log that records every call (``append``, ``ahead``, ``sync``) in order.

    ``refuse_ahead`` makes ``write_ahead`` decline; ``fail_ahead`` makes it raise
    (like a failed ``pwrite``, the log is back at its synced tail).
    """

    inline = True

    def __init__(self) -> None:
        self.header: SessionHeader = header()
        self.calls: list[tuple[str, list[int]]] = []
        self.stored: list[int] = []
        self._pending: list[int] = []
        self.refuse_ahead = False
        self.fail_ahead = False
        self.fail_sync = False

    @property
    def tail_seq(self) -> int:
        return len(self.stored) + len(self._pending)

    def append(self, events: Sequence[Event], *, expected_seq: int) -> None:
        if expected_seq != self.tail_seq:
            raise SequenceConflictError("tail moved", session="s-1", expected=expected_seq, actual=self.tail_seq)
        self.calls.append(("append", [event.seq for event in events]))
        self._pending.extend(event.seq for event in events)

    def write_ahead(self, events: Sequence[Event], *, expected_seq: int) -> bool:
        if self.refuse_ahead:
            return False
        if self.fail_ahead:
            raise OSError("disk full")
        self.append(events, expected_seq=expected_seq)
        self.calls[-1] = ("ahead", self.calls[-1][1])
        return True

    def sync(self) -> None:
        self.calls.append(("sync", list(self._pending)))
        if self.fail_sync:
            self._pending = []  # a failed sync leaves the log at its synced tail
            raise OSError("I/O error")
        self.stored.extend(self._pending)
        self._pending = []

    def close(self) -> None:
        self._pending = []


def ahead_session(log: AheadLog) -> Session:
    assert isinstance(log, SessionLog)  # the recording log keeps the contract
    return Session(header(), backend=log)


class TestGroupCommitWriteAhead:
    async def test_a_lone_writer_is_written_ahead_then_only_synced(self) -> None:
        """The hinted event reaches the log at append time; its flush appends nothing more and syncs."""
        log = AheadLog()
        session = ahead_session(log)
        session.append("a/b", {}, write_ahead=True)
        assert log.calls == [("ahead", [1])]  # before any flush
        await session.flush()
        assert log.calls == [("ahead", [1]), ("append", []), ("sync", [1])]
        assert session.durable_seq == 1 and log.stored == [1]

    async def test_an_append_without_the_hint_waits_for_its_flush(self) -> None:
        """No hint, no write: the event stays in memory until a flush (what a crash test relies on)."""
        log = AheadLog()
        session = ahead_session(log)
        session.append("a/b", {})
        assert log.calls == []
        await session.flush()
        assert log.calls == [("append", [1]), ("sync", [1])]

    async def test_only_the_first_event_since_a_batch_is_written_ahead(self) -> None:
        """Later hinted appends before the flush join the batch: one extra write per batch at most."""
        log = AheadLog()
        session = ahead_session(log)
        session.append("a/b", {}, write_ahead=True)
        session.append("a/b", {}, write_ahead=True)
        session.append("a/b", {})
        await session.flush()
        assert log.calls == [("ahead", [1]), ("append", [2, 3]), ("sync", [1, 2, 3])]

    async def test_a_hinted_event_takes_the_pending_events_before_it_along(self) -> None:
        """Events appended before the hinted one are written ahead with it: its flush covers them too."""
        log = AheadLog()
        session = ahead_session(log)
        session.append("a/b", {})
        assert log.calls == []
        session.append("a/b", {}, write_ahead=True)
        assert log.calls == [("ahead", [1, 2])]
        await session.flush()
        assert log.stored == [1, 2] and session.durable_seq == 2

    async def test_concurrent_flushers_turn_write_ahead_off_and_still_share_a_write(self) -> None:
        """A batch of several flushers stops write-ahead; a lone batch afterwards turns it on again."""
        log = AheadLog()
        session = ahead_session(log)

        async def writer() -> None:
            session.append("a/b", {}, write_ahead=True)
            await session.flush()

        await asyncio.gather(*(writer() for _ in range(8)))
        assert log.calls == [("ahead", [1]), ("append", list(range(2, 9))), ("sync", list(range(1, 9)))]
        await asyncio.gather(*(writer() for _ in range(4)))  # the last batch had 8 flushers: no write-ahead
        assert log.calls[3:] == [("append", [9, 10, 11, 12]), ("sync", [9, 10, 11, 12])]
        await writer()  # the last batch had 4 flushers: still off; this batch is lone
        await writer()
        assert log.calls[5:] == [("append", [13]), ("sync", [13]), ("ahead", [14]), ("append", []), ("sync", [14])]

    async def test_a_declined_or_failed_write_ahead_is_written_by_the_batch(self) -> None:
        """The log declines or fails: nothing is lost, the flush appends the events itself."""
        log = AheadLog()
        session = ahead_session(log)
        log.refuse_ahead = True
        session.append("a/b", {}, write_ahead=True)
        await session.flush()
        log.refuse_ahead, log.fail_ahead = False, True
        with capture_logs() as logs:
            session.append("a/b", {}, write_ahead=True)
        await session.flush()
        assert log.calls == [("append", [1]), ("sync", [1]), ("append", [2]), ("sync", [2])]
        assert [entry["event"] for entry in logs] == ["session.write_ahead_failed"]
        assert "disk full" in logs[0]["error"] and log.stored == [1, 2]

    async def test_a_failed_sync_after_a_write_ahead_is_retried_from_the_synced_tail(self) -> None:
        """The written-ahead event is dropped with the failed sync; the next flush appends it again."""
        log = AheadLog()
        session = ahead_session(log)
        session.append("a/b", {}, write_ahead=True)
        log.fail_sync = True
        with pytest.raises(OSError, match="I/O error"):
            await session.flush()
        log.fail_sync = False
        await session.flush()
        assert log.calls == [("ahead", [1]), ("append", []), ("sync", [1]), ("append", [1]), ("sync", [1])]
        assert session.durable_seq == 1 and log.stored == [1]

    async def test_a_closed_session_writes_nothing_ahead(self) -> None:
        """After close a hinted append is refused before anything reaches the log."""
        log = AheadLog()
        session = ahead_session(log)
        session.close()
        with pytest.raises(SessionNotLiveError):
            session.append("a/b", {}, write_ahead=True)
        assert log.calls == []


def events(start: int, stop: int) -> list[Event]:
    return [Event(seq, 100 + seq, "test/e", encode_data({"n": seq})) for seq in range(start, stop)]


class TestJsonlWriteAhead:
    def test_a_log_not_yet_on_disk_declines(self, tmp_path: Path) -> None:
        """The first batch materializes the log durably by itself: write-ahead declines and stores nothing."""
        store = JsonlStore(tmp_path)
        log = store.create(header())
        assert log.write_ahead(events(1, 2), expected_seq=0) is False
        assert log.tail_seq == 0 and not store.path("s-1").exists()
        log.close()

    def test_written_ahead_bytes_are_in_the_file_and_synced_by_the_next_sync(self, tmp_path: Path) -> None:
        """Write-ahead appends at the tail (readable at once), ``sync`` makes them durable, reads agree."""
        store = JsonlStore(tmp_path)
        log = store.create(header())
        log.append(events(1, 2), expected_seq=0)
        log.sync()
        assert log.write_ahead(events(2, 4), expected_seq=1) is True
        assert log.tail_seq == 3 and log.size < store.path("s-1").stat().st_size
        log.sync()
        assert log.size == store.path("s-1").stat().st_size
        log.close()
        assert [event.seq for event in store.read("s-1")[1]] == [1, 2, 3]

    def test_close_keeps_only_synced_bytes(self, tmp_path: Path) -> None:
        """A writer closed after a write-ahead without its sync leaves exactly the synced log."""
        store = JsonlStore(tmp_path)
        log = store.create(header())
        log.append(events(1, 3), expected_seq=0)
        log.sync()
        synced = store.path("s-1").read_bytes()
        assert log.write_ahead(events(3, 5), expected_seq=2)
        log.close()
        assert store.path("s-1").read_bytes() == synced

    def test_a_conflicting_write_ahead_stores_nothing(self, tmp_path: Path) -> None:
        """The compare-and-set on the tail holds for write-ahead too."""
        store = JsonlStore(tmp_path)
        log = store.create(header())
        log.append(events(1, 2), expected_seq=0)
        log.sync()
        before = store.path("s-1").read_bytes()
        with pytest.raises(SequenceConflictError):
            log.write_ahead(events(3, 4), expected_seq=2)
        assert store.path("s-1").read_bytes() == before and log.tail_seq == 1
        log.close()

    async def test_a_session_on_disk_writes_a_hinted_event_before_its_flush(self, tmp_path: Path) -> None:
        """Through the real store: the hinted event's line is in the file before ``flush``, durable after it."""
        store = JsonlStore(tmp_path)
        log = store.create(header())
        session = Session(header(), backend=log)
        session.append("a/b", {"n": 1})
        await session.flush()  # materialized
        path = store.path("s-1")
        size = path.stat().st_size
        session.append("a/b", {"n": 2}, write_ahead=True)
        assert b'"n":2' in path.read_bytes() and session.durable_seq == 1
        await session.flush()
        assert session.durable_seq == 2 and log.size > size
        session.close()


class TestStartWriteback:
    def test_it_is_available_here_and_ignores_an_empty_range(self, tmp_path: Path) -> None:
        """Linux has ``sync_file_range``; an empty range or any byte range of a real file returns quietly."""
        path = tmp_path / "f"
        path.write_bytes(b"x" * 100)
        with path.open("rb+") as handle:
            writeback.start_writeback(handle.fileno(), 0, 0)
            writeback.start_writeback(handle.fileno(), 0, 100)
        assert writeback.available() and path.read_bytes() == b"x" * 100
