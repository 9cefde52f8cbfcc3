"""Leases and fencing in the PostgreSQL store, against a real server.

The oracle is the database itself: after every refusal the stored log is read
back through a fresh handle and must hold exactly what the rightful holder wrote.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from host_spec.errors import SessionFencedError, SessionLockedError
from host_spec.events import SessionHeader
from host_spec.host.store.postgres import PostgresStore

from host_spec.testing import make_events

Opener = Callable[..., PostgresStore]


def _seqs(store: PostgresStore, session_id: str = "root") -> list[int]:
    return [event.seq for event in store.read(session_id)[1]]


class TestOneHolderPerTeam:
    def test_a_second_holder_is_refused_while_the_lease_is_live(self, open_store: Opener) -> None:
        first, second = open_store(), open_store()
        log = first.create(SessionHeader(id="root", created_at=1))
        log.append(make_events(1, 2), expected_seq=0)
        log.sync()
        with pytest.raises(SessionLockedError) as caught:
            second.resume("root")
        assert caught.value.code == "SESSION_LOCKED" and caught.value.details["holder"] == first.holder
        log.close()
        resumed, events = second.resume("root")  # a closed writer frees the lease at once
        assert resumed.epoch == log.epoch + 1 and [event.seq for event in events] == [1, 2]
        resumed.close()

    def test_a_teammate_is_written_under_its_roots_lease(self, open_store: Opener) -> None:
        lead_process, other = open_store(), open_store()
        root = lead_process.create(SessionHeader(id="root", created_at=1))
        root.append(make_events(1, 1), expected_seq=0)
        root.sync()
        child = lead_process.create(SessionHeader(id="mate", created_at=2, parent_session="root"))
        child.append(make_events(1, 1), expected_seq=0)
        child.sync()
        assert child.lease_key == "root" and child.epoch == root.epoch  # one claim, counted
        child.close()  # the Lead still holds the tree
        with pytest.raises(SessionLockedError) as caught:
            other.resume("mate")
        assert caught.value.details["root"] == "root"
        root.close()
        resumed, _ = other.resume("mate")
        resumed.close()


class TestFencing:
    def test_a_holder_presumed_dead_cannot_append_after_a_takeover(self, open_store: Opener) -> None:
        stale, taker = open_store(lease_seconds=1.0), open_store(lease_seconds=1.0)
        log = stale.create(SessionHeader(id="root", created_at=1))
        log.append(make_events(1, 2), expected_seq=0)
        log.sync()
        stale.leases.close()  # the holder stalls: no more renewals, as a paused or cut-off process
        deadline = time.monotonic() + 10
        while True:
            try:
                new, events = taker.resume("root")
                break
            except SessionLockedError:
                assert time.monotonic() < deadline, "the stale lease never expired"
                time.sleep(0.1)
        assert new.epoch == log.epoch + 1 and [event.seq for event in events] == [1, 2]
        log.append(make_events(3, 1), expected_seq=2)  # the stale writer wakes up and writes
        with pytest.raises(SessionFencedError) as caught:
            log.sync()
        assert caught.value.code == "SESSION_FENCED"
        assert caught.value.details == {"session": "root", "epoch": log.epoch, "current": new.epoch}
        assert log.tail_seq == 2 and _seqs(open_store()) == [1, 2]  # nothing of the stale batch is stored
        new.append(make_events(3, 2), expected_seq=2)
        new.sync()
        assert _seqs(open_store()) == [1, 2, 3, 4]
        with pytest.raises(SessionFencedError):  # and it stays fenced
            log.append(make_events(3, 1), expected_seq=2)
            log.sync()
        new.close()
        log.close()  # releasing a lease it no longer holds changes nothing
        assert _seqs(open_store()) == [1, 2, 3, 4]

    def test_a_live_holder_keeps_its_lease_by_renewing_it(self, open_store: Opener) -> None:
        holder, other = open_store(lease_seconds=0.6), open_store(lease_seconds=0.6)
        log = holder.create(SessionHeader(id="root", created_at=1))
        log.append(make_events(1, 1), expected_seq=0)
        log.sync()
        time.sleep(1.5)  # two and a half lease times: only the heartbeat keeps it
        with pytest.raises(SessionLockedError):
            other.resume("root")
        log.append(make_events(2, 1), expected_seq=1)
        log.sync()
        assert _seqs(other) == [1, 2] and not holder.leases.lost
        log.close()


def _waiting(conn: psycopg.Connection[Any], count: int) -> None:
    """Return once ``count`` lock requests of other sessions wait (blocked statements)."""
    deadline = time.monotonic() + 10
    while conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone() != (count,):
        assert time.monotonic() < deadline, "the statements never blocked"
        time.sleep(0.01)


def _in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as exc:  # handed to the test's assertions
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


class TestFencingRaces:
    """A claim and an append in flight at once: the append commits before the claim, or is fenced."""

    def test_an_append_in_flight_when_a_claim_comes_commits_before_the_claim(self, open_store: Opener) -> None:
        stale, taker = open_store(lease_seconds=0.5), open_store()
        log = stale.create(SessionHeader(id="root", created_at=1))
        log.append(make_events(1, 2), expected_seq=0)
        log.sync()
        stale.leases.close()
        time.sleep(1.0)  # the lease expired: the stale writer does not know yet
        with psycopg.connect(stale.url) as blocker:
            blocker.execute("SELECT 1 FROM dsh_sessions WHERE id = 'root' FOR UPDATE")  # the append stalls on the tail
            log.append(make_events(3, 1), expected_seq=2)
            append, appended = _in_thread(log.sync)
            _waiting(blocker, 1)  # the append has read the lease and waits for the tail row
            claim, claimed = _in_thread(lambda: taker.resume("root"))
            _waiting(blocker, 2)  # the claim waits for the append that holds the lease row
            blocker.rollback()
        append.join(10)
        claim.join(10)
        assert appended == [None]  # committed under the old epoch, before the claim
        resumed, events = claimed[0]
        assert resumed.epoch == log.epoch + 1 and [event.seq for event in events] == [1, 2, 3]
        assert _seqs(open_store()) == [1, 2, 3]  # the new holder read everything the old one stored
        resumed.close()
        log.close()

    def test_an_append_that_comes_during_a_claim_waits_for_it_and_is_fenced(self, open_store: Opener) -> None:
        stale = open_store()
        log = stale.create(SessionHeader(id="root", created_at=1))
        log.append(make_events(1, 2), expected_seq=0)
        log.sync()
        with psycopg.connect(stale.url) as claimer:
            claimer.execute("UPDATE dsh_leases SET holder = 'other', epoch = epoch + 1 WHERE key = 'root'")
            log.append(make_events(3, 1), expected_seq=2)
            append, appended = _in_thread(log.sync)
            _waiting(claimer, 1)  # the append waits for the claim's row
            claimer.commit()
        append.join(10)
        assert isinstance(appended[0], SessionFencedError)
        assert appended[0].details == {"session": "root", "epoch": log.epoch, "current": log.epoch + 1}
        assert log.tail_seq == 2 and _seqs(open_store()) == [1, 2]
        log.close()
