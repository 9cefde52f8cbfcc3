"""Session logs in a PostgreSQL database (implements :class:`host_spec.storage.StorageBackend`).

Several processes on several machines share one database: each opens its own
:class:`PostgresStore` on the same URL. What the JSONL store gets from file
locks this store gets from leases (:mod:`.leases`): opening a session for
writing claims the lease of its session tree (its root), so one Team keeps one
writer process at a time, exactly as today's one-process-per-Team rule, but
across machines and with a fencing epoch instead of a lock that dies with its
process. The compare-and-set on the tail is the database's (:mod:`.schema`).

Reads take no lease and see only committed batches. A read is one statement
(the header and up to a few thousand events) unless the log is longer; then the
rest comes in pages of as many rows by seq, each decoded before the next is
fetched, so a long log's resume never holds every row and every decoded event at
once. A batch is committed whole and only ever after the ones before it, so the
pages end at a batch boundary, as one statement would: a concurrent commit is
either wholly in or out.
"""

from __future__ import annotations

import os
import secrets
import socket
from typing import Any

import msgspec
import psycopg

from host_spec.errors import (
    SessionCorruptError,
    SessionExistsError,
    SessionFencedError,
    SessionFormatError,
    SessionNotFoundError,
)
from host_spec.events import SESSION_FORMAT_VERSION, Event, SessionHeader, decode_header

from host_spec.host.store.postgres.checkpoints import PostgresCheckpoints
from host_spec.host.store.postgres.leases import Leases
from host_spec.host.redaction import redact_url
from host_spec.host.store.postgres.link import Link, check_url
from host_spec.host.store.postgres.log import PostgresLog, decode_rows
from host_spec.host.store.postgres.schema import DDL, SCHEMA_LOCK, SCHEMA_VERSION
from host_spec.host.store.postgres.work import WORK_DDL, WorkDesk, member_key, worker_key

__all__ = ["PostgresStore"]

#: Default lease time: how long a dead holder keeps its sessions from other processes.
LEASE_SECONDS = 15.0
#: Default time an operation keeps retrying a lost connection before it fails.
RETRY_SECONDS = 30.0

_HEADER = "SELECT header FROM dsh_sessions WHERE id = %s"
#: Rows read (and decoded) at a time by :meth:`PostgresStore.read_since`.
_FETCH = 4096
_FIRST = f"""
SELECT s.header, e.seq, e.body FROM dsh_sessions s LEFT JOIN LATERAL (
    SELECT seq, body FROM dsh_events WHERE session = s.id AND seq > %s ORDER BY seq LIMIT {_FETCH}
) e ON true WHERE s.id = %s ORDER BY e.seq
"""
_NEXT = f"SELECT seq, body FROM dsh_events WHERE session = %s AND seq > %s ORDER BY seq LIMIT {_FETCH}"


def _create_schema(conn: psycopg.Connection[Any]) -> None:
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        found = conn.execute("SELECT to_regclass('dsh_schema') IS NOT NULL").fetchone()
        if found and found[0]:
            row = conn.execute("SELECT max(version) FROM dsh_schema").fetchone()
            if row and row[0] is not None and row[0] > SCHEMA_VERSION:
                raise SessionFormatError(
                    f"the database holds store layout {row[0]}; this host writes layout {SCHEMA_VERSION} "
                    "(upgrade dsh-team)")
            if row and row[0] == SCHEMA_VERSION:
                return
        conn.execute(DDL)
        conn.execute(WORK_DDL)
        conn.execute("INSERT INTO dsh_schema (version) VALUES (%s)", (SCHEMA_VERSION,))


