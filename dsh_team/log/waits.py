"""Change waiters per Team: ``wait_for_change`` and the notifications that end it.

A wait is edge-triggered: it ends on the *next* notification for its Team
(a durable Team change; a member going idle is none, but leaving the Team with
nothing to do records a quiescence change), on its timeout, on its caller's abort,
or when the service closes. A change that happened before the
wait registered is not replayed, which is why every result carries ``position``
(the Team's last durable change, a log seq) and a wait may pass ``since``: if the
Team changed after that position, the wait returns at once. Reading state and
then waiting with ``since=<position read>`` therefore never misses a change.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from collections.abc import Iterable
from typing import Any, Final, Literal

import msgspec

from host_spec.records import AbortSignal

from dsh_team.config import MAX_SAFE_INTEGER
from dsh_team.core.delta import TeamDelta
from dsh_team.core.records import TeamStalled
from dsh_team.errors import TeamCode, TeamError, render_reason

__all__ = [
    "WAIT_MIN_MS",
    "WAIT_MAX_MS",
    "WaitResult",
    "Activity",
    "StatusMarks",
    "check_timeout",
    "check_since",
    "abort_error",
]

WAIT_MIN_MS: Final = 10_000
WAIT_MAX_MS: Final = 3_600_000

#: ``(delay_seconds, callback) -> cancel``; the default is ``loop.call_later``.
Timer = Callable[[float, Callable[[], None]], Callable[[], None]]


class WaitResult(msgspec.Struct, frozen=True, kw_only=True):
    """How a wait ended. Optional fields default to "absent", so the result grows without breaking readers.

    Attributes:
        timed_out: True only when the timeout passed with no change.
        position: The Team's last durable change (a Lead log seq) when the wait ended.
        delta: What changed after ``since`` (or after the position the wait started
            from) when the wait ended because of a change; ``None`` on a timeout.
        reason: ``quiescent`` when that change is the Team's quiescence record:
            nobody runs and nothing will change until a member acts.
        stalled: With ``reason``: the work the quiet Team leaves undone.
    """

    timed_out: bool
    position: int
    delta: TeamDelta | None = None
    reason: Literal["quiescent"] | None = None
    stalled: TeamStalled | None = None


def check_timeout(timeout_ms: Any) -> int:
    """``timeout_ms`` if it is an integer in 10 000 .. 3 600 000.

    Raises:
        TeamError: ``TEAM_INVALID_TIMEOUT``.
    """
    if type(timeout_ms) is not int or not WAIT_MIN_MS <= timeout_ms <= WAIT_MAX_MS:
        raise TeamError(
            f"timeout_ms must be an integer from {WAIT_MIN_MS} through {WAIT_MAX_MS}", TeamCode.INVALID_TIMEOUT
        )
    return timeout_ms


def check_since(since: Any) -> int | None:
    """``since`` if it is ``None`` or a non-negative safe integer.

    Raises:
        TeamError: ``TEAM_INVALID_ARGUMENT``.
    """
    if since is not None and (type(since) is not int or not 0 <= since <= MAX_SAFE_INTEGER):
        raise TeamError("since must be a non-negative safe integer log position", TeamCode.INVALID_ARGUMENT)
    return since


def abort_error(reason: Any) -> BaseException:
    """What an aborted wait raises: the reason itself if it is an exception, else
    ``TEAM_WAIT_ABORTED`` ("wait_agent aborted: <rendered reason>")."""
    if isinstance(reason, BaseException):
        return reason
    return TeamError(f"wait_agent aborted: {render_reason(reason)}", TeamCode.WAIT_ABORTED)


def _call_later(delay: float, callback: Callable[[], None]) -> Callable[[], None]:
    return asyncio.get_running_loop().call_later(delay, callback).cancel


class StatusMarks:
    """Where in the log each member's *live* status last changed (memory only).

    Live status (running or not) is not recorded in the Lead log, so a cursor
    cannot cover it exactly; instead each change is marked with the Team's durable
    position at that moment, and a delta after ``since`` reports every member
    marked at or after ``since`` (a change at the same position may have come
    before or after the caller's read, so it is reported: rows are current values,
    reporting one again is harmless). A member with no mark in this process is
    marked at the position the Team had when this process first saw it
    (``opened``): a cold resume reports every member to a cursor from before it,
    and so does a Team this process has not opened yet.
    """

    def __init__(self) -> None:
        self._marks: dict[str, dict[str, int]] = {}
        self._opened: dict[str, int] = {}

    def opened(self, team_id: str, position: int) -> None:
        """The first position this process knows ``team_id`` at (kept once set)."""
        self._opened.setdefault(team_id, position)

    def changed(self, team_id: str, member_id: str, position: int) -> None:
        """``member_id``'s live status changed while the Team was at ``position``."""
        self._marks.setdefault(team_id, {})[member_id] = position

    def after(self, team_id: str, since: int, member_ids: Iterable[str]) -> frozenset[str]:
        """The ids among ``member_ids`` whose live status may have changed after ``since``."""
        opened = self._opened.get(team_id)
        if opened is None:
            return frozenset(member_ids)
        marks = self._marks.get(team_id, {})
        return frozenset(key for key in member_ids if marks.get(key, opened) >= since)


