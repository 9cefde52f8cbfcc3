"""The test kit's own promises: the fault wrapper holds and fails exactly what it is told to."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import msgspec
import pytest

from host_spec.events import SessionHeader
from host_spec.testing import (
    CheckpointsContract,
    FaultyLog,
    FaultyStorage,
    MemoryStorage,
    StorageBackendContract,
    disk_full,
    make_events,
)


def opened(storage: FaultyStorage | None = None) -> tuple[FaultyStorage, FaultyLog]:
    storage = storage if storage is not None else FaultyStorage(MemoryStorage())
    return storage, storage.create(SessionHeader(id="s-1", created_at=1))


def write(log: FaultyLog, first: int, count: int = 1) -> None:
    log.append(make_events(first, count), expected_seq=first - 1)
    log.sync()


class TestFaultyLog:
    def test_an_unarmed_log_forwards_and_records_its_batches(self) -> None:
        storage, log = opened()
        write(log, 1, 2)
        write(log, 3)
        assert log.batches == [[1, 2], [3]] and log.written == [1, 2, 3] and log.writes == 2
        assert storage.read("s-1")[1] == make_events(1, 3) and log.tail_seq == 3
        assert log.inline and "writes=2" in repr(log) and "MemoryStorage" in repr(storage)

    def test_queued_failures_fail_the_next_writes_in_order_and_store_nothing(self) -> None:
        storage, log = opened()
        first, second = OSError(5, "I/O error"), disk_full()
        log.fail_next(first)
        log.fail_next()
        for expected in (first, second):
            with pytest.raises(OSError) as caught:
                write(log, 1)
            assert caught.value is expected or caught.value.errno == expected.errno
        assert not storage.exists("s-1") and log.writes == 2
        write(log, 1)
        assert storage.read("s-1")[1] == make_events(1, 1)

    def test_fail_when_picks_write_numbers_until_cleared(self) -> None:
        storage, log = opened()
        log.fail_when(lambda number: number % 2 == 0)
        outcomes = []
        for seq in (1, 2, 2, 3):
            try:
                write(log, seq)
                outcomes.append("ok")
            except OSError as exc:
                outcomes.append(exc.errno)
        assert outcomes == ["ok", 28, "ok", 28]
        log.fail_when(None)
        write(log, 3)
        assert [event.seq for event in storage.read("s-1")[1]] == [1, 2, 3]

    def test_before_write_sees_each_number_and_empty_appends_do_not_count(self) -> None:
        _, log = opened()
        seen: list[int] = []
        log.before_write(seen.append)
        log.append([], expected_seq=0)
        write(log, 1)
        write(log, 2)
        assert seen == [1, 2] and log.writes == 2

    def test_a_held_write_waits_in_its_thread_until_released(self) -> None:
        storage, log = opened()
        log.hold()
        assert log.threaded and not log.inline  # a held write must never block the loop
        done = threading.Event()
        writer = threading.Thread(target=lambda: (write(log, 1), done.set()))
        writer.start()
        assert log.entered.wait(10)
        assert not done.wait(0.05) and not storage.exists("s-1")
        log.release()
        writer.join(10)
        assert done.is_set() and storage.read("s-1")[1] == make_events(1, 1)

    async def test_wait_entered_returns_once_a_write_started_and_times_out_otherwise(self) -> None:
        _, log = opened()
        with pytest.raises(TimeoutError):
            await log.wait_entered(timeout=0.01)
        log.hold()
        writer = threading.Thread(target=write, args=(log, 1))
        writer.start()
        await log.wait_entered()
        log.release()
        await asyncio.to_thread(writer.join, 10)
        assert log.written == [1]

    def test_close_is_recorded_and_forwarded(self) -> None:
        storage, log = opened()
        log.close()
        assert log.closed
        storage.create(SessionHeader(id="s-1", created_at=1)).close()  # the inner writer let go


class TestFaultyStorage:
    def test_logs_are_found_by_session_id_and_announced_when_opened(self) -> None:
        announced: list[str] = []
        storage = FaultyStorage(MemoryStorage(), on_open=lambda log: announced.append(log.header.id))
        _, log = opened(storage)
        assert storage.log("s-1") is log
        write(log, 1)
        log.close()
        resumed, events = storage.resume("s-1")
        assert storage.log("s-1") is resumed and events == make_events(1, 1)
        assert announced == ["s-1", "s-1"] and storage.list_ids() == ["s-1"]
        with pytest.raises(KeyError, match="no log of session 'other'"):
            storage.log("other")
        resumed.close()


def test_a_write_held_too_long_fails_loudly() -> None:
    storage, log = opened()
    log.hold()
    log.hold_seconds = 0.01
    with pytest.raises(TimeoutError, match="never released"):
        write(log, 1)
    assert not storage.exists("s-1")


class _NoCompareAndSet(FaultyStorage):
    """A mutant backend: stores a batch wherever the log ends, whatever the caller expected."""

    def create(self, header: SessionHeader) -> FaultyLog:
        log = super().create(header)
        inner = log.inner
        log.inner = type("Lax", (), {  # type: ignore[assignment]
            "header": inner.header,
            "tail_seq": property(lambda _: inner.tail_seq),
            "append": lambda _, events, expected_seq: inner.append(
                [msgspec.structs.replace(event, seq=inner.tail_seq + n) for n, event in enumerate(events, 1)],
                expected_seq=inner.tail_seq,
            ),
            "sync": lambda _: inner.sync(),
            "close": lambda _: inner.close(),
        })()
        return log


class _EagerExists(FaultyStorage):
    """A mutant backend: claims a created log exists before anything was stored."""

    def exists(self, session_id: str) -> bool:
        return True


@pytest.mark.parametrize(
    ("mutant", "test"),
    [
        (_NoCompareAndSet, StorageBackendContract.test_append_at_a_stale_tail_is_refused_and_stores_nothing),
        (_EagerExists, StorageBackendContract.test_a_created_log_is_stored_by_its_first_append_only),
    ],
)
def test_the_conformance_suite_catches_a_broken_backend(mutant: type[FaultyStorage], test: Any) -> None:
    medium = MemoryStorage()
    with pytest.raises(AssertionError):
        test(StorageBackendContract(), lambda: mutant(medium.reopen()))


class _AnyName:
    """A checkpoint store that takes any name (it would put ``../x`` into a file name)."""

    def __init__(self) -> None:
        self.saved: dict[tuple[str, str], tuple[int, bytes]] = {}

    def save(self, session_id: str, name: str, seq: int, payload: bytes) -> None:
        self.saved[(session_id, name)] = (seq, payload)

    def load(self, session_id: str, name: str) -> tuple[int, bytes] | None:
        return self.saved.get((session_id, name))


def test_the_checkpoint_suite_catches_a_store_that_takes_any_name() -> None:
    store = _AnyName()
    with pytest.raises(AssertionError):
        CheckpointsContract().test_a_bad_name_or_seq_is_refused_and_stores_nothing(lambda: store)
