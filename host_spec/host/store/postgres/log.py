"""The writer of one session in the PostgreSQL store (implements :class:`host_spec.storage.SessionLog`).

``append`` only checks the tail and queues the batch; ``sync`` sends every
queued event in one statement and one transaction (:data:`~.schema.APPEND`:
lease check, compare-and-set of the tail, insert, ``pg_notify``). A created log
stores its header with its first batch, so a session closed before anything was
written leaves no trace, as in the JSONL store. A short batch passes each body
as a parameter of its own (one ``VALUES`` row each) to a statement prepared on
the connection and run through libpq directly (:mod:`.prepared`): the driver's
per-call work costs several times the client's share of the round trip.

The log is ``inline``: a host may sync it on its event loop's thread, which
saves two thread hand-offs per batch (a round trip on a near server costs about
what a local ``fsync`` does). There it never waits for the connection: when the
link is busy with another thread's query or has to reconnect, ``sync`` raises
:class:`BlockingIOError` (a medium failure, so the log is back at its synced
tail) and the host writes the batch again from a worker thread, which waits.
The round trip itself does hold the loop: a slow server makes the host's moving
average of write times send later batches to the worker, and a server that
stops answering without closing the connection holds the loop until the
connection fails, as a stalled disk holds a JSONL store's inline write.

A lost connection is retried by the store's :class:`~.link.Link`. A commit
whose acknowledgement was lost is recognised on the retry, or on the next write
after a failed one: the rows at the batch's seqs carry this writer's epoch and
the same bytes, and only this writer can write under its epoch, so they are its
own and the batch counts as stored.

A live session keeps only its newest events decoded and reads older ones back
through :meth:`PostgresLog.read_events` (a range of seqs, one page at a time):
each row is decoded as :meth:`~.store.PostgresStore.read` decodes it
(:func:`decode_rows`), and a row that is not the event of its seq, or a seq
with no row, is ``SESSION_CORRUPT``, never a wrong or missing event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec
import psycopg

from host_spec.errors import (
    SequenceConflictError,
    SessionCorruptError,
    SessionExistsError,
    SessionFencedError,
    SessionNotLiveError,
)
from host_spec.events import Event, SessionHeader, decode_event, encode_event, encode_header

from host_spec.host.store.batch import running_loop
from host_spec.host.store.postgres.link import Link
from host_spec.host.store.postgres.prepared import SPREAD_MAX, PreparedAppend, named_append

__all__ = ["PostgresLog", "SPREAD_MAX", "decode_rows"]

_TAIL = "SELECT tail FROM dsh_sessions WHERE id = %s"
_OURS = "SELECT body FROM dsh_events WHERE session = %s AND seq > %s AND seq <= %s AND epoch = %s ORDER BY seq"
_RANGE = "SELECT seq, body FROM dsh_events WHERE session = %s AND seq >= %s AND seq < %s ORDER BY seq"


def decode_rows(session_id: str, rows: Iterable[tuple[int, Any]], first: int) -> list[Event]:
    """The events of ``(seq, body)`` rows that must hold seqs ``first, first + 1, ...``.

    Raises:
        SessionCorruptError: a body is unreadable, or a row (or the event in it) is not at its seq.
    """
    events: list[Event] = []
    for expected, (stored_seq, body) in enumerate(rows, first):
        try:
            event = decode_event(bytes(body))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise SessionCorruptError(f"session {session_id}: event {stored_seq} is unreadable: {exc}",
                                      session=session_id, seq=stored_seq) from None
        if stored_seq != expected:
            raise SessionCorruptError(f"session {session_id}: seq {expected} is missing (found {stored_seq})",
                                      session=session_id, seq=expected)
        if event.seq != expected:
            raise SessionCorruptError(f"session {session_id}: the row of seq {expected} holds event {event.seq}",
                                      session=session_id, seq=expected)
        events.append(event)
    return events


class PostgresLog:
    """One session's writer under its tree's lease (see the module docstring).

    Args:
        link: The store handle's connection.
        holder: The handle's lease holder name.
        release: Called once at :meth:`close` (uncounts the lease).

    Attributes:
        lease_key: The session tree whose lease this writer holds (its root id).
        epoch: The lease epoch every append carries (the fencing token).
        inline: A host may sync this log on its event loop's thread (see the module docstring).
    """

    inline = True

    def __init__(self, link: Link, holder: str, header: SessionHeader, lease_key: str, epoch: int, tail: int,
                 release: Callable[[], None]) -> None:
        self.header = header
        self.lease_key = lease_key
        self.epoch = epoch
        self._link = link
        self._holder = holder
        self._release = release
        self._synced = self._tail = tail
        self._stored = tail > 0
        self._pending: list[Event] = []
        self._open = True
        self._unsure = False  # a write failed without an answer: it may have committed
        self._prepared = PreparedAppend(header.id, lease_key, holder, epoch)

    def __repr__(self) -> str:
        return f"<PostgresLog {self.header.id} tail={self._tail} epoch={self.epoch}>"

    @property
    def tail_seq(self) -> int:
        return self._tail

    def _check_live(self) -> None:
        if not self._open:
            raise SessionNotLiveError(f"session {self.header.id}: writer is closed", session=self.header.id)

    def append(self, events: Sequence[Event], *, expected_seq: int) -> None:
        self._check_live()
        first = expected_seq + 1
        if expected_seq != self._tail or any(event.seq != first + index for index, event in enumerate(events)):
            raise SequenceConflictError(
                f"session {self.header.id}: append at seq {expected_seq} but the log ends at seq {self._tail}",
                session=self.header.id, expected=expected_seq, actual=self._tail,
            )
        self._pending.extend(events)
        self._tail = expected_seq + len(events)

    def sync(self) -> None:
        self._check_live()
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        try:
            self._write([encode_event(event) for event in pending])
        except BaseException:
            self._tail = self._synced
            raise
        self._stored = True
        self._synced = self._tail

    def _write(self, bodies: list[bytes]) -> None:
        header = self.header
        first = not self._stored
        expected = self._synced
        tail = expected + len(bodies)
        create = (header.created_at, header.parent_session, encode_header(header)) if first else None
        if len(bodies) <= SPREAD_MAX:  # the prepared statement (:mod:`.prepared`)
            prepared = self._prepared

            def send(conn: psycopg.Connection[Any]) -> tuple[int, int | None, str | None]:
                return prepared.run(conn, expected, bodies, create)
        else:
            params: dict[str, Any] = {
                "session": header.id, "lease": self.lease_key, "holder": self._holder, "epoch": self.epoch,
                "expected": expected, "tail": tail, "bodies": bodies}
            if create is not None:
                params.update(zip(("created", "parent", "header"), create))
            query = named_append(first, 0)

            def send(conn: psycopg.Connection[Any]) -> tuple[int, int | None, str | None]:
                return conn.execute(query, params).fetchone() or (0, None, None)

        def attempt(conn: psycopg.Connection[Any], number: int) -> tuple[str, int | None, int | None]:
            self._unsure = True  # until the server's answer is in
            stored, epoch, holder = send(conn)
            found: int | None = tail
            if stored:
                status = "ok"
            elif (number > 0 or unsure) and self._ours(conn, bodies):
                status = "ok"  # the lost-acknowledgement case
            elif epoch != self.epoch or holder != self._holder:
                status = "fenced"
            elif first:
                status = "exists"
            else:
                status, found = "conflict", (conn.execute(_TAIL, (header.id,)).fetchone() or (None,))[0]
            self._unsure = False
            return status, found, epoch

        unsure = self._unsure
        status, found, epoch = self._link.run(attempt, wait=running_loop() is None)
        if status == "ok":
            return
        if status == "fenced":
            raise SessionFencedError(
                f"session {header.id}: the lease of {self.lease_key} moved from epoch {self.epoch} to {epoch}; "
                "another holder took it over and this writer may not append",
                session=header.id, epoch=self.epoch, current=epoch,
            )
        if status == "exists":
            raise SessionExistsError(f"session {header.id} is already stored", session=header.id)
        raise SequenceConflictError(
            f"session {header.id}: append at seq {self._synced} but the stored log ends at seq {found}",
            session=header.id, expected=self._synced, actual=found,
        )

    def _ours(self, conn: psycopg.Connection[Any], bodies: list[bytes]) -> bool:
        rows = conn.execute(_OURS, (self.header.id, self._synced, self._synced + len(bodies), self.epoch)).fetchall()
        return [bytes(row[0]) for row in rows] == bodies

    def read_events(self, first: int, stop: int) -> list[Event]:
        """The stored events of seq ``first`` up to ``stop`` (one range read; no lease needed).

        Only stored seqs may be asked for: they never change, so a closed or
        fenced writer still reads them. A lost connection is retried by the link.

        Raises:
            SessionCorruptError: a row is unreadable, not its seq's event, or missing.
            StoreUnavailableError: the database stayed unreachable (an ``OSError``).
        """
        session = self.header.id
        rows = self._link.run(lambda conn, _: conn.execute(_RANGE, (session, first, stop)).fetchall())
        events = decode_rows(session, rows, first)
        if len(events) != stop - first:
            missing = first + len(events)
            raise SessionCorruptError(f"session {session}: seq {missing} is missing from the store",
                                      session=session, seq=missing)
        return events

    def close(self) -> None:
        if self._open:
            self._open = False
            self._pending = []
            self._release()
