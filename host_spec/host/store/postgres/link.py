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

Only a lost or refused connection is an outage. A connection the server
*answers* with a refusal that no retry can change fails at once with its own
code (:func:`refusal`): ``STORE_AUTH`` (credentials or role refused),
``STORE_NOT_FOUND`` (no such database), ``STORE_INVALID`` (a URL libpq cannot
use; :func:`check_url` catches most before any connection is tried). An outage
is told once per change of state, not per attempt: the first failure logs
``store.connection_lost`` with the server's own reason (``too many clients
already``, ``the database system is shutting down``), the first success after
it ``store.connection_restored`` (:class:`Health`, shared by every connection
of a process to one URL).

The URL may carry a password; every message and log line shows it through
:func:`host_spec.host.redaction.redact_url`.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict
import structlog

from host_spec.errors import ConfigError, StoreUnavailableError

from host_spec.host.redaction import redact_url

__all__ = ["Health", "Link", "TCP_BOUNDS", "check_url", "connect", "health", "reason", "refusal", "tcp_bounds"]

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


def check_url(url: str) -> None:
    """Refuse a URL libpq could never connect with, before any connection is tried.

    Raises:
        ConfigError: ``STORE_INVALID``: the URL does not parse, or a port is not a number.
    """
    try:
        given = conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise ConfigError(f"the store URL {redact_url(url)!r} is malformed: {reason(exc)}", code="STORE_INVALID") from None
    port = str(given.get("port") or "")
    if any(part and not part.isdigit() for part in port.split(",")):
        raise ConfigError(f"the store URL {redact_url(url)!r} has a port that is not a number: {port!r}",
                          code="STORE_INVALID")


def reason(exc: BaseException) -> str:
    """The driver's account of a failure on one line, the server's own words kept, passwords redacted."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    for prefix in ("connection failed: ", "connection is bad: "):
        text = text.removeprefix(prefix)
    return redact_url(text)


#: Words of the server (or libpq) that mean retrying cannot help: each code with the phrases
#: that mark it, every part of a phrase present (lower case); the first match wins.
_REFUSALS: Final = (
    ("STORE_NOT_FOUND", (('database "', "does not exist"),)),
    ("STORE_AUTH", (("authentication failed",), ("no password supplied",), ("pg_hba.conf",),
                    ("not permitted to log in",), ("permission denied for database",),
                    ('role "', "does not exist"))),
    ("STORE_INVALID", (("invalid ", "connection option"), ("invalid ", "uri"), ("invalid ", "value for parameter"))),
)


def refusal(exc: BaseException) -> str | None:
    """The code of a connection failure no retry can change (see the module docstring), or ``None``: an outage.

    A server that is full (``too many clients already``), starting or shutting
    down is an outage. A server or libpq speaking another language than English
    is not recognised: its refusals are then retried as outages and end as
    ``STORE_UNAVAILABLE``, with their reason quoted.
    """
    if isinstance(exc, psycopg.ProgrammingError):
        return "STORE_INVALID"  # libpq refused the connection string itself
    text = str(exc).lower()
    for code, phrases in _REFUSALS:
        if any(all(part in text for part in phrase) for phrase in phrases):
            return code
    return None


def connect(url: str) -> psycopg.Connection[Any]:
    """A new autocommit connection to ``url`` (with :data:`TCP_BOUNDS`).

    Raises:
        ConfigError: the server refused for good (``STORE_AUTH``, ``STORE_NOT_FOUND``, ``STORE_INVALID``).
        psycopg.OperationalError: the server could not be reached (an outage: retry).
    """
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=5, **tcp_bounds(url))
    except psycopg.Error as exc:
        code = refusal(exc)
        if code is None:
            raise
        raise ConfigError(f"the store at {redact_url(url)} refused the connection: {reason(exc)}", code=code) from None


class Health:
    """Whether one URL's server answers, as this process last saw it: one log line per change, not per attempt."""

    def __init__(self, url: str) -> None:
        self.url = redact_url(url)
        self.down_since: float | None = None
        self._lock = threading.Lock()

    def lost(self, why: str) -> None:
        """A connection failed: the first failure after a success says so (with the server's reason)."""
        with self._lock:
            if self.down_since is not None:
                return
            self.down_since = time.monotonic()
        log.warning("store.connection_lost", url=self.url, reason=why)

    def restored(self) -> None:
        """A connection worked: the first success after a failure says so."""
        if self.down_since is None:  # the common case: no lock taken
            return
        with self._lock:
            if self.down_since is None:
                return
            seconds, self.down_since = time.monotonic() - self.down_since, None
        log.warning("store.connection_restored", url=self.url, after_seconds=round(seconds, 1))


_health: dict[str, Health] = {}
_health_lock = threading.Lock()


def health(url: str) -> Health:
    """The process's one :class:`Health` of ``url`` (every connection to it shares it)."""
    with _health_lock:
        found = _health.get(url)
        if found is None:
            found = _health[url] = Health(url)
        return found


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
        self._health = health(url)
        self.reconnects = 0

    def __repr__(self) -> str:
        return f"<Link {redact_url(self.url)}>"

    def run(self, operation: Callable[[psycopg.Connection[Any], int], T], *, wait: bool = True) -> T:
        """``operation(connection, attempt)`` with reconnection; attempt counts from 0.

        Args:
            operation: Run with the connection and its attempt number.
            wait: ``False``: one attempt on the open connection, never waiting for it (see the module docstring).

        Raises:
            StoreUnavailableError: the database stayed unreachable for ``retry_seconds``.
            ConfigError: the server refused the connection for good (see :func:`connect`); never retried.
            BlockingIOError: only with ``wait=False``: the operation would have had to wait.
        """
        if not wait:
            return self._run_now(operation)
        deadline = time.monotonic() + self.retry_seconds
        delay, attempt = 0.02, 0
        while True:
            with self._lock:
                # A connection left broken by a restart the process already saw fails once on its
                # next use: that alone is no new outage, unless reconnecting fails too.
                reused = self._conn is not None and not self._conn.closed and attempt == 0
                try:
                    result = operation(self._connection(), attempt)
                except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                    self._drop()
                    why = reason(exc)
                    if not reused:
                        self._health.lost(why)
                    if time.monotonic() + delay > deadline:
                        raise StoreUnavailableError(
                            f"the store at {redact_url(self.url)} stayed unreachable for {self.retry_seconds:g}s: {why}",
                            url=redact_url(self.url),
                        ) from None
                else:
                    self._health.restored()
                    return result
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
            conn = connect(self.url)
            try:
                if self._setup is not None:
                    self._setup(conn)
            except psycopg.errors.InsufficientPrivilege as exc:  # the role may not create the store's tables
                conn.close()
                raise ConfigError(f"the store at {redact_url(self.url)} refused to set up its tables: {reason(exc)}",
                                  code="STORE_AUTH") from None
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
