"""The prepared append: a short batch's statement runs prepared on the connection, through libpq.

A statement's first use on a connection carries its text; from the second batch
of the same shape on it runs prepared (the server's ``pg_prepared_statements``
is the oracle that it does). What must hold whatever the path: every event is
stored once, byte for byte, under any session id; a server that forgot its
prepared statements (``DEALLOCATE ALL``, as a pooler's ``DISCARD ALL`` does) is
answered by sending the text again, not by a failed write; a refusal is still the
typed error; a server error is raised as psycopg raises it. The events are read
back through a fresh handle.
"""

from __future__ import annotations


import psycopg
import pytest

from host_spec.errors import SequenceConflictError
from host_spec.events import Event, SessionHeader, encode_event
from host_spec.host.store.postgres import PostgresStore
from host_spec.host.store.postgres.log import SPREAD_MAX
from host_spec.testing import make_events




def _stored(url: str, session_id: str) -> list[Event]:
    reader = PostgresStore(url)
    try:
        return reader.read(session_id)[1]
    finally:
        reader.close()


def _prepared_names(store: PostgresStore) -> set[str]:
    rows = store.link.run(lambda conn, _: conn.execute("SELECT name FROM pg_prepared_statements").fetchall())
    return {row[0] for row in rows}


def test_a_second_batch_of_a_shape_runs_prepared_and_every_event_is_stored_once(url: str, store: PostgresStore) -> None:
    log = store.create(SessionHeader(id="s", created_at=1))
    events = make_events(1, 1 + 2 * sum(range(1, SPREAD_MAX + 1)))
    log.append(events[:1], expected_seq=0)
    log.sync()  # the first batch (the session row): never prepared
    assert not {name for name in _prepared_names(store) if name.startswith("dsh_append")}
    seq = 1
    for size in [*range(1, SPREAD_MAX + 1), *range(1, SPREAD_MAX + 1)]:  # every shape twice
        log.append(events[seq:seq + size], expected_seq=seq)
        log.sync()
        seq += size
    assert {f"dsh_append_0_{size}" for size in range(1, SPREAD_MAX + 1)} <= _prepared_names(store)
    log.close()
    stored = _stored(url, "s")
    assert [encode_event(event) for event in stored] == [encode_event(event) for event in events]


def test_a_server_that_forgot_its_prepared_statements_gets_the_text_again(url: str, store: PostgresStore) -> None:
    log = store.create(SessionHeader(id="s", created_at=1))
    events = make_events(1, 5)
    for seq in range(3):
        log.append(events[seq:seq + 1], expected_seq=seq)
        log.sync()
    assert "dsh_append_0_1" in _prepared_names(store)
    store.link.run(lambda conn, _: conn.execute("DEALLOCATE ALL"))
    for seq in range(3, 5):
        log.append(events[seq:seq + 1], expected_seq=seq)
        log.sync()
    assert "dsh_append_0_1" in _prepared_names(store)  # prepared anew
    log.close()
    assert [event.seq for event in _stored(url, "s")] == [1, 2, 3, 4, 5]


def test_a_session_id_outside_ascii_and_a_child_session_round_trip(url: str, store: PostgresStore) -> None:
    lead = store.create(SessionHeader(id="lead-é", created_at=1))
    child = store.create(SessionHeader(id="kind-ß✓", created_at=2, parent_session="lead-é"))
    for log in (lead, child):
        for seq in range(3):
            log.append(make_events(seq + 1, 1), expected_seq=seq)
            log.sync()
        log.close()
    assert [event.seq for event in _stored(url, "kind-ß✓")] == [1, 2, 3]
    reader = PostgresStore(url)
    try:
        assert reader.header("kind-ß✓").parent_session == "lead-é"
    finally:
        reader.close()


def test_a_moved_tail_on_the_prepared_path_is_a_sequence_conflict(url: str, store: PostgresStore) -> None:
    log = store.create(SessionHeader(id="s", created_at=1))
    for seq in range(3):
        log.append(make_events(seq + 1, 1), expected_seq=seq)
        log.sync()
    with psycopg.connect(url, autocommit=True) as other:  # another writer moved the tail behind our back
        other.execute("UPDATE dsh_sessions SET tail = 7 WHERE id = 's'")
    log.append(make_events(4, 1), expected_seq=3)
    with pytest.raises(SequenceConflictError) as raised:
        log.sync()
    assert raised.value.code == "SESSION_SEQ_CONFLICT" and "ends at seq 7" in str(raised.value)
    assert log.tail_seq == 3
    log.close()


def test_a_server_error_on_the_prepared_path_is_raised_as_psycopg_raises_it(url: str, store: PostgresStore) -> None:
    log = store.create(SessionHeader(id="s", created_at=1))
    for seq in range(2):
        log.append(make_events(seq + 1, 1), expected_seq=seq)
        log.sync()
    with psycopg.connect(url, autocommit=True) as other:  # a row at the next seq: the insert breaks its key
        other.execute("INSERT INTO dsh_events (session, seq, epoch, body) VALUES ('s', 3, 0, '\\x00')")
    log.append(make_events(3, 1), expected_seq=2)
    with pytest.raises(psycopg.errors.UniqueViolation):
        log.sync()
    assert log.tail_seq == 2
    log.close()
