"""The storage-backend conformance suite: the rules every backend keeps, as pytest tests.

Subclass :class:`StorageBackendContract` in a test module and give it a
``storage`` fixture: a zero-argument factory returning a *new handle on the same
medium* at every call (a new ``JsonlStore`` on the same directory, a new
connection to the same database). A second handle stands for a second process
or a restart::

    class TestMyBackend(StorageBackendContract):
        @pytest.fixture
        def storage(self, tmp_path):
            return lambda: MyBackend(tmp_path)

The suite covers what the contract promises everywhere (compare-and-set on the
tail, nothing stored before the first append, one writer per id, lossless
round trips, creation order); damage a particular medium can suffer (a torn
last line of a file) stays with that backend's own tests. This module imports
nothing but the contract, so any host or backend can run it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from host_spec.errors import (
    SequenceConflictError,
    SessionExistsError,
    SessionLockedError,
    SessionNotFoundError,
    SessionNotLiveError,
)
from host_spec.events import Cause, Event, SessionHeader, encode_data
from host_spec.storage import SessionLog, StorageBackend

__all__ = ["StorageBackendContract", "StorageFactory", "make_events"]

#: What the ``storage`` fixture returns: a new handle on the same medium per call.
StorageFactory = Callable[[], StorageBackend]


def make_events(first: int, count: int) -> list[Event]:
    """``count`` events with seqs ``first..`` and payloads that exercise lossless JSON."""
    return [
        Event(
            seq,
            1_700_000_000_000 + seq,
            "test/event",
            encode_data({"n": seq, "text": f"line {seq} \u00e9\u4e2d\U0001f600\n\"q\"", "big": 2**53 - 1, "f": 0.5}),
            Cause(agent_id="agent-1", call_id=f"call-{seq}", tool="t") if seq % 2 else None,
        )
        for seq in range(first, first + count)
    ]


class _Caught:
    error: BaseException | None = None


@contextmanager
def _raises(*kinds: type[BaseException]) -> Iterator[_Caught]:
    """Like ``pytest.raises`` for several types, without importing pytest."""
    caught = _Caught()
    try:
        yield caught
    except kinds as exc:
        caught.error = exc
    else:
        raise AssertionError(f"expected one of {[kind.__name__ for kind in kinds]}, nothing was raised")


def _header(session_id: str = "s-1", created_at: int = 1_000, **fields: Any) -> SessionHeader:
    return SessionHeader(id=session_id, created_at=created_at, **fields)


def _stored(storage: StorageFactory, session_id: str = "s-1") -> list[Event]:
    return storage().read(session_id)[1]


def _write(log: SessionLog, first: int, count: int) -> list[Event]:
    events = make_events(first, count)
    log.append(events, expected_seq=first - 1)
    log.sync()
    return events


class StorageBackendContract:
    """Abstract conformance tests; a subclass supplies the ``storage`` fixture (see the module doc)."""

    def test_a_created_log_is_stored_by_its_first_append_only(self, storage: StorageFactory) -> None:
        backend = storage()
        log = backend.create(_header(cwd="/work", parent_session="p-1", seed_length=0, origin="test"))
        try:
            assert log.tail_seq == 0 and log.header.id == "s-1"
            assert not backend.exists("s-1") and "s-1" not in backend.list_ids()
            with _raises(SessionNotFoundError):
                backend.read("s-1")
            events = _write(log, 1, 2)
            assert storage().exists("s-1") and storage().list_ids() == ["s-1"]
            header, stored = storage().read("s-1")
            assert header == log.header and stored == events
        finally:
            log.close()

    def test_a_log_closed_before_its_first_append_leaves_nothing(self, storage: StorageFactory) -> None:
        log = storage().create(_header())
        log.close()
        assert not storage().exists("s-1")
        with _raises(SessionNotFoundError):
            storage().resume("s-1")
        again = storage().create(_header())  # the id is free again
        again.close()

    def test_batches_accumulate_and_payloads_round_trip_losslessly(self, storage: StorageFactory) -> None:
        log = storage().create(_header())
        try:
            events = _write(log, 1, 1) + _write(log, 2, 3) + _write(log, 5, 40)
            assert log.tail_seq == 44
            assert _stored(storage) == events
        finally:
            log.close()

    def test_append_at_a_stale_tail_is_refused_and_stores_nothing(self, storage: StorageFactory) -> None:
        log = storage().create(_header())
        try:
            events = _write(log, 1, 3)
            for expected in (0, 2, 4):
                with _raises(SequenceConflictError) as caught:
                    log.append(make_events(expected + 1, 1), expected_seq=expected)
                assert isinstance(caught.error, SequenceConflictError)
                assert caught.error.code == "SESSION_SEQ_CONFLICT"
                log.sync()
                assert log.tail_seq == 3 and _stored(storage) == events
            events += _write(log, 4, 1)  # the right tail still works
            assert _stored(storage) == events
        finally:
            log.close()

    def test_a_batch_that_does_not_continue_the_tail_is_refused(self, storage: StorageFactory) -> None:
        log = storage().create(_header())
        try:
            events = _write(log, 1, 2)
            for batch in (make_events(4, 1), make_events(2, 1), [*make_events(3, 1), *make_events(5, 1)]):
                with _raises(SequenceConflictError):
                    log.append(batch, expected_seq=2)
                log.sync()
                assert log.tail_seq == 2 and _stored(storage) == events
        finally:
            log.close()

    def test_an_empty_append_checks_the_tail_and_stores_nothing(self, storage: StorageFactory) -> None:
        log = storage().create(_header())
        try:
            log.append([], expected_seq=0)
            log.sync()
            assert not storage().exists("s-1")
            events = _write(log, 1, 1)
            log.append([], expected_seq=1)
            with _raises(SequenceConflictError):
                log.append([], expected_seq=0)
            log.sync()
            log.sync()  # nothing pending: still fine
            assert _stored(storage) == events
        finally:
            log.close()

    def test_resume_returns_the_stored_events_and_continues_the_tail(self, storage: StorageFactory) -> None:
        header = _header(cwd="/w", seed_length=1, delegation_depth=2)
        log = storage().create(header)
        events = _write(log, 1, 5)
        log.close()
        resumed, found = storage().resume("s-1")
        try:
            assert found == events and resumed.header == header and resumed.tail_seq == 5
            with _raises(SequenceConflictError):
                resumed.append(make_events(1, 1), expected_seq=0)
            events += _write(resumed, 6, 2)
        finally:
            resumed.close()
        assert _stored(storage) == events and storage().read("s-1")[0] == header

    def test_create_refuses_an_id_that_is_stored(self, storage: StorageFactory) -> None:
        log = storage().create(_header())
        _write(log, 1, 1)
        log.close()
        with _raises(SessionExistsError):
            storage().create(_header()).close()
        assert len(_stored(storage)) == 1

    def test_one_writer_per_id_or_the_tail_decides(self, storage: StorageFactory) -> None:
        """A second writer is refused at open, or its stale append loses the compare-and-set."""
        first = storage().create(_header())
        try:
            _write(first, 1, 2)
            try:
                second, seen = storage().resume("s-1")
            except SessionLockedError:
                pass  # a locking backend: the second writer never opens
            else:
                try:
                    assert seen == _stored(storage)
                    _write(first, 3, 1)
                    with _raises(SequenceConflictError):
                        second.append(make_events(3, 1), expected_seq=2)
                        second.sync()
                finally:
                    second.close()
            assert [event.seq for event in _stored(storage)] in ([1, 2], [1, 2, 3])
        finally:
            first.close()

    def test_two_creators_of_one_id_cannot_both_win(self, storage: StorageFactory) -> None:
        """A second creator is refused at open, or at its first append once the first creator stored."""
        first = storage().create(_header())
        try:
            try:
                second = storage().create(_header(created_at=2_000))
            except SessionLockedError:
                _write(first, 1, 1)
            else:
                try:
                    _write(first, 1, 1)
                    with _raises(SessionExistsError, SequenceConflictError):
                        _write(second, 1, 1)
                finally:
                    second.close()
        finally:
            first.close()
        header, events = storage().read("s-1")
        assert header.created_at == 1_000 and [event.seq for event in events] == [1]

    def test_close_is_idempotent_releases_the_writer_and_refuses_later_calls(self, storage: StorageFactory) -> None:
        log = storage().create(_header())
        _write(log, 1, 1)
        log.close()
        log.close()
        with _raises(SessionNotLiveError):
            log.append(make_events(2, 1), expected_seq=1)
        with _raises(SessionNotLiveError):
            log.sync()
        resumed, found = storage().resume("s-1")  # the writer's hold is gone
        resumed.close()
        assert [event.seq for event in found] == [1]

    def test_read_needs_no_writer_and_sees_only_synced_events(self, storage: StorageFactory) -> None:
        log = storage().create(_header())
        try:
            events = _write(log, 1, 2)
            assert _stored(storage) == events  # while the writer is open
            log.append(make_events(3, 1), expected_seq=2)
            assert [event.seq for event in _stored(storage)] in ([1, 2], [1, 2, 3])
            log.sync()
            assert [event.seq for event in _stored(storage)] == [1, 2, 3]
        finally:
            log.close()

    def test_unsynced_events_at_close_are_kept_whole_or_not_at_all(self, storage: StorageFactory) -> None:
        log = storage().create(_header())
        _write(log, 1, 1)
        log.append(make_events(2, 2), expected_seq=1)
        log.close()
        resumed, found = storage().resume("s-1")
        try:
            assert [event.seq for event in found] in ([1], [1, 2, 3])
            assert resumed.tail_seq == len(found)
        finally:
            resumed.close()

    def test_unknown_ids_are_not_found(self, storage: StorageFactory) -> None:
        backend = storage()
        assert not backend.exists("nope") and backend.list_ids() == []
        with _raises(SessionNotFoundError):
            backend.read("nope")
        with _raises(SessionNotFoundError):
            backend.resume("nope")

    def test_ids_are_listed_in_creation_order_and_kept_apart(self, storage: StorageFactory) -> None:
        ids = {"b": 3_000, "a/../x": 1_000, "c": 1_000, "é ü": 2_000, "A": 2_000}
        for session_id, created_at in ids.items():
            log = storage().create(_header(session_id, created_at))
            _write(log, 1, 1 + created_at // 1_000)
            log.close()
        assert storage().list_ids() == ["a/../x", "c", "A", "é ü", "b"]
        for session_id, created_at in ids.items():
            header, events = storage().read(session_id)
            assert header.id == session_id and len(events) == 1 + created_at // 1_000
