"""Checkpoints in the PostgreSQL store: one row per ``(session, name)``, replaced by one upsert.

``dsh_checkpoints`` (:mod:`.schema`, layout 4) holds each session's newest
checkpoint of each name: the seq it covers and its payload, as opaque bytes. One
``INSERT ... ON CONFLICT DO UPDATE`` is one transaction, so a crash leaves the
previous row or the new one, never a mix.

A checkpoint is a cache, and that shapes the rest. It is not fenced by the
writer's lease (a stale holder can only store one that fits a prefix of the log,
which a reader still checks). It uses a connection of its own, so a write never
holds the connection the log's appends use. And no call may stall a resume: the
connection takes no lock of its own (the table is created with the store's other
tables, by the store's own connection, which it asks for once, before its first call),
every statement on it is bounded by :data:`STATEMENT_TIMEOUT_MS`, and a call gives
up after :data:`RETRY_SECONDS`; the ``OSError`` it then raises (also for a table
that is not there) makes the reader fold the whole log instead. That connection
is opened for each call and closed after it: checkpoints are rare (a start, every
few thousand events, a clean stop), and a Lead that kept it would hold one more
server connection for its whole life (connections are what limits the number of
Teams on one server, ``docs/capacity.md``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

import psycopg

from host_spec.host.store.postgres.link import Link

__all__ = ["RETRY_SECONDS", "STATEMENT_TIMEOUT_MS", "PostgresCheckpoints"]

#: The longest one statement of the checkpoint connection may run or wait for a lock.
STATEMENT_TIMEOUT_MS: Final = 2000
#: The longest one checkpoint call keeps retrying (a timed-out statement included).
RETRY_SECONDS: Final = 5.0
_NAME: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_SAVE: Final = """INSERT INTO dsh_checkpoints (session, name, seq, payload) VALUES (%s, %s, %s, %s)
    ON CONFLICT (session, name) DO UPDATE SET seq = excluded.seq, payload = excluded.payload"""
_LOAD: Final = "SELECT seq, payload FROM dsh_checkpoints WHERE session = %s AND name = %s"


def _bounded(conn: psycopg.Connection[Any]) -> None:
    """A new checkpoint connection: no statement on it runs or waits longer than the bound."""
    conn.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")


def _checked(name: str, seq: int) -> None:
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise ValueError(f"checkpoint name {name!r} is not a plain lowercase word")
    if seq < 0:
        raise ValueError(f"checkpoint seq {seq} is negative")


class PostgresCheckpoints:
    """The checkpoints of one store's sessions (implements ``host_spec.storage.Checkpoints``).

    Args:
        url: The store's libpq URL.
        ready: Makes sure the store's tables exist (the store's own connection,
            opened if it is not; asked once, before the first call).
        retry_seconds: How long one call keeps retrying a lost connection (at most
            :data:`RETRY_SECONDS`; then ``STORE_UNAVAILABLE``, an ``OSError``).
    """

    def __init__(self, url: str, *, ready: Callable[[], None], retry_seconds: float) -> None:
        self._url = url
        self._ready = ready
        self._retry_seconds = min(retry_seconds, RETRY_SECONDS)
        self._asked = False

    def _run(self, query: str, parameters: tuple[Any, ...]) -> Any:
        """One statement on a connection of its own, closed after it (calls on other threads get theirs)."""
        if not self._asked:
            self._ready()
            self._asked = True
        link = Link(self._url, retry_seconds=self._retry_seconds, setup=_bounded)
        try:
            return link.run(lambda conn, _: conn.execute(query, parameters).fetchone())
        except psycopg.Error as exc:  # not the connection (that is retried, then an OSError): no table, a bad row
            raise OSError(f"the checkpoints table cannot be used: {exc.sqlstate or type(exc).__name__}") from exc
        finally:
            link.close()

    def save(self, session_id: str, name: str, seq: int, payload: bytes) -> None:
        _checked(name, seq)
        self._run(_SAVE + " RETURNING seq", (session_id, name, seq, bytes(payload)))

    def load(self, session_id: str, name: str) -> tuple[int, bytes] | None:
        _checked(name, 0)
        row = self._run(_LOAD, (session_id, name))
        return None if row is None else (int(row[0]), bytes(row[1]))
