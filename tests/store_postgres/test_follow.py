"""Following sessions another connection writes: every committed event handed on once, in order.

A real server of the module's own (the restart case stops it). The oracle is the
log itself: what the follower delivered, concatenated per session, must equal
what :meth:`PostgresStore.read` returns -- no gap, no duplicate -- whether the
event was found by a notification, after a dropped listening connection, after
a server restart, or by the periodic re-check when its notification never came.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import psycopg
import pytest
from kit_postgres import PostgresServer, own_server, running_database

from host_spec.cli import FollowingReader
from host_spec.events import Event, SessionHeader, encode_event
from host_spec.host.cli.backend_reader import BackendReader
from host_spec.host.store.postgres import PostgresStore
from host_spec.host.store.postgres.follow import StoreFollower
from host_spec.host.store.postgres.schema import CHANNEL
from host_spec.testing import make_events

WAIT_S = 20.0


server = pytest.fixture(scope="module", name="server")(own_server)


@pytest.fixture
def url(server: PostgresServer) -> str:
    return running_database(server)


class Seen:
    """What a follower delivered, per session, in arrival order (called on the follower's thread)."""

    def __init__(self) -> None:
        self.seqs: dict[str, list[int]] = {}
        self.batches = 0
        self._lock = threading.Lock()

    def __call__(self, header: SessionHeader, events: Sequence[Event]) -> None:
        with self._lock:
            self.seqs.setdefault(header.id, []).extend(event.seq for event in events)
            self.batches += 1

    def until(self, session_id: str, last: int) -> list[int]:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            with self._lock:
                got = list(self.seqs.get(session_id, []))
            if got and got[-1] >= last:
                return got
            time.sleep(0.02)
        raise AssertionError(f"{session_id}: delivered {got}, waited for {last}")


def _commit(log: object, first: int, count: int) -> None:
    log.append(make_events(first, count), expected_seq=first - 1)  # type: ignore[attr-defined]
    log.sync()  # type: ignore[attr-defined]


def _drop_listeners(url: str) -> int:
    """Terminate every backend LISTENing on the commit channel (a network cut of that one connection)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = %s AND datname = current_database() "
            "AND pid <> pg_backend_pid()",
            (f"LISTEN {CHANNEL}",),
        ).fetchall()
    return len(rows)


def test_commits_of_another_connection_arrive_once_in_order_from_the_cursor(url: str) -> None:
    writer = PostgresStore(url)
    lead = writer.create(SessionHeader(id="lead", created_at=1))
    _commit(lead, 1, 3)
    reader = PostgresStore(url)
    follower, seen = StoreFollower(reader), Seen()
    follower.watch("lead", 2)  # the caller already has 1..2
    follower.watch("member", 0)  # not written yet: found by its first commit
    follower.start(seen)
    try:
        assert seen.until("lead", 3) == [3]
        for first in range(4, 43, 3):
            _commit(lead, first, 3)
        other = writer.create(SessionHeader(id="other", created_at=2))  # not followed: never delivered
        _commit(other, 1, 1)
        other.close()
        member = writer.create(SessionHeader(id="member", created_at=3, parent_session="lead"))
        _commit(member, 1, 2)
        assert seen.until("lead", 42) == list(range(3, 43))
        assert seen.until("member", 2) == [1, 2]
        assert follower.cursor("lead") == 42 and follower.cursor("nobody") is None
        assert sorted(seen.seqs) == ["lead", "member"]
    finally:
        follower.close()
        member.close()
        lead.close()
        writer.close()
        reader.close()


def test_a_dropped_listening_connection_loses_no_event(url: str) -> None:
    writer = PostgresStore(url)
    lead = writer.create(SessionHeader(id="lead", created_at=1))
    _commit(lead, 1, 1)
    reader = PostgresStore(url)
    follower, seen = StoreFollower(reader, recheck_seconds=3600), Seen()  # no re-check: only the resync can find them
    follower.watch("lead", 0)
    follower.start(seen)
    try:
        assert seen.until("lead", 1) == [1]
        for round_ in range(3):
            assert _drop_listeners(url) == 1
            _commit(lead, 2 + 2 * round_, 2)  # committed while the listener may be gone: its notice can be lost
            deadline = time.monotonic() + WAIT_S
            while follower.listener.connects < round_ + 2:  # listening again before the next cut
                assert time.monotonic() < deadline
                time.sleep(0.02)
        assert seen.until("lead", 7) == list(range(1, 8))
        assert follower.listener.connects >= 4 and follower.resyncs >= 3  # every reconnect re-read the cursor
    finally:
        follower.close()
        lead.close()
        writer.close()
        reader.close()


def test_a_server_restart_loses_no_event(server: PostgresServer, url: str) -> None:
    reader = PostgresStore(url)
    follower, seen = StoreFollower(reader, recheck_seconds=3600), Seen()
    writer = PostgresStore(url)
    lead = writer.create(SessionHeader(id="lead", created_at=1))
    _commit(lead, 1, 2)
    follower.watch("lead", 0)
    follower.start(seen)
    try:
        assert seen.until("lead", 2) == [1, 2]
        server.stop("immediate")  # every connection is cut
        server.start()
        _commit(lead, 3, 2)  # the writer reconnects; the listener may not be back yet
        _commit(lead, 5, 1)
        assert seen.until("lead", 5) == [1, 2, 3, 4, 5]
        assert follower.listener.connects >= 2
    finally:
        follower.close()
        lead.close()
        writer.close()
        reader.close()


def test_a_commit_whose_notice_never_came_is_found_by_the_re_check(url: str) -> None:
    writer = PostgresStore(url)
    lead = writer.create(SessionHeader(id="lead", created_at=1))
    _commit(lead, 1, 1)
    lead.close()
    reader = PostgresStore(url)
    follower, seen = StoreFollower(reader, recheck_seconds=0.3), Seen()
    follower.watch("lead", 1)
    follower.start(seen)
    try:
        time.sleep(0.5)  # a resync at connect finds nothing new
        with psycopg.connect(url, autocommit=True) as conn:  # rows written without NOTIFY: a lost notice
            for event in make_events(2, 2):
                conn.execute("INSERT INTO dsh_events (session, seq, epoch, body) VALUES ('lead', %s, 1, %s)",
                             (event.seq, encode_event(event)))
            conn.execute("UPDATE dsh_sessions SET tail = 3 WHERE id = 'lead'")
        assert seen.until("lead", 3) == [2, 3]
        assert follower.rechecks >= 1
    finally:
        follower.close()
        writer.close()
        reader.close()


def test_the_shared_store_reader_follows_and_names_the_live_holder(url: str) -> None:
    writer = PostgresStore(url, holder="machine-a:42:abc")
    lead = writer.create(SessionHeader(id="lead", created_at=1))
    _commit(lead, 1, 1)
    member = writer.create(SessionHeader(id="member", created_at=2, parent_session="lead"))
    _commit(member, 1, 1)
    reader = BackendReader(PostgresStore(url))
    assert isinstance(reader, FollowingReader)
    try:
        assert reader.holder("lead") == "machine-a:42:abc" and reader.holder("member") == "machine-a:42:abc"
        assert isinstance(reader.follower(), StoreFollower)
        member.close()
        lead.close()
        assert reader.holder("lead") is None  # released: nobody runs it
        assert reader.holder("no-such-session") is None
    finally:
        writer.close()
        reader.store.close()
