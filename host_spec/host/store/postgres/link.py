"""One connection to the database that survives the server going away and coming back.

A networked store must tell a lost connection from a refusal: the first is a
medium failure (the storage contract's ``OSError``), the second a typed answer.
:class:`Link` runs each operation on its connection, and when the connection
breaks it drops it, reconnects with a short backoff and runs the operation
again, for up to ``retry_seconds``; after that it raises
:class:`~host_spec.errors.StoreUnavailableError` (an ``OSError``). An operation
is told which attempt it is, so a write whose commit acknowledgement was lost
can recognise its own rows on the next attempt instead of failing a
compare-and-set it actually won.

An operation run with ``wait=False`` (a write on an event loop's thread, which
must not stall) never waits: when another thread's operation holds the
connection, or there is no live connection, or it breaks, it raises
:class:`BlockingIOError` at once and leaves the reconnection to a caller that may wait.

The URL may carry a password; :func:`redact` keeps it out of every message.
"""

from __future__ import annotations

import errno
import re
import threading
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict
import structlog

from host_spec.errors import StoreUnavailableError

__all__ = ["Link", "TCP_BOUNDS", "redact", "tcp_bounds"]

log = structlog.get_logger(__name__)

T = TypeVar("T")

#: A TCP link to a server that went silent (a cut without a reset) fails within about
#: ten seconds instead of the kernel's retransmission time (minutes): a write run on an
#: event loop's thread must not hold it that long. Unix sockets ignore these.
TCP_BOUNDS: Final = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3,
                     "tcp_user_timeout": 10_000}


def tcp_bounds(url: str) -> dict[str, Any]:
    """:data:`TCP_BOUNDS` minus what ``url`` sets itself (the user's settings win)."""
    given = conninfo_to_dict(url)
    return {key: value for key, value in TCP_BOUNDS.items() if key not in given}


#: Longest pause between two reconnection attempts.
_MAX_BACKOFF = 0.5


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages and logs)."""
    url = re.sub(r"(://[^:/@?]*:)[^@/?]*@", r"\1***@", url)
    return re.sub(r"(password=)[^&\s]*", r"\1***", url)


class Link:
    """A lazily opened, self-healing autocommit connection (thread-safe: one operation at a time).

    Args:
        url: A libpq URL or conninfo string.
        retry_seconds: How long an operation keeps retrying a lost connection.
        setup: Run on every new connection before its first operation (schema creation).
    """

    def __init__(self, url: str, *, retry_seconds: float, setup: Callable[[psycopg.Connection[Any]], None] | None = None) -> None:
        self.url = url
        self.retry_seconds = retry_seconds
        self._setup = setup
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.RLock()
        self.reconnects = 0

    def __repr__(self) -> str:
        return f"<Link {redact(self.url)}>"

    def run(self, operation: Callable[[psycopg.Connection[Any], int], T], *, wait: bool = True) -> T:
        """``operation(connection, attempt)`` with reconnection; attempt counts from 0.

        Args:
            operation: Run with the connection and its attempt number.
            wait: ``False``: one attempt on the open connection, never waiting for it (see the module docstring).

        Raises:
            StoreUnavailableError: the database stayed unreachable for ``retry_seconds``.
            BlockingIOError: only with ``wait=False``: the operation would have had to wait.
        """
        if not wait:
            return self._run_now(operation)
        deadline = time.monotonic() + self.retry_seconds
        delay, attempt = 0.02, 0
        while True:
            with self._lock:
                try:
                    return operation(self._connection(), attempt)
                except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                    self._drop()
                    if time.monotonic() + delay > deadline:
                        raise StoreUnavailableError(
                            f"the store at {redact(self.url)} is unreachable: {type(exc).__name__}: "
                            f"{redact(str(exc).strip())}",
                            url=redact(self.url),
                        ) from None
                    log.warning("store.connection_lost", url=redact(self.url), attempt=attempt, error=type(exc).__name__)
            time.sleep(delay)
            delay, attempt = min(delay * 2, _MAX_BACKOFF), attempt + 1

    def _run_now(self, operation: Callable[[psycopg.Connection[Any], int], T]) -> T:
        if not self._lock.acquire(blocking=False):
            raise BlockingIOError(errno.EAGAIN, "the store connection is busy")
        try:
            if self._conn is None or self._conn.closed:
                raise BlockingIOError(errno.EAGAIN, "the store connection is not open")
            try:
                return operation(self._conn, 0)
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                self._drop()
                raise BlockingIOError(errno.EAGAIN, f"the store connection broke: {type(exc).__name__}") from None
        finally:
            self._lock.release()

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=5, **tcp_bounds(self.url))
            try:
                if self._setup is not None:
                    self._setup(conn)
            except BaseException:
                conn.close()
                raise
            if self._conn is _GONE:
                self.reconnects += 1
            self._conn = conn
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None and self._conn is not _GONE:
            try:
                self._conn.close()
            except Exception:  # a broken connection may fail to close; it is gone either way
                pass
        self._conn = _GONE

    def close(self) -> None:
        """Close the connection; a later operation opens a new one."""
        with self._lock:
            if self._conn is not None and self._conn is not _GONE:
                self._conn.close()
            self._conn = None


class _Gone:
    """Stands for a connection that broke: the next one counts as a reconnection."""

    closed = True


_GONE: Any = _Gone()
