"""Following sessions another process writes: commit notifications plus cursor reads.

A reader in one process (a web panel) shows sessions a writer in another process
(or on another machine) appends to. It keeps a *cursor* per followed session, the
last seq it handed on, and only ever reads the events after it
(:meth:`~host_spec.host.store.postgres.PostgresStore.read_since`), so a change
costs one indexed read of the new rows, never a re-read of the log.

The commit notifications (:class:`~host_spec.host.store.postgres.notify.Listener`)
only say *when* to read. One that is lost -- the listening connection dropped, the
server restarted -- costs latency, never an event: after every (re)connect the
listener asks for a resync and every followed session is read from its cursor,
and a bounded re-check of every cursor runs every ``recheck_seconds`` anyway.
Because the cursor only moves past events already handed on, each event is handed
on exactly once and in seq order, whichever way it was found.

The follower runs on a daemon thread of its own; ``deliver(header, events)`` is
called on that thread, one session's batch at a time, with the session's header
(so a receiver knows, say, a fork's inherited prefix without another read).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import structlog

from host_spec.errors import SessionNotFoundError
from host_spec.events import Event, SessionHeader

from host_spec.host.redaction import redact_url
from host_spec.host.store.postgres.notify import Listener

__all__ = ["StoreFollower", "lease_holder"]

log = structlog.get_logger(__name__)

#: Seconds between two re-checks of every cursor when no notification came (the safety net).
RECHECK_SECONDS = 5.0
#: Longest single wait for a notification (bounds how late a newly watched session is first read).
_POLL_SECONDS = 0.25

_HOLDER = """
SELECT l.holder FROM dsh_sessions s JOIN dsh_leases l ON l.key = s.lease
WHERE s.id = %s AND l.holder IS NOT NULL AND l.expires_at > now()
"""

Deliver = Callable[[SessionHeader, Sequence[Event]], None]


def lease_holder(store: Any, session_id: str) -> str | None:
    """Who holds the lease of ``session_id``'s tree now (``None``: free, or expired with its holder gone)."""
    row = store.link.run(lambda conn, _: conn.execute(_HOLDER, (session_id,)).fetchone())
    return None if row is None else str(row[0])


class StoreFollower:
    """Hands on the new events of followed sessions of a :class:`PostgresStore`, once each, in order.

    Args:
        store: The store to read from (its reads are thread-safe).
        recheck_seconds: How often every cursor is re-read when no notification came.
    """

    def __init__(self, store: Any, *, recheck_seconds: float = RECHECK_SECONDS) -> None:
        self.store = store
        self.recheck_seconds = recheck_seconds
        self.listener = Listener(store.url)
        self._cursors: dict[str, int] = {}
        self._due: set[str] = set()  # newly watched: read once from their cursor on the next turn
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.resyncs = 0  # reconnects that re-read every cursor (one per connection made)
        self.rechecks = 0  # periodic re-reads of every cursor

    def __repr__(self) -> str:
        return f"<StoreFollower {redact_url(self.store.url)}>"

    def watch(self, session_id: str, after: int) -> None:
        """Follow ``session_id`` from seq ``after`` (already watched: nothing changes)."""
        with self._lock:
            if session_id not in self._cursors:
                self._cursors[session_id] = after
                self._due.add(session_id)

    def cursor(self, session_id: str) -> int | None:
        """The last seq handed on for ``session_id`` (``None``: not watched)."""
        with self._lock:
            return self._cursors.get(session_id)

    def start(self, deliver: Deliver) -> None:
        """Start the follower thread; ``deliver(header, events)`` gets each new batch on it."""
        self._thread = threading.Thread(target=self._run, args=(deliver,), name="dsh-store-follower", daemon=True)
        self._thread.start()

    def _run(self, deliver: Deliver) -> None:
        recheck_at = time.monotonic() + self.recheck_seconds
        while not self._stop.is_set():
            wakeup = self.listener.poll(_POLL_SECONDS)
            with self._lock:
                due, self._due = self._due, set()
                watched = list(self._cursors)
            if wakeup.resync:
                self.resyncs += 1
            if wakeup.resync or time.monotonic() >= recheck_at:
                self.rechecks += not wakeup.resync
                recheck_at = time.monotonic() + self.recheck_seconds
                due.update(watched)
            due.update(s for s, tail in wakeup.tails.items() if s in watched and tail > (self.cursor(s) or 0))
            for session_id in sorted(due):
                self._read(session_id, deliver)

    def _read(self, session_id: str, deliver: Deliver) -> None:
        """Read ``session_id`` after its cursor and hand the batch on; a failure is retried on the next re-check."""
        cursor = self.cursor(session_id) or 0
        try:
            header, events = self.store.read_since(session_id, cursor)
        except SessionNotFoundError:
            return  # not written yet: its first commit notifies (or the next re-check finds it)
        except Exception as exc:  # the store is down or a row is unreadable: the next turn retries
            log.warning("store.follow_read_failed", session=session_id, error=type(exc).__name__)
            with self._lock:
                self._due.add(session_id)
            self._stop.wait(_POLL_SECONDS)
            return
        if not events:
            return
        deliver(header, events)
        with self._lock:
            self._cursors[session_id] = events[-1].seq

    def close(self) -> None:
        """Stop the thread (bounded) and close the listening connection."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self.listener.close()
