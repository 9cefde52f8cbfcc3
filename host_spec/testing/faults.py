"""A fault-injecting storage backend: hold or fail chosen writes of chosen sessions.

Tests of a host (and of plugins running in one) need to see what happens while a
flush is still running, or when the disk refuses a batch. :class:`FaultyStorage`
wraps any :class:`~host_spec.storage.StorageBackend`; every log it opens is a
:class:`FaultyLog` around the real one, reachable by session id, with controls
to hold writes until released or fail them. Until a fault is armed a
:class:`FaultyLog` only forwards, so a host runs on it unchanged. The reference
host accepts it through ``Host.open(..., wrap_storage=FaultyStorage)``.

A write is one ``append`` (the host follows each with a ``sync``); faults act
before anything reaches the real log, so a failed write stores nothing, as the
contract promises for a real medium failure.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence

from host_spec.events import Event, SessionHeader
from host_spec.storage import SessionLog, StorageBackend

__all__ = ["FaultyLog", "FaultyStorage", "disk_full"]

#: How long a held write waits for :meth:`FaultyLog.release` before it fails (default).
HOLD_SECONDS = 30.0


def disk_full() -> OSError:
    """The error injected when a test names none: ``ENOSPC``."""
    return OSError(28, "No space left on device")


class FaultyLog:
    """One session's log with test controls (implements :class:`host_spec.storage.SessionLog`).

    Attributes:
        inner: The real log every permitted call goes to.
        writes: Non-empty appends past a hold so far (1-based numbers for :meth:`fail_when`);
            a test may reset it to count from a point of its choosing.
        batches: The seqs of every batch that reached ``inner``.
        entered: Set by every write as it starts (before a hold), from any thread.
        closed: Whether :meth:`close` ran.
        hold_seconds: How long a held write waits for :meth:`release` before it
            fails with ``TimeoutError`` (a test that forgot to release fails loudly).
        threaded: Keep writes off the event loop's thread even when the real log
            allows inline writes; :meth:`hold` sets it, since a held write must
            never block the loop. Set it for callbacks that block too.
    """

    def __init__(self, inner: SessionLog) -> None:
        self.inner = inner
        self.writes = 0
        self.batches: list[list[int]] = []
        self.entered = threading.Event()
        self.closed = False
        self.hold_seconds = HOLD_SECONDS
        self._open = threading.Event()
        self._open.set()
        self._failures: list[BaseException] = []
        self._fail_when: Callable[[int], bool] | None = None
        self._before: Callable[[int], object] | None = None
        self.threaded = False

    def __repr__(self) -> str:
        return f"<FaultyLog {self.header.id} writes={self.writes} held={not self._open.is_set()}>"

    # ------------------------------------------------------------ controls

    def hold(self) -> None:
        """Block every following write (in the writer's thread) until :meth:`release`."""
        self.threaded = True
        self.entered.clear()
        self._open.clear()

    def release(self) -> None:
        """Let held and later writes go on."""
        self._open.set()

    def fail_next(self, error: BaseException | None = None) -> None:
        """Fail the next write with ``error`` (default :func:`disk_full`); calls queue up."""
        self._failures.append(error if error is not None else disk_full())

    def fail_when(self, predicate: Callable[[int], bool] | None) -> None:
        """Fail write number ``n`` (see :attr:`writes`) with :func:`disk_full` while ``predicate(n)``."""
        self._fail_when = predicate

    def before_write(self, callback: Callable[[int], object] | None) -> None:
        """Call ``callback(n)`` in the writing thread once write ``n`` is past a hold, before it is failed or done."""
        self._before = callback

    async def wait_entered(self, timeout: float = HOLD_SECONDS) -> None:
        """Return once a write has started (see :attr:`entered`); polls without blocking the loop."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self.entered.is_set():
            if loop.time() > deadline:
                raise TimeoutError(f"no write of session {self.header.id} started within {timeout}s")
            await asyncio.sleep(0.001)

    # ------------------------------------------------------------ SessionLog

    @property
    def inline(self) -> bool:
        """Inline like the real log unless :attr:`threaded`."""
        return not self.threaded and bool(getattr(self.inner, "inline", False))

    @property
    def header(self) -> SessionHeader:
        return self.inner.header

    @property
    def tail_seq(self) -> int:
        return self.inner.tail_seq

    @property
    def written(self) -> list[int]:
        """Every seq that reached ``inner``, in order."""
        return [seq for batch in self.batches for seq in batch]

    def append(self, events: Sequence[Event], *, expected_seq: int) -> None:
        if events:
            self.entered.set()
            if not self._open.wait(self.hold_seconds):
                raise TimeoutError(f"a held write of session {self.header.id} was never released")
            self.writes += 1
            number = self.writes
            if self._before is not None:
                self._before(number)
            if self._failures:
                raise self._failures.pop(0)
            if self._fail_when is not None and self._fail_when(number):
                raise disk_full()
        self.inner.append(events, expected_seq=expected_seq)
        if events:
            self.batches.append([event.seq for event in events])

    def sync(self) -> None:
        self.inner.sync()

    def close(self) -> None:
        self.closed = True
        self.inner.close()


class FaultyStorage:
    """Wraps a storage backend; every log it opens is a :class:`FaultyLog` (implements ``StorageBackend``).

    Args:
        inner: The real backend.
        on_open: Called with each :class:`FaultyLog` as it is opened (created or
            resumed), before its first write: the place to arm faults for sessions
            a test does not create itself.
    """

    def __init__(self, inner: StorageBackend, *, on_open: Callable[[FaultyLog], object] | None = None) -> None:
        self.inner = inner
        self.on_open = on_open
        self._logs: dict[str, FaultyLog] = {}

    def __repr__(self) -> str:
        return f"FaultyStorage({self.inner!r})"

    def log(self, session_id: str) -> FaultyLog:
        """The most recently opened log of ``session_id``.

        Raises:
            KeyError: no log of that id was opened through this wrapper.
        """
        try:
            return self._logs[session_id]
        except KeyError:
            raise KeyError(f"no log of session {session_id!r} was opened through this FaultyStorage") from None

    def _opened(self, inner: SessionLog) -> FaultyLog:
        log = self._logs[inner.header.id] = FaultyLog(inner)
        if self.on_open is not None:
            self.on_open(log)
        return log

    def exists(self, session_id: str) -> bool:
        return self.inner.exists(session_id)

    def list_ids(self) -> list[str]:
        return self.inner.list_ids()

    def read(self, session_id: str) -> tuple[SessionHeader, list[Event]]:
        return self.inner.read(session_id)

    def create(self, header: SessionHeader) -> FaultyLog:
        return self._opened(self.inner.create(header))

    def resume(self, session_id: str) -> tuple[FaultyLog, list[Event]]:
        inner, events = self.inner.resume(session_id)
        return self._opened(inner), events
