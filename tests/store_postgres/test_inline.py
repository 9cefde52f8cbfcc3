"""Writes on the event loop's thread: the PostgreSQL log is ``inline`` and never makes the loop wait.

A host syncs an inline log on its loop; a round trip to a near server costs
about what a local ``fsync`` does, so that saves two thread hand-offs per batch.
What must not happen there is waiting: for another thread's query on the shared
connection, or for a reconnection. Then the sync refuses with
``BlockingIOError`` (a medium failure: the log is back at its synced tail), and
the group commit writes the same batch again from a worker thread. The oracle is
the database, read back through a fresh handle.

The append is one statement whose answer is only "stored or not" plus the
lease row; the refusals it tells apart (a moved tail, a session stored by
another creator) are checked here too, and so is the ``dsh_append`` function
older hosts of the same layout still call.
"""

from __future__ import annotations

import asyncio
import threading

import psycopg
import pytest

from host_spec.errors import SequenceConflictError, SessionExistsError
from host_spec.events import Event, SessionHeader, encode_event
from host_spec.host.store.postgres import PostgresStore
from host_spec.host.store.postgres.log import SPREAD_MAX
from host_spec.host.store.session import Session
from host_spec.testing import FaultyStorage, make_events




def _stored(url: str, session_id: str = "s") -> list[Event]:
    reader = PostgresStore(url)
    try:
        return reader.read(session_id)[1]
    finally:
        reader.close()


def _seqs(url: str, session_id: str = "s") -> list[int]:
    return [event.seq for event in _stored(url, session_id)]


class TestOnTheLoop:
    async def test_a_sync_on_the_loop_does_not_wait_for_another_threads_query(self, url: str, store: PostgresStore) -> None:
        log = store.create(SessionHeader(id="s", created_at=1))
        log.append(make_events(1, 1), expected_seq=0)
        log.sync()
        busy, release = threading.Event(), threading.Event()
        holder = threading.Thread(target=store.link.run, args=(lambda conn, _: (busy.set(), release.wait(10)),))
        holder.start()
        try:
            assert await asyncio.to_thread(busy.wait, 10)
            log.append(make_events(2, 2), expected_seq=1)
            with pytest.raises(BlockingIOError):
                log.sync()
            assert log.tail_seq == 1 and _seqs(url) == [1]  # back at the synced tail, nothing stored
        finally:
            release.set()
            await asyncio.to_thread(holder.join, 10)
        log.append(make_events(2, 2), expected_seq=1)  # the same batch again, from a worker
        await asyncio.to_thread(log.sync)
        assert log.tail_seq == 3 and _seqs(url) == [1, 2, 3]
        log.close()

    async def test_a_sync_on_the_loop_does_not_open_a_connection(self, url: str, store: PostgresStore) -> None:
        log = store.create(SessionHeader(id="s", created_at=1))
        store.link.close()
        log.append(make_events(1, 2), expected_seq=0)
        with pytest.raises(BlockingIOError):
            log.sync()
        assert log.tail_seq == 0 and not store.exists("s")
        log.append(make_events(1, 2), expected_seq=0)
        await asyncio.to_thread(log.sync)  # a worker may wait: it connects
        log.append(make_events(3, 1), expected_seq=2)
        log.sync()  # and the loop writes again on that connection
        assert _seqs(url) == [1, 2, 3]
        log.close()

    async def test_a_session_on_the_store_is_flushed_on_its_loop_thread(self, url: str, store: PostgresStore) -> None:
        writers: list[str] = []
        log = FaultyStorage(store).create(SessionHeader(id="s", created_at=1))
        log.before_write(lambda number: writers.append(threading.current_thread().name))
        session = Session(log.header, backend=log)
        for index in range(3):
            session.append("a/b", {"i": index})
            await session.flush()
        assert writers == [threading.current_thread().name] * 3 and session.durable_seq == 3
        assert _seqs(url) == [1, 2, 3]
        session.close()


class TestBatchSizes:
    @pytest.mark.parametrize("size", [1, 2, SPREAD_MAX, SPREAD_MAX + 1, 300])
    def test_a_batch_of_any_size_is_stored_byte_for_byte(self, url: str, store: PostgresStore, size: int) -> None:
        """Short batches pass one parameter per body, longer ones one array: both store the exact events."""
        log = store.create(SessionHeader(id="s", created_at=1))
        first, second = make_events(1, size), make_events(size + 1, size)
        log.append(first, expected_seq=0)
        log.sync()  # the creating batch (it stores the header too)
        log.append(second, expected_seq=size)
        log.sync()
        assert _stored(url) == first + second
        log.close()


class TestRefusals:
    def test_a_moved_tail_is_a_conflict_naming_the_stored_tail(self, url: str, store: PostgresStore) -> None:
        created = store.create(SessionHeader(id="s", created_at=1))
        created.append(make_events(1, 2), expected_seq=0)
        created.sync()
        created.close()
        ahead, _ = store.resume("s")
        behind, _ = store.resume("s")  # a second writer of the same handle: its tail goes stale
        ahead.append(make_events(3, 2), expected_seq=2)
        ahead.sync()
        behind.append(make_events(3, 1), expected_seq=2)
        with pytest.raises(SequenceConflictError) as caught:
            behind.sync()
        assert caught.value.details == {"session": "s", "expected": 2, "actual": 4}
        assert behind.tail_seq == 2 and _seqs(url) == [1, 2, 3, 4]
        ahead.close()
        behind.close()

    def test_a_first_batch_of_a_session_another_creator_stored_is_refused(self, url: str, store: PostgresStore) -> None:
        first = store.create(SessionHeader(id="s", created_at=1))
        second = store.create(SessionHeader(id="s", created_at=2))  # neither is stored yet
        first.append(make_events(1, 1), expected_seq=0)
        first.sync()
        second.append(make_events(1, 2), expected_seq=0)
        with pytest.raises(SessionExistsError):
            second.sync()
        assert second.tail_seq == 0 and _seqs(url) == [1]
        assert store.header("s").created_at == 1
        first.close()
        second.close()


class TestOlderHosts:
    def test_the_append_function_of_older_hosts_still_appends_and_fences(self, url: str, store: PostgresStore) -> None:
        """A database this host created keeps ``dsh_append``: an older host's batches land between ours."""
        log = store.create(SessionHeader(id="s", created_at=1))
        log.append(make_events(1, 1), expected_seq=0)
        log.sync()
        call = "SELECT status, tail, epoch FROM dsh_append(%s, %s, %s, %s, %s, %s, NULL, NULL, NULL)"
        older = [encode_event(event) for event in make_events(2, 2)]
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute(call, ("s", "s", store.holder, log.epoch, 1, older)).fetchone() == ("ok", 3, log.epoch)
            assert conn.execute(call, ("s", "s", "another", log.epoch, 3, older)).fetchone() == ("fenced", None, log.epoch)
        log.append(make_events(2, 1), expected_seq=1)
        with pytest.raises(SequenceConflictError):  # our writer's tail is behind what the older host stored
            log.sync()
        assert _stored(url) == make_events(1, 3)
        log.close()