class PostgresStore:
    """Session logs in the database at ``url`` (one handle per process; see the module docstring).

    Args:
        url: A libpq URL (``postgresql://user@host/db``); a password in it never reaches a message.
        holder: This handle's name on its leases (default: host, pid and a random part).
        lease_seconds: How long a lease lasts unless renewed; a crashed holder's
            sessions can be claimed by another process after this long.
        retry_seconds: How long one operation keeps retrying a lost connection
            before it fails with ``STORE_UNAVAILABLE`` (an ``OSError``).

    Raises:
        ConfigError: ``STORE_INVALID``: ``url`` does not parse, or its port is not a number.
    """

    def __init__(
        self,
        url: str,
        *,
        holder: str | None = None,
        lease_seconds: float = LEASE_SECONDS,
        retry_seconds: float = RETRY_SECONDS,
    ) -> None:
        check_url(url)
        self.url = url
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.link = Link(url, retry_seconds=retry_seconds, setup=_create_schema)
        heartbeat = Link(url, retry_seconds=min(retry_seconds, lease_seconds / 3))
        self.leases = Leases(self.link, heartbeat, self.holder, lease_seconds)
        #: Checkpoints beside the logs (``host_spec.storage.CheckpointingBackend``), on a connection of their own.
        self.checkpoints = PostgresCheckpoints(url, ready=self.check, retry_seconds=retry_seconds)
        self._roots: dict[str, str] = {}  # open session id -> lease key

    def __repr__(self) -> str:
        return f"PostgresStore({redact_url(self.url)!r})"

    def check(self) -> None:
        """Connect now (creating the tables on first use), so a caller knows the store answers.

        Raises:
            ConfigError: the server refused for good (``STORE_AUTH``, ``STORE_NOT_FOUND``, ``STORE_INVALID``).
            StoreUnavailableError: it stayed unreachable for the retry window.
        """
        self.link.run(lambda conn, _: conn.execute("SELECT 1"))

    def takeover(self) -> SessionFencedError | None:
        """How this handle lost a session tree it held to another holder, or ``None`` if it lost none.

        A renewal that found the lease taken, or a release that found it no longer
        ours, marks the tree lost; the error names who holds it now, or who took it
        last when that holder has finished and released it. A process that lost its
        Team must not end as if it had finished it.
        """
        lost = sorted(key for key in self.leases.lost if not key.startswith((member_key(""), worker_key(""))))
        if not lost:
            return None
        key = lost[0]
        mine = self.leases.epochs.get(key, 0)
        try:
            holder, current, holding = self.leases.last_claim(key)
        except (OSError, psycopg.Error):
            holder, current, holding = None, 0, True  # who took it is unknown, not released
        who = "another holder" if holder is None else f"holder {holder}"
        now = (f" epoch {current}" if current else "") + ("" if holding else ", since released")
        return SessionFencedError(
            f"team {key} was taken over by {who} (lease{now}; this process held epoch {mine}): this process "
            "stopped writing, and what it had not stored is the new holder's to redo",
            session=key, epoch=mine, current=current, holder=holder, released=not holding)

    # ------------------------------------------------------------ reading

    def exists(self, session_id: str) -> bool:
        row = self.link.run(lambda conn, _: conn.execute("SELECT 1 FROM dsh_sessions WHERE id = %s", (session_id,)).fetchone())
        return row is not None

    def list_ids(self) -> list[str]:
        rows = self.link.run(lambda conn, _: conn.execute("SELECT id FROM dsh_sessions ORDER BY created_at, id").fetchall())
        return [row[0] for row in rows]

    def scan(self) -> tuple[list[str], list[Any]]:
        """Stored ids in creation order and the unreadable headers (none: a row has no torn line)."""
        return self.list_ids(), []

    def orphaned_teams(self) -> tuple[list[str], float | None]:
        """Root sessions whose holder died (lease held but expired), and seconds until the next expiry.

        A Team whose process closed cleanly has released its lease (no holder): it
        is finished until someone resumes it. A held lease that expired means its
        holder stopped renewing (killed, frozen, cut off): its Team needs a new
        holder. The second value is how long until the next held lease expires
        (``None``: none is held), so a worker sleeps exactly that long.
        """
        query = """
            SELECT l.key, extract(epoch FROM l.expires_at - now())::float8 FROM dsh_leases l
            JOIN dsh_sessions s ON s.id = l.key
            WHERE s.parent IS NULL AND l.holder IS NOT NULL ORDER BY l.expires_at
        """
        rows = self.link.run(lambda conn, _: conn.execute(query).fetchall())
        orphaned = [row[0] for row in rows if row[1] <= 0]
        upcoming = [float(row[1]) for row in rows if row[1] > 0]
        return orphaned, (upcoming[0] if upcoming else None)

    def roots(self) -> list[str]:
        """Stored root sessions (no parent) in creation order."""
        query = "SELECT id FROM dsh_sessions WHERE parent IS NULL ORDER BY created_at, id"
        return [row[0] for row in self.link.run(lambda conn, _: conn.execute(query).fetchall())]

    def put_run(self, session_id: str, settings: bytes) -> None:
        """Store how root ``session_id`` was started (replacing an older record)."""
        query = ("INSERT INTO dsh_runs (session, settings) VALUES (%s, %s) "
                 "ON CONFLICT (session) DO UPDATE SET settings = excluded.settings")
        self.link.run(lambda conn, _: conn.execute(query, (session_id, settings)))

    def get_run(self, session_id: str) -> bytes | None:
        """The record :meth:`put_run` stored, or ``None``."""
        query = "SELECT settings FROM dsh_runs WHERE session = %s"
        row = self.link.run(lambda conn, _: conn.execute(query, (session_id,)).fetchone())
        return bytes(row[0]) if row is not None else None

    def header(self, session_id: str) -> SessionHeader:
        """The stored header of ``session_id`` alone (no events read).

        Raises:
            SessionNotFoundError / SessionCorruptError / SessionFormatError: as for :meth:`read`.
        """
        row = self.link.run(lambda conn, _: conn.execute(_HEADER, (session_id,)).fetchone())
        if row is None:
            raise SessionNotFoundError(f"session {session_id} not found", session=session_id)
        return self._decode_header(session_id, bytes(row[0]))

    def read(self, session_id: str) -> tuple[SessionHeader, list[Event]]:
        return self.read_since(session_id, 0)

    def read_since(self, session_id: str, seq: int) -> tuple[SessionHeader, list[Event]]:
        """The header and the committed events after ``seq`` (a reader's cursor; ``0``: all).

        Raises:
            SessionNotFoundError: nothing is stored under this id.
            SessionCorruptError: a stored event is unreadable or a seq is missing.
            SessionFormatError: the header has a foreign format version.
        """
        rows = self.link.run(lambda conn, _: conn.execute(_FIRST, (seq, session_id)).fetchall())
        if not rows:
            raise SessionNotFoundError(f"session {session_id} not found", session=session_id)
        data = bytes(rows[0][0])
        page = [] if rows[0][1] is None else [row[1:] for row in rows]
        del rows  # each of its rows repeats the header
        events: list[Event] = []
        while True:
            events += decode_rows(session_id, page, seq + 1 + len(events))
            if len(page) < _FETCH:
                break
            after = seq + len(events)
            page = self.link.run(lambda conn, _: conn.execute(_NEXT, (session_id, after)).fetchall())
        header = self._decode_header(session_id, data)
        return header, events

    @staticmethod
    def _decode_header(session_id: str, data: bytes) -> SessionHeader:
        try:
            header = decode_header(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise SessionCorruptError(f"session {session_id}: header is unreadable: {exc}", session=session_id) from None
        if header.version != SESSION_FORMAT_VERSION:
            raise SessionFormatError(
                f"session {session_id}: format version {header.version} is not supported "
                f"(this host reads version {SESSION_FORMAT_VERSION})", session=session_id)
        return header

    # ------------------------------------------------------------ writing

    def lease_key(self, session_id: str, parent: str | None) -> str:
        """The lease a writer of ``session_id`` needs: the root of its session tree."""
        if parent is None:
            return session_id
        known = self._roots.get(parent)
        if known is not None:
            return known
        row = self.link.run(lambda conn, _: conn.execute("SELECT lease FROM dsh_sessions WHERE id = %s", (parent,)).fetchone())
        return row[0] if row is not None else parent

    def create(self, header: SessionHeader) -> PostgresLog:
        key = self.lease_key(header.id, header.parent_session)
        epoch = self.leases.acquire(key, header.id)
        try:
            if self.exists(header.id):
                raise SessionExistsError(f"session {header.id} is already stored; resume it instead", session=header.id)
        except BaseException:
            self.leases.release(key)
            raise
        self._roots[header.id] = key
        return PostgresLog(self.link, self.holder, header, key, epoch, 0, lambda: self._release(key, header.id))

    def resume(self, session_id: str) -> tuple[PostgresLog, list[Event]]:
        row = self.link.run(lambda conn, _: conn.execute("SELECT lease FROM dsh_sessions WHERE id = %s", (session_id,)).fetchone())
        if row is None:
            raise SessionNotFoundError(f"session {session_id} not found", session=session_id)
        key = row[0]
        counted = key in self._roots.values()  # this handle holds the tree already: no new claim
        epoch = self.leases.acquire(key, session_id)  # before reading: a stale holder is fenced from here on
        try:
            if key == session_id and not counted and epoch > 1:
                # A new holder of the Team: nothing the old one posted to the desk may run or be
                # recorded from here on, and its members' leases are fenced (work.WorkDesk.take_over).
                WorkDesk(self).take_over(key, epoch)
            header, events = self.read(session_id)
        except BaseException:
            self.leases.release(key)
            raise
        self._roots[session_id] = key
        writer = PostgresLog(self.link, self.holder, header, key, epoch, len(events), lambda: self._release(key, session_id))
        return writer, events

    def _release(self, key: str, session_id: str) -> None:
        self._roots.pop(session_id, None)
        self.leases.release(key)

    def close(self) -> None:
        """Stop renewing leases and close the connections (open logs should be closed first)."""
        self.leases.close()
        self.link.close()
