"""Commit notifications of the PostgreSQL store: hints that a session grew.

Every append sends ``pg_notify`` inside its transaction, so a notification
arrives only for a committed batch, after it is readable. A listener that
loses its connection misses whatever was sent meanwhile; PostgreSQL does not
replay it. So a notification is a hint, never the record: after every
reconnect :meth:`Listener.poll` returns a :class:`Wakeup` with ``resync`` set,
and its reader re-reads each session it follows from its own cursor. A lost
notification then costs latency, never an event.
"""

from __future__ import annotations

import json
import time
from typing import Any

import attrs
import psycopg

from host_spec.errors import DshError

from host_spec.host.redaction import redact_url
from host_spec.host.store.postgres.link import connect, health, reason
from host_spec.host.store.postgres.schema import CHANNEL

__all__ = ["Listener", "Wakeup"]

@attrs.frozen
class Wakeup:
    """What one :meth:`Listener.poll` saw.

    Attributes:
        tails: The highest committed seq notified per session id.
        resync: The connection was (re)established: anything may have been missed.
    """

    tails: dict[str, int]
    resync: bool = False


class Listener:
    """A dedicated connection that LISTENs on the commit channel (one thread uses it).

    Args:
        url: The store's database URL.
        channel: The channel to LISTEN on (the commit channel unless told; the work
            desk's notifications have the same ``{"s": key, "seq": number}`` shape).
    """

    def __init__(self, url: str, channel: str = CHANNEL) -> None:
        self.url = url
        self.channel = channel
        self._conn: psycopg.Connection[Any] | None = None
        self.connects = 0  # connections made so far (every one after the first is a reconnect)

    def __repr__(self) -> str:
        return f"<Listener {redact_url(self.url)}>"

    def _connect(self) -> bool:
        """Open and LISTEN if needed; ``True`` when a new connection was made."""
        if self._conn is not None and not self._conn.closed:
            return False
        conn = connect(self.url)
        conn.execute(f"LISTEN {self.channel}")
        self._conn = conn
        return True

    def poll(self, timeout: float) -> Wakeup:
        """Wait up to ``timeout`` seconds for commit notifications and return what arrived.

        A broken connection is reopened (returning ``resync=True`` once it is
        back); while the server is down, or refuses this URL, this waits out
        ``timeout`` and returns an empty :class:`Wakeup` with ``resync`` false, so
        a caller simply polls again. A listener runs on a thread of its own, so it
        raises nothing: the loss is told once (the URL's
        :class:`~host_spec.host.store.postgres.link.Health`), and a refusal for good
        reaches the user through the store's own connections, which fail with its code.
        """
        deadline = time.monotonic() + timeout
        tails: dict[str, int] = {}
        try:
            fresh = self._connect()
        except (psycopg.Error, DshError) as exc:
            health(self.url).lost(exc.message if isinstance(exc, DshError) else reason(exc))
            time.sleep(max(0.0, min(0.2, deadline - time.monotonic())))
            return Wakeup({})
        if fresh:
            self.connects += 1
            health(self.url).restored()
        assert self._conn is not None
        try:
            # stop_after=1: return as soon as one batch arrived (every notice of the batch is yielded)
            for notice in self._conn.notifies(timeout=max(0.0, deadline - time.monotonic()), stop_after=1):
                self._take(notice.payload, tails)
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            health(self.url).lost(reason(exc))
            self.close()
        return Wakeup(tails, resync=fresh)

    @staticmethod
    def _take(payload: str, tails: dict[str, int]) -> None:
        try:
            found = json.loads(payload)
            session, seq = str(found["s"]), int(found["seq"])
        except (ValueError, KeyError, TypeError):
            return  # a foreign payload on our channel: not ours to interpret
        if seq > tails.get(session, 0):
            tails[session] = seq

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
            self._conn = None
