"""The database going away and coming back: a real server stopped and restarted.

These tests own a server of their own (stopping the shared one would cut other
tests off). The contract's medium-failure rule is the oracle: a sync that fails
leaves the log at its synced tail, and the same events retried later are stored
exactly once.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import structlog
from kit_postgres import PostgresServer, own_server, running_database

from host_spec.errors import StoreUnavailableError
from host_spec.events import SessionHeader
from host_spec.host.store.postgres import Listener, PostgresStore
from host_spec.host.store.session import Session
from host_spec.testing import make_events


server = pytest.fixture(scope="module", name="server")(own_server)


@pytest.fixture
def url(server: PostgresServer) -> str:
    return running_database(server)


def _restart_later(server: PostgresServer, seconds: float) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(seconds), server.start()))
    thread.start()
    return thread


class TestOutage:
    def test_a_sync_during_a_short_outage_waits_for_the_server_and_stores_once(self, server: PostgresServer, url: str) -> None:
        store = PostgresStore(url, retry_seconds=30)
        log = store.create(SessionHeader(id="root", created_at=1))
        log.append(make_events(1, 2), expected_seq=0)
        log.sync()
        server.stop("immediate")  # every connection is cut, as by a network failure
        restart = _restart_later(server, 1.0)
        log.append(make_events(3, 2), expected_seq=2)
        log.sync()
        restart.join()
        assert [event.seq for event in PostgresStore(url).read("root")[1]] == [1, 2, 3, 4]
        assert store.link.reconnects >= 1
        log.close()
        store.close()

    def test_a_restart_is_told_once_lost_and_once_restored(self, server: PostgresServer, url: str) -> None:
        """Every connection of the process (writes, heartbeat) sees the restart; it is told once, not per attempt."""
        store = PostgresStore(url, lease_seconds=1.5, retry_seconds=30)
        log = store.create(SessionHeader(id="root", created_at=1))
        log.append(make_events(1, 2), expected_seq=0)
        log.sync()
        store.leases.renew()  # the heartbeat's connection is open too: both are cut by the stop
        with structlog.testing.capture_logs() as logs:
            server.stop("immediate")
            restart = _restart_later(server, 1.5)
            log.append(make_events(3, 2), expected_seq=2)
            log.sync()  # many attempts while the server is down
            restart.join()
            time.sleep(1.5)  # the heartbeat renews over its own (broken, then new) connection
            store.leases.renew()
        told = [line for line in logs if line["event"].startswith("store.connection")]
        assert [line["event"] for line in told] == ["store.connection_lost", "store.connection_restored"], logs
        assert told[0]["reason"]  # the server's (or the socket's) own words
        assert [event.seq for event in store.read("root")[1]] == [1, 2, 3, 4]
        log.close()
        store.close()

    def test_a_long_outage_fails_as_a_medium_error_and_the_retry_stores_once(self, server: PostgresServer, url: str) -> None:
        store = PostgresStore(url, retry_seconds=0.5)
        log = store.create(SessionHeader(id="root", created_at=1))
        log.append(make_events(1, 1), expected_seq=0)
        log.sync()
        server.stop("immediate")
        batch = make_events(2, 3)
        log.append(batch, expected_seq=1)
        with pytest.raises(OSError) as caught:
            log.sync()
        assert isinstance(caught.value, StoreUnavailableError) and caught.value.code == "STORE_UNAVAILABLE"
        assert log.tail_seq == 1  # back at the synced tail
        server.start()
        log.append(batch, expected_seq=1)  # the caller retries the same events
        log.sync()
        assert [event.seq for event in store.read("root")[1]] == [1, 2, 3, 4]
        log.close()
        store.close()

    async def test_a_flush_on_the_loop_during_an_outage_waits_in_a_worker_while_the_loop_runs(
            self, server: PostgresServer, url: str) -> None:
        """The log is written inline, but a lost connection is waited for off the loop: other tasks keep running."""
        store = PostgresStore(url, retry_seconds=30)
        log = store.create(SessionHeader(id="root", created_at=1))
        session = Session(log.header, backend=log)
        session.append("a/b", {})
        await session.flush()
        server.stop("immediate")
        restart = _restart_later(server, 1.0)
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.ensure_future(tick())
        session.append("a/b", {})
        await session.flush()  # the inline attempt fails at once; a worker waits for the server
        ticker.cancel()
        await asyncio.to_thread(restart.join)
        assert ticks >= 20  # about a second of outage, the loop ran meanwhile
        assert session.durable_seq == 2 and store.link.reconnects >= 1
        assert [event.seq for event in PostgresStore(url).read("root")[1]] == [1, 2]
        session.close()
        store.close()

    def test_a_password_in_the_url_never_reaches_the_error(self) -> None:
        store = PostgresStore("postgresql://dsh:s3cret-pw@127.0.0.1:1/nowhere", retry_seconds=0.1)
        with pytest.raises(StoreUnavailableError) as caught:
            store.exists("x")
        assert "s3cret-pw" not in str(caught.value) and "***" in str(caught.value)
        assert "s3cret-pw" not in repr(store)


class TestNotifications:
    def test_a_commit_notifies_its_session_and_tail(self, url: str) -> None:
        listener = Listener(url)
        first = listener.poll(0.2)
        assert first.resync and first.tails == {}
        store = PostgresStore(url)
        log = store.create(SessionHeader(id="é ü", created_at=1))
        log.append(make_events(1, 3), expected_seq=0)
        log.sync()
        log.append(make_events(4, 1), expected_seq=3)
        log.sync()
        seen: dict[str, int] = {}
        deadline = time.monotonic() + 5
        while seen.get("é ü") != 4 and time.monotonic() < deadline:
            wakeup = listener.poll(0.5)
            assert not wakeup.resync
            seen.update(wakeup.tails)
        assert seen == {"é ü": 4}
        log.close()
        store.close()
        listener.close()

    def test_after_a_reconnect_the_listener_asks_for_a_resync(self, server: PostgresServer, url: str) -> None:
        listener = Listener(url)
        listener.poll(0.1)
        server.stop("immediate")
        assert listener.poll(0.3).tails == {}  # down: nothing, and no false resync
        server.start()
        deadline = time.monotonic() + 10
        while not listener.poll(0.2).resync:
            assert time.monotonic() < deadline
        assert listener.connects == 2
        listener.close()


class TestSilentLinks:
    def test_a_tcp_link_gives_up_on_a_silent_server_within_seconds_unless_the_url_says_otherwise(self) -> None:
        from host_spec.host.store.postgres.link import tcp_bounds

        bounds = tcp_bounds("postgresql://dsh@db-host/dsh")
        assert bounds["tcp_user_timeout"] <= 10_000 and bounds["keepalives"] == 1
        assert "tcp_user_timeout" not in tcp_bounds("postgresql://dsh@db-host/dsh?tcp_user_timeout=60000")
