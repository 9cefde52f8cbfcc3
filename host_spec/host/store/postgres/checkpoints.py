"""Checkpoints in the PostgreSQL store: one row per ``(session, name)``, replaced by one upsert.

``dsh_checkpoints`` holds each session's newest checkpoint of each name: the seq
it covers and its payload, as opaque bytes. One ``INSERT ... ON CONFLICT DO
UPDATE`` is one transaction, so a crash leaves the previous row or the new one,
never a mix. The table is created on first use (under the schema's advisory
lock), so a database an older host of the same layout created gains it without
a new layout number, and older hosts keep working on it.

A checkpoint is a cache: it is not fenced by the writer's lease (a stale holder
can only store one that fits a prefix of the log, which a reader still checks),
and it uses a connection of its own, so a write never holds the connection the
log's appends use. That connection is opened for each save or load and closed
after it: checkpoints are rare (a start, every few thousand events, a clean
stop), and a Lead that kept it would hold one more server connection for its
whole life (connections are what limits the number of Teams on one server,
``docs/capacity.md``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final, TypeVar

import psycopg

from host_spec.host.store.postgres.link import Link
from host_spec.host.store.postgres.schema import SCHEMA_LOCK

__all__ = ["PostgresCheckpoints"]

T = TypeVar("T")

_NAME: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_TABLE: Final = """CREATE TABLE IF NOT EXISTS dsh_checkpoints (
    session text COLLATE "C" NOT NULL,
    name text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    payload bytea NOT NULL,
    PRIMARY KEY (session, name)
)"""
_SAVE: Final = """INSERT INTO dsh_checkpoints (session, name, seq, payload) VALUES (%s, %s, %s, %s)
    ON CONFLICT (session, name) DO UPDATE SET seq = excluded.seq, payload = excluded.payload"""
_LOAD: Final = "SELECT seq, payload FROM dsh_checkpoints WHERE session = %s AND name = %s"


def _checked(name: str, seq: int) -> None:
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise ValueError(f"checkpoint name {name!r} is not a plain lowercase word")
    if seq < 0:
        raise ValueError(f"checkpoint seq {seq} is negative")


def _create_table(conn: psycopg.Connection[Any]) -> None:
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        conn.execute(_TABLE)


class PostgresCheckpoints:
    """The checkpoints of one store's sessions (implements ``host_spec.storage.Checkpoints``).

    Args:
        url: The store's libpq URL.
        retry_seconds: How long one call keeps retrying a lost connection
            (then ``STORE_UNAVAILABLE``, an ``OSError``).
    """

    def __init__(self, url: str, *, retry_seconds: float) -> None:
        self._url = url
        self._retry_seconds = retry_seconds

    def _once(self, operation: Callable[[psycopg.Connection[Any], int], T]) -> T:
        """Run ``operation`` on a connection of its own, closed after it (calls on other threads get theirs)."""
        link = Link(self._url, retry_seconds=self._retry_seconds, setup=_create_table)
        try:
            return link.run(operation)
        finally:
            link.close()

    def save(self, session_id: str, name: str, seq: int, payload: bytes) -> None:
        _checked(name, seq)
        self._once(lambda conn, _: conn.execute(_SAVE, (session_id, name, seq, bytes(payload))))

    def load(self, session_id: str, name: str) -> tuple[int, bytes] | None:
        _checked(name, 0)
        row = self._once(lambda conn, _: conn.execute(_LOAD, (session_id, name)).fetchone())
        return None if row is None else (int(row[0]), bytes(row[1]))

    def close(self) -> None:
        """Nothing to close: no connection outlives a call (kept for the store's own ``close``)."""
