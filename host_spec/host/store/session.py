"""The live session: a synchronous append log with a group-committed durability barrier.

``append`` never waits for I/O: it encodes the payload once, asks the observer
(the host's ``dsh_pre_append`` dispatch) for a veto, makes the event visible and
tells the observer it committed. ``flush`` is the only place that touches the
disk, and it is a *group commit*: while one write+fsync runs in a worker thread,
every other flusher joins the next batch, so K concurrent flushers cost far
fewer than K fsyncs. A failed write leaves its events pending (``durable_seq``
does not move), raises to every waiter of that batch, and a later flush retries.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import structlog

from host_spec.errors import InvalidEventError, ReentrantAppendError, SessionNotLiveError
from host_spec.events import Cause, Event, SessionHeader, encode_data
from host_spec.storage import SessionLog

from host_spec.host.store.commit import GroupCommit
from host_spec.host.store.context import current_cause
from host_spec.host.store.history import KEPT_EVENTS, History, readable_log
from host_spec.host.store.sequence_views import EventsView

__all__ = ["NullObserver", "Session", "SessionObserver", "time_ms"]

log = structlog.get_logger(__name__)


def time_ms() -> int:
    """Wall-clock epoch milliseconds: the default ``Session`` clock."""
    return time.time_ns() // 1_000_000


class SessionObserver(Protocol):
    """What the host learns about a session's appends and flushes (``app.Host`` implements it)."""

    def pre_append(self, session: Session, event: Event) -> None:
        """Veto window: raise (``InvariantError``) and the append leaves no trace."""

    def committed(self, session: Session, event: Event) -> None:
        """The event is visible; the host contains observer failures itself."""

    def flushed(self, session: Session, durable_seq: int) -> None:
        """One group commit finished; every event up to ``durable_seq`` is durable."""


class NullObserver:
    """An observer that does nothing: for tests, benchmarks and host-less tools."""

    def pre_append(self, session: Session, event: Event) -> None:
        return None

    def committed(self, session: Session, event: Event) -> None:
        return None

    def flushed(self, session: Session, durable_seq: int) -> None:
        return None


