"""What the PostgreSQL store does with damage and with a commit whose acknowledgement was lost.

Damage is written straight into the tables (as a JSONL test damages a file);
the lost acknowledgement is a real one: a TCP relay between the store and the
server forwards the append and cuts the connection before the answer comes back,
so the server commits and the client only sees the connection drop.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from kit_postgres import shared_server

from host_spec.errors import SessionCorruptError, SessionFormatError
from host_spec.events import SessionHeader
from host_spec.host.store.postgres import PostgresStore
from host_spec.testing import make_events


@pytest.fixture
def url() -> str:
    return shared_server().new_database()


def _stored(url: str, session_id: str = "s", count: int = 3) -> None:
    store = PostgresStore(url)
    log = store.create(SessionHeader(id=session_id, created_at=1))
    log.append(make_events(1, count), expected_seq=0)
    log.sync()
    log.close()
    store.close()


class TestDamage:
    def test_an_unreadable_event_is_corruption_naming_its_seq(self, url: str) -> None:
        _stored(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE dsh_events SET body = 'not json' WHERE seq = 2")
        with pytest.raises(SessionCorruptError) as caught:
            PostgresStore(url).read("s")
        assert caught.value.details["seq"] == 2

    def test_a_missing_seq_is_corruption(self, url: str) -> None:
        _stored(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DELETE FROM dsh_events WHERE seq = 2")
        with pytest.raises(SessionCorruptError, match="seq 2 is missing"):
            PostgresStore(url).resume("s")

    def test_a_foreign_header_version_is_a_format_error(self, url: str) -> None:
        _stored(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("""UPDATE dsh_sessions SET header = convert_to('{"id":"s","created_at":1,"version":9}', 'UTF8')""")
        with pytest.raises(SessionFormatError):
            PostgresStore(url).read("s")
        with pytest.raises(SessionFormatError):
            PostgresStore(url).header("s")

    def test_a_database_of_a_newer_layout_is_refused(self, url: str) -> None:
        _stored(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE dsh_schema SET version = 99")
        with pytest.raises(SessionFormatError, match="layout 99"):
            PostgresStore(url).exists("s")

    def test_a_reader_continues_from_its_cursor(self, url: str) -> None:
        _stored(url, count=5)
        header, events = PostgresStore(url).read_since("s", 3)
        assert header.id == "s" and [event.seq for event in events] == [4, 5]
        assert PostgresStore(url).read_since("s", 5)[1] == []

    def test_a_long_log_reads_whole_across_fetches_and_names_a_bad_row_by_its_seq(self, url: str) -> None:
        """Rows come a few thousand at a time: a log of several fetches reads whole, from any cursor,
        and a bad row deep in it is named by its own seq."""
        _stored(url, count=10_000)
        events = make_events(1, 10_000)
        assert PostgresStore(url).read("s")[1] == events
        assert PostgresStore(url).read_since("s", 5_000)[1] == events[5_000:]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DELETE FROM dsh_events WHERE seq = 9000")
        with pytest.raises(SessionCorruptError, match="seq 9000 is missing") as caught:
            PostgresStore(url).read_since("s", 4_000)
        assert caught.value.details["seq"] == 9000
        assert PostgresStore(url).read_since("s", 9_000)[1] == events[9_000:]


class _CuttingRelay:
    """TCP on 127.0.0.1 relayed to the server's unix socket; ``cut_next`` drops the answer to the next append."""

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cut_next = False
        self.cuts = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.socket(socket.AF_UNIX)
            server.connect(str(self.socket_path))
            muted = threading.Event()  # set: the server's answers are swallowed
            threading.Thread(target=self._pump, args=(client, server, True, muted), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False, muted), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, upstream: bool, muted: threading.Event) -> None:
        try:
            while data := source.recv(65536):
                cut = upstream and self.cut_next and b"INSERT INTO dsh_events" in data
                if cut:
                    muted.set()
                if not muted.is_set() or upstream:
                    target.sendall(data)
                if cut:
                    self.cut_next = False
                    time.sleep(0.3)  # the server commits; its answer never reaches the client
                    self.cuts += 1
                    for end in (source, target):
                        end.shutdown(socket.SHUT_RDWR)
                        end.close()
                    return
        except OSError:
            pass
        for end in (source, target):
            try:
                end.close()
            except OSError:
                pass

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def relay() -> Iterator[_CuttingRelay]:
    server = shared_server()
    port_file = server.data / "postmaster.pid"
    port = port_file.read_text().splitlines()[3]
    relay = _CuttingRelay(server.socket_dir / f".s.PGSQL.{port}")
    yield relay
    relay.close()


def test_a_commit_whose_answer_was_lost_is_recognised_and_stored_once(url: str, relay: _CuttingRelay) -> None:
    database = url.split("?")[0].rsplit("/", 1)[1]
    store = PostgresStore(f"postgresql://postgres@127.0.0.1:{relay.port}/{database}?sslmode=disable", retry_seconds=10)
    log = store.create(SessionHeader(id="s", created_at=1))
    log.append(make_events(1, 2), expected_seq=0)
    relay.cut_next = True
    log.sync()  # the first batch: its header and events commit, the answer is lost
    log.append(make_events(3, 2), expected_seq=2)
    relay.cut_next = True
    log.sync()  # a later batch: the compare-and-set it won looks lost, and is recognised
    assert relay.cuts == 2 and store.link.reconnects == 2
    assert [event.seq for event in PostgresStore(url).read("s")[1]] == [1, 2, 3, 4]
    log.append(make_events(5, 1), expected_seq=4)
    log.sync()
    log.close()
    store.close()
    assert [event.seq for event in PostgresStore(url).read("s")[1]] == [1, 2, 3, 4, 5]


async def test_an_answer_lost_on_the_loop_is_recognised_when_a_worker_writes_the_batch_again(
        url: str, relay: _CuttingRelay) -> None:
    """On the loop a lost answer is not retried there (``BlockingIOError``); the worker's retry finds its rows."""
    database = url.split("?")[0].rsplit("/", 1)[1]
    store = PostgresStore(f"postgresql://postgres@127.0.0.1:{relay.port}/{database}?sslmode=disable", retry_seconds=10)
    log = store.create(SessionHeader(id="s", created_at=1))
    log.append(make_events(1, 2), expected_seq=0)
    log.sync()
    batch = make_events(3, 2)
    log.append(batch, expected_seq=2)
    relay.cut_next = True
    with pytest.raises(BlockingIOError):
        log.sync()  # on the loop thread: the batch committed, the answer is lost
    assert log.tail_seq == 2 and relay.cuts == 1
    assert [event.seq for event in PostgresStore(url).read("s")[1]] == [1, 2, 3, 4]
    log.append(batch, expected_seq=2)  # the group commit's worker writes the same batch again
    await asyncio.to_thread(log.sync)  # its first attempt meets a moved tail, and its own rows
    assert log.tail_seq == 4 and store.link.reconnects == 1
    log.append(make_events(5, 1), expected_seq=4)
    log.sync()
    log.close()
    store.close()
    assert [event.seq for event in PostgresStore(url).read("s")[1]] == [1, 2, 3, 4, 5]
