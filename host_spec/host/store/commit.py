"""Group commit: turns concurrent ``flush`` calls on one session into few write+fsyncs.

A flusher joins the *forming* batch; the forming batch is submitted once the
tasks already scheduled had their turn (so flushers woken together share it) and
no write is running. The flusher that formed a batch while no write ran (its
*leader*) submits it itself after one yield to the loop, so a lone flusher pays
one loop iteration, not a scheduled callback plus a wake-up; a cancelled leader
still submits (other flushers may have joined). A backend that declares
``inline = True`` (a local file, a near database) is written on the loop thread
while its writes stay fast: handing a 300 µs fsync to a thread and waking the
loop afterwards costs a third of the fsync again, and no flusher could join the
batch during the write anyway. While the moving average of recent write times
exceeds :data:`INLINE_MAX_SECONDS`, writes go to the worker thread
(:mod:`.iothread`) instead, so a slow or stalled disk does not stall the loop;
they come back inline once writes are fast again. An inline log that would have
to wait (its database connection busy in another thread, or lost) refuses with
:class:`BlockingIOError`, and that batch goes to the worker, which waits. The
worker does the bookkeeping (``durable_seq``, next batch) under a lock, so a
write's outcome is never lost even if the loop that started it has closed.

A write is one :class:`~host_spec.storage.SessionLog` ``append`` at the written
tail (its compare-and-set) followed by ``sync``; :mod:`.batch` holds that write,
the batch record and the waking of its waiters.

*Write-ahead*: when a lone writer appends an event it flushes right after
(``Session.append(..., write_ahead=True)``) to an idle session (no batch forming
or running, the last batch had one flusher), :meth:`GroupCommit.write_ahead`
appends the session's pending events to an inline log at once and lets the log
start writing them out (its optional ``write_ahead``), before the host runs the
event's observers and the caller reaches ``flush``. The disk then works while
Python does, and the batch's sync only waits for what is left. Nothing is
acknowledged earlier than before: the batch still ends in ``sync`` (an event
written ahead may survive a crash that comes before its flush, as any written,
unsynced byte may), and a failed write-ahead is forgotten (the log is back at
its synced tail) so the batch appends those events again. Under concurrency (a
batch with several flushers) write-ahead stays off: there the page would be
written twice.

Waiters are woken on their own loops. A failed write leaves its events pending
and raises to every waiter of that batch; the next batch retries them at the
same tail.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import structlog

from host_spec.errors import SessionNotLiveError
from host_spec.storage import SessionLog

from host_spec.host.store.batch import Batch, BatchWrite, loop_pass, running_loop, wake, write_batch
from host_spec.host.store.history import History
from host_spec.host.store.iothread import submit

__all__ = ["GroupCommit", "INLINE_MAX_SECONDS"]

#: Writes run inline while their moving average stays at or below this.
INLINE_MAX_SECONDS = 0.005
#: Weight of the newest write in the moving average of write times.
_EWMA_WEIGHT = 0.25

log = structlog.get_logger(__name__)


class GroupCommit:
    """The durability state of one session's event list.

    Args:
        name: Session id, for messages and logs.
        events: The session's history (appended to by the session, only read here). Its
            ``base`` and ``recent`` are read directly: the events not yet durable are
            always in ``recent`` (only durable ones are forgotten), and a length or a
            slice through ``History``'s methods would cost a call on every flush.
        backend: The session's log (``append`` + ``sync`` per batch); ``None`` makes
            every flush succeed at once (in-memory sessions).
        durable_seq: How many leading events are already stored.
        on_flushed: Called on the loop thread with the new ``durable_seq`` after each commit.
    """

    def __init__(
        self,
        name: str,
        events: History,
        backend: SessionLog | None,
        durable_seq: int,
        on_flushed: Callable[[int], None],
    ) -> None:
        self._name = name
        self._events = events
        self._backend = backend
        self._durable = durable_seq
        self._on_flushed = on_flushed
        self._lock = threading.Lock()
        self._inflight: Batch | None = None  # submitted, being written
        self._forming: Batch | None = None  # next batch, gathering flushers
        self._open = True
        self._released = backend is None
        self._write_seconds = 0.0  # moving average of write durations (inline-capable backends)
        self._written = durable_seq  # events appended to the log (synced or written ahead)
        self._solo = True  # the last batch had a single flusher
        self._ahead = bool(getattr(backend, "inline", False)) and hasattr(backend, "write_ahead")

    @property
    def durable_seq(self) -> int:
        return self._durable

    @property
    def backend(self) -> SessionLog | None:
        return self._backend

    def _not_live(self) -> SessionNotLiveError:
        return SessionNotLiveError(f"session {self._name} is not live; {len(self._events) - self._durable} unflushed")

    async def flush(self) -> None:
        """Return once every event present at the call is durable (see the module doc)."""
        events = self._events
        target = events.base + len(events.recent)
        if self._durable >= target:
            return
        if self._backend is None:
            if not self._open:
                raise self._not_live()
            self._durable = target
            self._on_flushed(target)
            return
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        lead = False
        with self._lock:
            batch = self._forming
            if batch is None:
                inflight = self._inflight
                if inflight is not None and inflight.end >= target:
                    batch = inflight
                elif not self._open:
                    raise self._not_live()
                elif self._durable >= target:  # pragma: no cover - a worker finished between our checks
                    return
                else:
                    batch = self._forming = Batch(loop)
                    lead = inflight is None  # else the running write's bookkeeping submits it
            if batch.loop is not loop:
                batch.foreign = True  # woken through its own loop (read once the batch is unreachable)
            batch.waiters.append(waiter)
        if lead:
            try:
                await loop_pass()  # the tasks already scheduled run first: they join this batch
            except BaseException:
                waiter.cancel()  # nobody will read its outcome
                self._submit()  # still written: others may have joined the batch
                raise
            self._submit()  # inline, this write wakes us before the await below
        await waiter  # raises the batch's write error; cancelling us leaves the write alone

    def write_ahead(self) -> None:
        """Append the pending events to an idle inline log now, once per batch (see the module doc).

        Called by the session right after it appended an event, on the loop thread.
        A failure is not raised here: the log is back at its synced tail and the
        batch appends the events again (and raises to its flushers if that fails).
        """
        if not self._ahead or not self._solo or self._write_seconds > INLINE_MAX_SECONDS:
            return
        backend = self._backend
        assert backend is not None  # write-ahead needs an inline log
        with self._lock:
            start = self._durable
            if self._written != start or self._forming is not None or self._inflight is not None or not self._open:
                return
            events = self._events
            base, recent = events.base, events.recent
            end = base + len(recent)
            try:
                ahead = backend.write_ahead(recent[start - base : end - base], expected_seq=start)  # type: ignore[attr-defined]
            except Exception as exc:  # the log is back at its synced tail: the batch appends again
                log.info("session.write_ahead_failed", session=self._name, error=repr(exc))
                return
            if ahead:
                self._written = end

    def _submit(self) -> None:
        """Start the forming batch (always on its loop's thread, or after that loop closed)."""
        with self._lock:
            batch, self._forming = self._forming, None
            if batch is None:  # close() already failed it
                return
            started = self._open
            if started:
                events = self._events
                base, recent = events.base, events.recent
                batch.end = end = base + len(recent)
                self._inflight = batch
                tail = self._written
                pending = recent[tail - base : end - base]
        if started:
            backend = self._backend
            assert backend is not None  # a backend-less flush never forms a batch
            job = (backend, tail, pending)
            if not getattr(backend, "inline", False):
                submit(write_batch, job, lambda error, _: self._finished(batch, error))
            elif self._write_seconds <= INLINE_MAX_SECONDS and running_loop() is batch.loop and not isinstance(
                    error := self._timed(job), BlockingIOError):  # that log would have waited: a worker does
                self._finished(batch, error)
            else:
                submit(self._timed, job, lambda _, error: self._finished(batch, error))
        else:
            self._release_if_idle()  # before waking anyone: a woken waiter may reopen the session
            self._deliver(batch, self._not_live())

    def _timed(self, job: BatchWrite) -> BaseException | None:
        """Store one batch, fold the write's duration into the moving average.

        Returns the write's error instead of raising it, so the inline and the
        threaded path hand it to :meth:`_finished` alike.
        """
        error: BaseException | None = None
        start = time.perf_counter()
        try:
            write_batch(job)
        except BaseException as exc:  # raised to the batch's waiters, never lost
            error = exc
        self._write_seconds += (time.perf_counter() - start - self._write_seconds) * _EWMA_WEIGHT
        return error

    def _finished(self, batch: Batch, error: BaseException | None) -> None:
        """Bookkeeping of a write (in the worker thread, or on the loop for an inline write)."""
        with self._lock:
            self._inflight = None
            self._solo = len(batch.waiters) <= 1
            if error is None:
                self._durable = self._written = batch.end
            else:
                self._written = self._durable  # a failed append or sync leaves the log at its synced tail
            following = self._forming
            closed = not self._open  # read under the lock: a later close() releases by itself
        if error is not None:
            log.warning("session.flush_failed", session=self._name, end=batch.end, error=repr(error))
        if following is None and closed:
            self._release_if_idle()  # before waking anyone: a woken waiter may reopen the session
        self._deliver(batch, error)
        if following is not None:
            self._submit_on(following.loop)  # the next batch (it retries a failed one's events too)

    def _submit_on(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the forming batch from ``loop``'s thread.

        A batch ends at ``len(events)`` when it starts. Taken from a worker thread,
        that boundary could fall between two appends the loop makes in one
        synchronous step (an inbox claim and the user message it claims), and a
        crash between the two batches would lose the message. On the loop, a batch
        always ends between synchronous steps.
        """
        try:
            loop.call_soon_threadsafe(self._submit)
        except RuntimeError:  # that loop closed: nothing appends there any more
            self._submit()

    def _deliver(self, batch: Batch, error: BaseException | None) -> None:
        """Wake each waiter on its own loop; notify the observer on the batch's loop."""
        end = batch.end
        current = running_loop()
        if not batch.foreign and batch.loop is current:  # an inline write, every waiter on this loop
            if error is None:
                self._on_flushed(end)
            wake(batch.waiters, error)
            return
        by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {batch.loop: []}
        for waiter in batch.waiters:
            by_loop.setdefault(waiter.get_loop(), []).append(waiter)
        for loop, waiters in by_loop.items():
            notify = error is None and loop is batch.loop
            if loop is current:  # on its loop between steps: wake at once
                self._notify_then_wake(end if notify else None, waiters, error)
                continue
            try:
                loop.call_soon_threadsafe(self._notify_then_wake, end if notify else None, waiters, error)
            except RuntimeError:  # that loop closed: nobody there waits any more
                pass

    def _notify_then_wake(
        self, end: int | None, waiters: list[asyncio.Future[None]], error: BaseException | None
    ) -> None:
        if end is not None:
            self._on_flushed(end)
        wake(waiters, error)

    def close(self) -> None:
        """Refuse new batches; release the backend once no write is running. Idempotent."""
        with self._lock:
            self._open = False
            forming = self._forming if self._inflight is None else None
            if forming is not None:
                self._forming = None  # not started yet: it never will be
        self._release_if_idle()
        if forming is not None:
            self._deliver(forming, self._not_live())

    def _release_if_idle(self) -> None:
        with self._lock:
            release = not self._open and self._inflight is None and self._forming is None and not self._released
            self._released = self._released or release
        if release:
            self._backend.close()  # type: ignore[union-attr]  # set until released, and released once
