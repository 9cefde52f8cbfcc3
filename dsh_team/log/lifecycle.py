"""Service lifetime: an admission cutoff and bounded settlement of in-flight work.

Disposal must neither hang (a stuck flush, a child that never drains) nor drop
work silently. So the service closes *admission* first (new mutating operations
fail with ``TEAM_DISPOSED``), then waits for the operations it already admitted,
each group bounded by ``disposal_timeout_ms`` (``TEAM_DISPOSAL_TIMEOUT``), and
reports every failure except the cancellation it caused itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import structlog

from host_spec.errors import DshError
from host_spec.records import AbortSignal

from dsh_team.errors import TeamCode, TeamError

if TYPE_CHECKING:
    from host_spec.protocols import Agent

    from dsh_team.core.task_view import TaskView

__all__ = ["Lifecycle", "Operation", "disposed_error", "Complete", "Notify"]

#: What a room's recovery (a check run, a merge a crash cut) is handed by the service at a Lead's start:
#: ``complete(lead agent, task id, revision)``, the ordinary ungated completion, and
#: ``notify(lead agent, member name, text)``, Team mail to the member concerned.
Complete = Callable[["Agent", str, int], Awaitable["TaskView"]]
Notify = Callable[["Agent", str, str], Awaitable[Any]]

log = structlog.get_logger(__name__)

T = TypeVar("T")


def disposed_error(message: str = "Agent Teams service disposed") -> TeamError:
    """The ``TEAM_DISPOSED`` error every refused or cancelled operation carries."""
    return TeamError(message, TeamCode.DISPOSED)


class Operation:
    """One admitted block of :meth:`Lifecycle.operation`.

    A plain synchronous context manager rather than a generator-based or an
    asynchronous one: it runs on every Team mutation, so entering and leaving it
    costs two set updates and no coroutine. It may enclose ``await`` (it is left
    when the awaiting coroutine finishes, fails or is cancelled). Only a
    settlement that starts while the block runs gives it a marker (:meth:`watch`):
    a future whose *result* is the block's exception (or ``None``), never its
    exception, so an unread failure is not reported as never retrieved.
    """

    __slots__ = ("_blocks", "_lifecycle", "_marker")

    def __init__(self, lifecycle: Lifecycle, blocks: set[Operation]) -> None:
        self._lifecycle = lifecycle
        self._blocks = blocks
        self._marker: asyncio.Future[Any] | None = None

    def __enter__(self) -> None:
        self._lifecycle.admit()
        self._blocks.add(self)

    def __exit__(self, kind: object, error: BaseException | None, traceback: object) -> None:
        self._blocks.discard(self)
        marker = self._marker
        if marker is not None:
            marker.set_result(error)

    def watch(self) -> asyncio.Future[Any]:
        """The marker a settlement waits on (the block is still running)."""
        if self._marker is None:
            self._marker = asyncio.get_running_loop().create_future()
        return self._marker


class Lifecycle:
    """Admission cutoff plus a registry of admitted operations.

    Args:
        timeout_ms: Bound of each settlement (``TeamConfig.disposal_timeout_ms``).

    Attributes:
        signal: Aborted (with a ``TEAM_DISPOSED`` error) when admission closes, so
            long operations can combine it with their caller's signal.
    """

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self.signal = AbortSignal()
        self._operations: set[asyncio.Future[Any]] = set()
        self._blocks: set[Operation] = set()  # running operation() blocks

    @property
    def disposed(self) -> bool:
        return self.signal.aborted

    def admit(self) -> None:
        """Refuse new work once disposal started.

        Raises:
            TeamError: ``TEAM_DISPOSED``.
        """
        if self.signal.aborted:
            raise disposed_error()

    def track(self, work: Awaitable[T]) -> asyncio.Future[T]:
        """Admit ``work`` and keep it until it settles (disposal waits for it).

        Raises:
            TeamError: ``TEAM_DISPOSED`` (the awaitable is closed, never started).
        """
        if self.signal.aborted:
            close = getattr(work, "close", None)
            if close is not None:
                close()
            raise disposed_error()
        future = asyncio.ensure_future(work)
        self._operations.add(future)
        future.add_done_callback(self._operations.discard)
        return future

    def operation(self) -> Operation:
        """Admit the enclosing ``with`` block and track it until the block exits.

        Cheaper than :meth:`track` on hot paths (no extra task): the block runs in
        the caller's task, and disposal waits for a settlement marker instead.
        A block is entered when its ``with`` starts (for a journal transaction's
        ``guard``: when the transaction starts running).

        Raises:
            TeamError: ``TEAM_DISPOSED`` when the block is entered after disposal started.
        """
        return Operation(self, self._blocks)

    @property
    def in_flight(self) -> int:
        """Admitted operations that have not settled yet."""
        return len(self._operations) + len(self._blocks)

    def close(self) -> None:
        """Close admission (idempotent); in-flight operations keep running."""
        self.signal.abort(disposed_error())

    def is_cancellation(self, error: BaseException) -> bool:
        """Whether ``error`` is the service's own cancellation (not a real failure).

        True for the abort reason itself or any ``TEAM_DISPOSED`` error anywhere in
        the explicit ``__cause__`` chain (``raise ... from reason``), and for
        ``CancelledError``. The implicit ``__context__`` is not followed: an error
        raised while *handling* a cancellation (a disposal timeout, a failed cleanup)
        is a real failure and must be reported. The walk is cycle-safe.
        """
        seen: set[int] = set()
        pending: list[BaseException | None] = [error]
        while pending:
            current = pending.pop()
            if current is None or id(current) in seen:
                continue
            seen.add(id(current))
            if current is self.signal.reason or isinstance(current, asyncio.CancelledError):
                return True
            if isinstance(current, DshError) and current.code == TeamCode.DISPOSED:
                return True
            pending.append(current.__cause__)
        return False

    async def with_timeout(self, work: Awaitable[T], what: str) -> T:
        """Await ``work`` for at most ``timeout_ms``.

        Raises:
            TeamError: ``TEAM_DISPOSAL_TIMEOUT`` (``work`` is cancelled).
        """
        try:
            return await asyncio.wait_for(work, self.timeout_ms / 1000)
        except asyncio.TimeoutError:
            raise TeamError(
                f"Agent Teams {what} exceeded {self.timeout_ms}ms", TeamCode.DISPOSAL_TIMEOUT
            ) from None

    async def settle(self, operations: Iterable[asyncio.Future[Any]] | None = None) -> list[BaseException]:
        """Wait (bounded) for ``operations`` (default: every admitted one) to settle.

        Returns:
            The failures worth reporting: real errors of the operations, and a
            ``TEAM_DISPOSAL_TIMEOUT`` error when the bound passed first. Operations
            still running after the bound are left running (never cancelled here).
        """
        if operations is None:
            pending = [*self._operations, *(block.watch() for block in list(self._blocks))]
        else:
            pending = list(operations)
        if not pending:
            return []
        done, still = await asyncio.wait(pending, timeout=self.timeout_ms / 1000)
        failures: list[BaseException] = []
        for future in pending:
            if future in done and not future.cancelled():
                error = future.exception()
                if error is None and isinstance(future.result(), BaseException):
                    error = future.result()  # an operation() marker carries its failure as result
                if error is not None and not self.is_cancellation(error):
                    failures.append(error)
        if still:
            log.warning("team.disposal_timeout", pending=len(still), timeout_ms=self.timeout_ms)
            failures.append(
                TeamError(
                    f"Agent Teams disposal exceeded {self.timeout_ms}ms ({len(still)} operations pending)",
                    TeamCode.DISPOSAL_TIMEOUT,
                )
            )
        return failures