class Session:
    """A live session (implements :class:`host_spec.protocols.Session`).

    Args:
        header: The immutable log header; ``header.id`` is the session id.
        events: Events already in the log (a seed or a loaded log); seqs must be 1..n.
        backend: The session's durable log; ``None`` keeps the session in memory (flush only reports).
        observer: Veto and notification seam; defaults to :class:`NullObserver`.
        clock: Epoch-milliseconds source for ``Event.time``.
        durable_seq: How many of ``events`` are already stored (``len(events)`` on resume).
        checked: The events come from the store that resumes the session: their
            seqs are already proved ``1..n`` (a backend's ``resume`` must; a
            disposed session's list is) and a ``list`` is handed over (the session
            appends to it; nobody else may). Only the count is confirmed and
            nothing is copied, so waking a long-lived session costs O(1) here.
        kept_events: Durable events kept decoded in memory when the backend can
            read them back (a :class:`~.history.LogFile` or :class:`~.history.SeqLog`);
            older ones are read back from it (:mod:`.history`). Other backends keep every event.
    """

    def __init__(
        self,
        header: SessionHeader,
        *,
        events: Sequence[Event] = (),
        backend: SessionLog | None = None,
        observer: SessionObserver | None = None,
        clock: Callable[[], int] = time_ms,
        durable_seq: int = 0,
        checked: bool = False,
        kept_events: int = KEPT_EVENTS,
    ) -> None:
        items = events if checked and type(events) is list else list(events)
        for index, event in enumerate(items[-1:] if checked else items, len(items) if checked else 1):
            if event.seq != index:
                raise InvalidEventError(
                    f"session {header.id}: event #{index} has seq {event.seq}, expected {index}"
                )
        if not 0 <= durable_seq <= len(items):
            raise ValueError(f"durable_seq {durable_seq} outside 0..{len(items)}")
        self._header = header
        #: The session id: a plain attribute, read on every append and Team call (a property costs a call).
        self.id: str = header.id
        #: The newest event's seq (``len(events)``): a plain attribute like :attr:`id`, read
        #: several times per Team call. Only :meth:`append` changes it; nobody else may.
        self.last_seq: int = len(items)
        self._events = history = History(items)
        self._view = EventsView(history)
        self._own = EventsView(history, header.seed_length)
        self._log_file = readable_log(backend)
        self._kept = kept_events
        self._observer: SessionObserver = observer if observer is not None else NullObserver()
        self._clock = clock
        self._live = True
        self._publishing = False
        self._commit = GroupCommit(header.id, history, backend, durable_seq, self._notify_flushed)

    def __repr__(self) -> str:
        return f"<Session {self._header.id} seq={len(self._events)} durable={self._commit.durable_seq}>"

    @property
    def header(self) -> SessionHeader:
        return self._header

    @property
    def events(self) -> Sequence[Event]:
        """Every event in order (``events[i].seq == i + 1``); a live read-only view."""
        return self._view

    @property
    def held_events(self) -> int:
        """How many events are held decoded in memory (the rest are read back from the log)."""
        return len(self._events.recent)

    @property
    def durable_seq(self) -> int:
        return self._commit.durable_seq

    @property
    def live(self) -> bool:
        return self._live

    @property
    def backend(self) -> SessionLog | None:
        return self._commit.backend

    def own_events(self) -> Sequence[Event]:
        """Events after the inherited prefix (``events[header.seed_length:]``)."""
        return self._own

    def append(self, type: str, data: Any, *, cause: Cause | None = None, write_ahead: bool = False) -> Event:
        """Commit one event synchronously and return it.

        ``write_ahead``: the caller flushes right after this step, so an idle log
        starts writing the event now (:meth:`.commit.GroupCommit.write_ahead`).

        Raises:
            SessionNotLiveError: the session was closed.
            ReentrantAppendError: called from this session's own observer callback.
            InvalidEventError: ``type`` is empty or ``data`` is not lossless JSON.
            InvariantError: (or anything else) raised by ``observer.pre_append``; nothing is written.
        """
        if self._publishing:
            raise ReentrantAppendError(
                f"session {self._header.id}: cannot re-enter append while another append is being "
                "published; schedule the append instead (host.call_soon)"
            )
        if not self._live:
            raise SessionNotLiveError(f"session {self._header.id} is not live")
        if not type or not isinstance(type, str):
            raise InvalidEventError(f"event type must be a non-empty string, got {type!r}")
        raw = encode_data(data)
        if cause is None:
            cause = current_cause.get()
        seq = self.last_seq + 1
        event = Event(seq, self._clock(), type, raw, cause)
        self._publishing = True
        try:
            self._observer.pre_append(self, event)
            self._events.recent.append(event)  # History.append, without its call
            self.last_seq = seq  # visible with the event: the observers below read it
            try:
                if write_ahead:
                    self._commit.write_ahead()  # the disk starts while the observers run; raises no Exception
            finally:
                try:
                    self._observer.committed(self, event)
                except Exception:
                    # The event is committed; the host normally contains observer errors.
                    log.exception("session.observer_failed", session=self._header.id, seq=event.seq)
        finally:
            self._publishing = False
        return event

    async def flush(self) -> None:
        """Return once every event appended before the call is durable.

        Callers that arrive while a write runs join the next batch, so concurrent
        flushers share one write + fsync (:class:`~.commit.GroupCommit`).
        Cancelling a caller never cancels the write it waits for.

        Raises:
            SessionNotLiveError: events are pending but the session was closed.
            Exception: the backend write of the batch holding this caller's events failed.
        """
        await self._commit.flush()

    def _notify_flushed(self, durable_seq: int) -> None:
        try:
            self._observer.flushed(self, durable_seq)
        except Exception:
            log.exception("session.observer_failed", session=self._header.id, durable_seq=durable_seq)
        if self._log_file is not None:  # after the observers: they read the newest events
            self._events.forget(durable_seq, self._log_file, self._kept)

    def closed_events(self) -> list[Event]:
        """The event list of a closed session, for the store to snapshot and resume without a copy.

        Raises:
            SessionNotLiveError: never for a closed session; a live one raises (its list still grows).
        """
        if self._live:
            raise SessionNotLiveError(f"session {self._header.id} is still live", session=self._header.id)
        history = self._events
        return history.recent if not history.base else list(history)

    def close(self) -> None:
        """Stop accepting appends and release the backend (its lock) once no write runs. Idempotent.

        The owner flushes first; events still pending at close are not written.
        """
        if not self._live:
            return
        self._live = False
        pending = len(self._events) - self._commit.durable_seq
        if pending:
            log.warning("session.closed_with_pending", session=self._header.id, pending=pending)
        self._commit.close()
