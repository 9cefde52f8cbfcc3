"""A live session on the PostgreSQL store keeps its recent events; older ones are read back by seq.

Against a real server (:mod:`kit_postgres`). Every read is checked against an
independent oracle: the plain list of the events the test appended (what a
session that kept every event answers) and the log the store reads back
(``PostgresStore.read``).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kit_postgres import PostgresServer, shared_server

from host_spec.errors import SessionCorruptError, StoreUnavailableError
from host_spec.events import Event
from host_spec.host.store.history import PAGE_EVENTS, History
from host_spec.host.store.postgres import PostgresStore
from host_spec.host.store.session import Session
from host_spec.host.store.sessions import SessionStore
from host_spec.testing import FaultyStorage

from _history_kit import HistoryReads, filled, payload, random_reads
from _store_kit import header


@pytest.fixture
def url() -> str:
    return shared_server().new_database()


@pytest.fixture(scope="module")
def examples_url() -> str:
    """One database for every example of a property test (each example writes its own session)."""
    return shared_server().new_database()


_example_ids = itertools.count(1)


async def _filled(store: PostgresStore, count: int, kept: int, batch: int = 7, name: str = "s-1") -> tuple[Session, list[Event]]:
    return await filled(store, count, kept, batch, name)


@pytest.fixture
def open_backend(url: str) -> Iterator[Callable[[], PostgresStore]]:
    opened: list[PostgresStore] = []

    def open_() -> PostgresStore:
        opened.append(PostgresStore(url))
        return opened[-1]

    yield open_
    for store in opened:
        store.close()


class TestReads(HistoryReads):
    """The reads every forgetting backend shares (:mod:`_history_kit`), plus reads across several pages."""

    async def test_reads_across_several_pages_forwards_and_backwards(self, url: str) -> None:
        """A history of more than two pages reads in order both ways, and by random index."""
        store = PostgresStore(url)
        count = 2 * PAGE_EVENTS + 300
        session, appended = await _filled(store, count, kept=4, batch=500)
        assert session.held_events <= 2 * 4 + 500
        assert list(session.events) == appended
        assert list(reversed(session.events)) == appended[::-1]
        probes = [PAGE_EVENTS - 1, PAGE_EVENTS, 2 * PAGE_EVENTS + 1, 3, count - 600, PAGE_EVENTS + 7]
        assert [session.events[i] for i in probes] == [appended[i] for i in probes]
        session.close()
        store.close()

    async def test_a_fault_injected_store_keeps_every_event(self, url: str) -> None:
        """A wrapper that is not the PostgreSQL writer itself cannot read back: nothing is forgotten."""
        store = SessionStore(FaultyStorage(PostgresStore(url)), None)
        store.kept_events = 1
        session = store.create("w")
        for index in range(20):
            session.append("a/b", {"i": index})
            await session.flush()
        assert session.held_events == 20
        await store.close()


class TestDamage:
    async def test_a_row_that_is_not_its_seqs_event_fails_loudly(self, url: str) -> None:
        """A forgotten seq whose row holds another event, or no row, is SESSION_CORRUPT, never a wrong event."""
        store = PostgresStore(url)
        sessions = {}
        for name in ("moved", "hole", "short"):
            sessions[name], appended = await _filled(store, 40, kept=2, name=name)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE dsh_events SET body = (SELECT body FROM dsh_events WHERE session = 'moved' AND seq = 3) "
                         "WHERE session = 'moved' AND seq = 2")
            conn.execute("DELETE FROM dsh_events WHERE session = 'hole' AND seq = 20")
            conn.execute("DELETE FROM dsh_events WHERE session = 'short' AND seq >= 30")
        with pytest.raises(SessionCorruptError, match="the row of seq 2 holds event 3") as caught:
            sessions["moved"].events[1]
        assert caught.value.code == "SESSION_CORRUPT" and caught.value.details["seq"] == 2
        with pytest.raises(SessionCorruptError, match="seq 20 is missing"):
            list(sessions["hole"].events)
        with pytest.raises(SessionCorruptError, match="seq 30 is missing from the store"):
            sessions["short"].events[0]
        assert sessions["short"].events[-1] == appended[-1]  # the kept window is still in memory
        for session in sessions.values():
            session.close()
        store.close()


@settings(max_examples=20, deadline=None)
@given(
    ops=st.lists(st.tuples(st.integers(1, 9), st.booleans(), st.integers(0, 10_000)), min_size=1, max_size=25),
    kept=st.integers(1, 6),
)
def test_random_appends_flushes_and_reads_match_the_list(examples_url: str, ops: Any, kept: int) -> None:
    """Any interleaving of appends, flushes and reads answers like the list of appended events."""
    name = f"h-{next(_example_ids)}"

    async def scenario(store: PostgresStore) -> None:
        await random_reads(store, name, ops, kept)

    store = PostgresStore(examples_url)
    try:
        asyncio.run(scenario(store))
    finally:
        store.close()


@settings(max_examples=30, deadline=None)
@given(
    count=st.integers(1, 60),
    kept=st.integers(1, 8),
    probes=st.lists(st.one_of(st.integers(-80, 80), st.tuples(st.integers(-80, 80), st.integers(-80, 80),
                                                              st.sampled_from([1, 2, -1, -3]))), max_size=12),
)
def test_history_over_the_store_reads_like_a_plain_list(examples_url: str, count: int, kept: int, probes: Any) -> None:
    """History forgetting into a stored log answers every index and slice exactly as a list does."""
    name = f"p-{next(_example_ids)}"
    store = PostgresStore(examples_url)
    try:
        log = store.create(header(name))
        session = Session(header(name), kept_events=kept)  # only to mint events: no backend
        events = [session.append("a/b", payload(index)) for index in range(count)]
        log.append(events, expected_seq=0)
        log.sync()
        history, plain = History(list(events)), list(events)
        history.forget(count, log, kept)
        assert len(history.recent) == (count if count <= 2 * kept else kept)
        for probe in probes:
            if isinstance(probe, int):
                if -count <= probe < count:
                    assert history[probe] == plain[probe]
                else:
                    with pytest.raises(IndexError):
                        history[probe]
            else:
                assert history[slice(*probe)] == plain[slice(*probe)]
        assert list(history) == plain
        log.close()
    finally:
        store.close()


@pytest.fixture(scope="module")
def own_server() -> Iterator[PostgresServer]:
    server = PostgresServer()
    server.start()
    yield server
    server.destroy()


class TestOutage:
    async def test_a_read_back_during_a_short_outage_waits_for_the_server(self, own_server: PostgresServer) -> None:
        """The store's link reconnects and the read answers the right event."""
        url = own_server.new_database()
        store = PostgresStore(url, retry_seconds=30)
        session, appended = await _filled(store, 50, kept=2)
        own_server.stop("immediate")  # every connection is cut
        restart = threading.Thread(target=lambda: (time.sleep(1.0), own_server.start()))
        restart.start()
        assert session.events[3] == appended[3]
        restart.join()
        assert store.link.reconnects >= 1
        session.close()
        store.close()

    async def test_a_read_back_during_a_long_outage_fails_typed_and_reads_once_it_is_back(
        self, own_server: PostgresServer
    ) -> None:
        """Past the retry time a read is STORE_UNAVAILABLE (an OSError), never a wrong or missing event."""
        url = own_server.new_database()
        store = PostgresStore(url, retry_seconds=0.5)
        session, appended = await _filled(store, 50, kept=2)
        own_server.stop("immediate")
        try:
            with pytest.raises(OSError) as caught:
                session.events[10]
            assert isinstance(caught.value, StoreUnavailableError) and caught.value.code == "STORE_UNAVAILABLE"
            assert session.events[-1] == appended[-1]  # the kept window needs no server
        finally:
            own_server.start()
        assert list(session.events) == appended
        session.close()
        store.close()