class Activity:
    """One-shot waiters grouped by Team id.

    Args:
        timer: Schedules the timeout callback (tests pass a faster clock; the
            default is the running loop's ``call_later``).
    """

    def __init__(self, timer: Timer | None = None) -> None:
        self._timer: Timer = timer or _call_later
        self._waiters: dict[str, set[asyncio.Future[bool]]] = {}
        #: Team id -> member id -> how many of its waits are registered.
        self._parked: dict[str, dict[str, int]] = {}
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def waiting(self, team_id: str) -> int:
        """How many waits on ``team_id`` are registered (for tests and diagnostics)."""
        return len(self._waiters.get(team_id, ()))

    def parked(self, team_id: str) -> frozenset[str]:
        """The members with a registered wait on ``team_id`` (they run, but only to wait)."""
        return frozenset(self._parked.get(team_id, ()))

    async def wait(
        self,
        team_id: str,
        timeout_ms: int,
        position: Callable[[], int],
        *,
        since: int | None = None,
        signal: AbortSignal | None = None,
        member: str | None = None,
    ) -> WaitResult:
        """Wait for the next change of ``team_id`` (arguments already validated).

        Args:
            position: Reads the Team's current durable position.
            since: Return at once when ``position() > since``.
            signal: Aborting it ends the wait with :func:`abort_error`.
            member: The waiting member's id: listed by :meth:`parked` while it waits.

        Raises:
            BaseException: the abort reason (or ``TEAM_WAIT_ABORTED``).
        """
        if signal is not None and signal.aborted:
            raise abort_error(signal.reason)
        if self._closed or (since is not None and position() > since):
            return WaitResult(timed_out=False, position=position())
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        waiters = self._waiters.setdefault(team_id, set())
        waiters.add(future)

        def expire() -> None:
            if not future.done():
                future.set_result(True)

        def aborted(reason: Any) -> None:
            if not future.done():
                future.set_exception(abort_error(reason))

        cancel_timer = self._timer(timeout_ms / 1000, expire)
        remove_abort = signal.on_abort(aborted) if signal is not None else None
        if member is not None:
            parked = self._parked.setdefault(team_id, {})
            parked[member] = parked.get(member, 0) + 1
        try:
            timed_out = await future
        finally:
            cancel_timer()
            if remove_abort is not None:
                remove_abort()
            waiters.discard(future)
            if not waiters and self._waiters.get(team_id) is waiters:
                del self._waiters[team_id]
            if member is not None:
                self._unpark(team_id, member)
        return WaitResult(timed_out=timed_out, position=position())

    def _unpark(self, team_id: str, member: str) -> None:
        parked = self._parked[team_id]
        left = parked[member] - 1
        if left:
            parked[member] = left
            return
        del parked[member]
        if not parked:
            del self._parked[team_id]

    def notify(self, team_id: str) -> None:
        """End every current wait of ``team_id`` with ``timed_out=False``."""
        for future in self._waiters.pop(team_id, ()):
            if not future.done():
                future.set_result(False)

    def close(self) -> None:
        """End every wait with ``timed_out=False``; later waits return at once."""
        self._closed = True
        for team_id in list(self._waiters):
            self.notify(team_id)
