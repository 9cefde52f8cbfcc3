"""A lean pool of threads for blocking file I/O (write + fsync).

``asyncio.to_thread`` goes through ``ThreadPoolExecutor``, ``wrap_future`` and a
context copy; on a small VM that round trip costs about as much as the fsync it
wraps. Here a job is one queue put and one blocking ``fn(arg)`` in a parked
worker, followed by ``done(error, result)`` *in the worker*: the caller decides
how to get back to its event loop (see :mod:`.commit`). Several sessions' fsyncs
still run in parallel.

Workers are daemon threads that exit after idling: the session log is crash-safe
(a write cut short by interpreter exit is a torn tail, repaired on resume), so
exit never waits on them.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import structlog

__all__ = ["Pool", "submit"]

log = structlog.get_logger(__name__)

T = TypeVar("T")
A = TypeVar("A")

_Job = tuple[Callable[[Any], Any], Any, Callable[[BaseException | None, Any], None]]


class Pool:
    """Up to ``max_workers`` daemon threads sharing one job queue.

    Args:
        max_workers: Upper bound on threads (parallel fsyncs across sessions).
        idle_seconds: A worker with nothing to do for this long exits.
    """

    def __init__(self, *, max_workers: int = 16, idle_seconds: float = 5.0) -> None:
        self.max_workers = max_workers
        self.idle_seconds = idle_seconds
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self.workers = 0

    def submit(self, fn: Callable[[A], T], arg: A, done: Callable[[BaseException | None, T | None], None]) -> None:
        """Run ``fn(arg)`` in a worker, then ``done(error, result)`` in that same worker.

        ``done`` always runs: a file write cannot be interrupted, so its
        bookkeeping must not depend on any waiting task or loop.
        """
        with self._lock:
            self._jobs.put((fn, arg, done))
            if self._idle < self._jobs.qsize() and self.workers < self.max_workers:
                self.workers += 1
                threading.Thread(target=self._work, name="dsh-io", daemon=True).start()

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            try:
                fn, arg, done = self._jobs.get(timeout=self.idle_seconds)
            except queue.Empty:
                with self._lock:
                    self._idle -= 1
                    if self._jobs.empty():  # a put made under the lock after our timeout keeps us
                        self.workers -= 1
                        return
                continue  # pragma: no cover - a put raced our timeout
            with self._lock:
                self._idle -= 1
            error: BaseException | None = None
            result = None
            try:
                result = fn(arg)
            except BaseException as exc:  # handed to done(), never lost in the thread
                error = exc
            try:
                done(error, result)
            except BaseException:
                log.exception("iothread.done_failed")
            del fn, arg, done, error, result


_pool = Pool()
submit = _pool.submit
