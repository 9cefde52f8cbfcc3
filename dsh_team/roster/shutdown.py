"""Graceful shutdown of a teammate: the Lead asks, the member answers, an approved member is released.

::

    (none) --Lead requests--> requested --member approves--> approved --its turn ends--> released
                                  |------member declines---> declined (it keeps working; ask again later)
                                  |------deadline passes---> stopped (its turn is cancelled; the Lead is told)

Every edge is a ``team/shutdown`` record in the Lead log (folded beside the Team
fold by :class:`ShutdownBook`, like the cost ledger: it never moves the wait
position), and every request and answer is also ordinary Team mail, so the member
reads the request at its next step and the Lead's wait wakes with the answer.

A released or stopped member is gone for good: its name stays reserved, its tasks
stay owned until reassigned, its log keeps everything; mail to it is refused
(``TEAM_MEMBER_NOT_FOUND``) and queued mail is never delivered to it, so it is
never woken again. Its session is released with its inbox kept (an approved
member is released only once idle: nothing is pending then).

The deadline is recorded as an absolute time (``deadline``, epoch ms), so a crash
loses nothing: when the Lead starts again, a request still open is timed again
from its recorded deadline (stopped at once when it passed), and an approved
member that was not released yet is released.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec
import structlog

from dsh_team.core.snapshots import NonEmpty, SafeCount
from dsh_team.errors import TeamCode, TeamError, render_reason
from dsh_team.log.journal import Append
from dsh_team.log.member_records import MemberRecords, RecordKind, fold_latest
from dsh_team.core.targets import resolve_target

if TYPE_CHECKING:
    from host_spec.events import Event
    from host_spec.protocols import Agent, Host, Session

    from dsh_team.core.state import TeamState
    from dsh_team.log.journal import Journal
    from dsh_team.log.journals import Journals
    from dsh_team.log.lifecycle import Lifecycle
    from dsh_team.mail.send import MessageSender, SendResult
    from dsh_team.log.membership import MembershipResolver

__all__ = [
    "TEAM_SHUTDOWN", "SHUTDOWN_VERSION", "SHUTDOWN_RECORDS", "ShutdownRecord", "ShutdownBook", "Shutdowns",
    "decide_shutdown", "decide_answer", "gone_members",
]

TEAM_SHUTDOWN: Final = "team/shutdown"
SHUTDOWN_VERSION: Final = 1
Phase = Literal["requested", "approved", "declined", "stopped", "released"]
#: Phases after which the member is gone for good.
GONE: Final = frozenset({"stopped", "released"})

log = structlog.get_logger(__name__)


class ShutdownRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """Payload of ``team/shutdown``: one edge of a member's shutdown (see the module docstring)."""

    version: SafeCount
    team_id: NonEmpty
    member_id: NonEmpty
    phase: Phase
    deadline: SafeCount | None = None
    reason: str = ""


#: The ``team/shutdown`` record: its decoder and version, shared by the book and the invariant's vetting.
SHUTDOWN_RECORDS: Final = RecordKind(TEAM_SHUTDOWN, ShutdownRecord, SHUTDOWN_VERSION)


def _now_ms() -> int:
    return int(time.time() * 1000)


def decide_shutdown(
    state: TeamState, shutdowns: Mapping[str, ShutdownRecord], target: Any, *, deadline: int, reason: str,
) -> tuple[ShutdownRecord, str]:
    """The Lead's shutdown request to ``target`` (pure): the ``requested`` record and the target's name.

    Args:
        state: The folded Team.
        shutdowns: Each member's latest shutdown record (the shutdown book).
        target: The name the Lead gave.
        deadline: When an unanswered request ends (epoch ms).
        reason: The Lead's text.

    Raises:
        TeamError: ``TEAM_INVALID_ARGUMENT`` / ``TEAM_MEMBER_NOT_FOUND`` (not an active
            member, or gone already), ``TEAM_INVALID_TARGET`` (the Lead),
            ``TEAM_SHUTDOWN_PENDING`` (a request is open or approved).
    """
    target_id, name = resolve_target(state, target)
    if target_id == state.team_id:
        raise TeamError("the Lead cannot shut itself down", TeamCode.INVALID_TARGET)
    current = shutdowns.get(target_id)
    if current is not None and current.phase in GONE:
        raise TeamError(f'teammate "{name}" has shut down', TeamCode.MEMBER_NOT_FOUND, target=name)
    if current is not None and current.phase in ("requested", "approved"):
        raise TeamError(f'teammate "{name}" already has a shutdown {current.phase}', TeamCode.SHUTDOWN_PENDING)
    record = ShutdownRecord(version=SHUTDOWN_VERSION, team_id=state.team_id, member_id=target_id,
                            phase="requested", deadline=deadline, reason=reason)
    return record, name


def decide_answer(
    shutdowns: Mapping[str, ShutdownRecord], team_id: str, member_id: str, *, approve: bool, reason: str,
) -> ShutdownRecord:
    """A teammate's answer to its open shutdown request (pure): the ``approved`` or ``declined`` record.

    ``member_id`` is the answering member (the Team id for the Lead, which is never asked).

    Raises:
        TeamError: ``TEAM_NO_SHUTDOWN_REQUEST`` (none open for it).
    """
    current = shutdowns.get(member_id)
    if member_id == team_id or current is None or current.phase != "requested":
        raise TeamError("there is no open shutdown request for you", TeamCode.NO_SHUTDOWN_REQUEST)
    return ShutdownRecord(version=SHUTDOWN_VERSION, team_id=team_id, member_id=member_id,
                          phase="approved" if approve else "declined", reason=reason)


class ShutdownBook(MemberRecords[ShutdownRecord]):
    """Each member's latest shutdown record, per live Lead session, folded incrementally."""

    def __init__(self) -> None:
        super().__init__(SHUTDOWN_RECORDS)


class Shutdowns:
    """The shutdown flow of one service (see the module docstring).

    Args:
        host: The host (``agents``, ``continuations``, ``call_soon``).
        journals, members, lifecycle: The service's journals, membership and lifetime.
        sender: Queues the request, the answer and the Lead's notice as Team mail.
        timeout_ms: How long a member has to answer.
    """

    def __init__(
        self, host: Host, journals: Journals, members: MembershipResolver, lifecycle: Lifecycle,
        sender: MessageSender, timeout_ms: int,
    ) -> None:  # fmt: skip
        self.host = host
        self.journals = journals
        self.members = members
        self.lifecycle = lifecycle
        self.sender = sender
        self.timeout_ms = timeout_ms
        self.book = ShutdownBook()
        self._timers: dict[tuple[str, str], asyncio.Future[None]] = {}
        #: Told once a member is gone and released (its worktree, if any, may go: :mod:`dsh_team.worktrees`).
        self.on_gone: Callable[[Journal, str], Awaitable[None]] | None = None

    def gone(self, journal: Journal, member_id: str) -> bool:
        """Whether ``member_id`` was released or stopped for good."""
        record = self.book.latest(journal.session).get(member_id)
        return record is not None and record.phase in GONE

    def _append(self, journal: Journal, member_id: str, phase: Phase, **fields: Any) -> Append:
        record = ShutdownRecord(
            version=SHUTDOWN_VERSION, team_id=journal.team_id, member_id=member_id, phase=phase, **fields
        )
        return Append(TEAM_SHUTDOWN, record)

    # ------------------------------------------------------------ the Lead asks

    async def request(self, caller: Agent, target: Any, text: str) -> SendResult:
        """Ask ``target`` to shut down; returns the request message's send result.

        Raises:
            TeamError: ``TEAM_LEAD_REQUIRED``, ``TEAM_INVALID_TARGET`` (the Lead),
                ``TEAM_MEMBER_NOT_FOUND`` (unknown, or gone already), ``TEAM_SHUTDOWN_PENDING``,
                and the send codes.
        """
        self.lifecycle.admit()
        membership = self.members.resolve(caller)
        if not membership.is_lead:
            raise TeamError("only the Team Lead can ask a teammate to shut down", TeamCode.LEAD_REQUIRED)
        journal = self.journals.get(membership.root.session)
        asked: list[tuple[str, str, int]] = []

        def decide(state: TeamState) -> Append:
            deadline = _now_ms() + self.timeout_ms
            record, name = decide_shutdown(state, self.book.latest(journal.session), target, deadline=deadline,
                                           reason=text)
            asked.append((record.member_id, name, deadline))
            return Append(TEAM_SHUTDOWN, record)

        await journal.transact(decide, what=f"the shutdown request to {target}")
        target_id, name, deadline = asked[0]
        self._arm(journal, target_id, deadline)
        seconds = self.timeout_ms // 1000
        request = (
            f"Shutdown request from the Lead: {text}\nFinish or hand off your work, then answer within {seconds} s: "
            'send_message(target="lead", shutdown="approve" or "decline", message=<why>).'
        )
        return await self.sender.send_as(journal, membership.member_id, "lead", name, request)

    # ------------------------------------------------------------ the member answers

    async def answer(self, caller: Agent, approve: bool, text: str) -> SendResult:
        """The member's answer to its open request; approved, it is released once its turn ends.

        Raises:
            TeamError: ``TEAM_NOT_MEMBER``, ``TEAM_NO_SHUTDOWN_REQUEST`` (none open for the caller).
        """
        self.lifecycle.admit()
        membership = self.members.resolve(caller)
        journal = self.journals.get(membership.root.session)
        member_id = membership.member_id

        def decide(state: TeamState) -> Append:
            return Append(TEAM_SHUTDOWN, decide_answer(self.book.latest(journal.session), journal.team_id, member_id,
                                                       approve=approve, reason=text))

        await journal.transact(decide, what=f"{membership.name}'s shutdown answer")
        self._disarm(journal.team_id, member_id)
        verb = "approved" if approve else "declined"
        note = " It is released when its turn ends." if approve else ""
        return await self.sender.send_as(
            journal, member_id, membership.name, "lead", f"Shutdown {verb} by {membership.name}: {text}{note}"
        )

    def agent_idle(self, agent: Agent) -> None:
        """A member went idle: release it if it approved its shutdown."""
        membership = self.members.try_resolve(agent)
        if membership is None or membership.is_lead:
            return
        journal = self.journals.get(membership.root.session)
        current = self.book.latest(journal.session).get(membership.member_id)
        if current is not None and current.phase == "approved":
            self._soon(lambda: self.end(journal, membership.member_id, "released", ""))

    # ------------------------------------------------------------ the deadline

    def _arm(self, journal: Journal, member_id: str, deadline: int) -> None:
        """Time the open request: host work the run waits for, so a quiet Team still meets its deadline.

        A bare loop timer would not keep ``dsh run`` alive: the Team could go quiet with
        the request open, the run exit, and the deadline be enforced only by a later
        resume. The wait is tracked host work instead; an answer cancels it.
        """
        self._disarm(journal.team_id, member_id)
        key = (journal.team_id, member_id)

        async def expire_at_deadline() -> None:
            delay = (deadline - _now_ms()) / 1000
            if delay > 0:  # passed already (a resume after the deadline): expire at once
                await asyncio.sleep(delay)
            self._timers.pop(key, None)
            self._soon(lambda: self._expire(journal, member_id))

        # Host work (the run's quiescence waits for it), not an admitted operation:
        # disposal cancels the wait (close) instead of waiting out the deadline.
        timer = asyncio.ensure_future(expire_at_deadline())
        self._timers[key] = timer
        self.host.call_soon(lambda: timer)

    def _disarm(self, team_id: str, member_id: str) -> None:
        timer = self._timers.pop((team_id, member_id), None)
        if timer is not None:
            timer.cancel()

    async def _expire(self, journal: Journal, member_id: str) -> None:
        member = journal.state.members.members.get(member_id)
        name = member.name if member is not None else member_id
        if await self.end(journal, member_id, "stopped", "no answer before the deadline"):
            await self.sender.notify_lead(
                journal, f"{name} did not answer the shutdown request in time: it was stopped (its tasks stay owned)."
            )

    async def end(self, journal: Journal, member_id: str, phase: Phase, reason: str) -> bool:
        """Record the member gone, then release its session (inbox kept); ``False`` when it cannot end so.

        ``stopped`` ends only an open request (one answered meanwhile is left alone),
        ``released`` only an approved one; so a second end, or a timer racing an
        answer, appends nothing. Recorded first: a crash before the release leaves a
        member that is gone already and is never woken again.
        """
        allowed = "requested" if phase == "stopped" else "approved"
        ended: list[bool] = []

        def decide(state: TeamState) -> Append | None:
            current = self.book.latest(journal.session).get(member_id)
            if current is None or current.phase != allowed:
                return None
            ended.append(True)
            return self._append(journal, member_id, phase, reason=reason)

        await journal.transact(decide, what=f"the shutdown of {member_id}")
        root = self.host.agents.get(journal.team_id)
        if ended and root is not None and self.host.agents.get(member_id) is not None:
            await self.host.continuations.drain(root, [member_id], keep_inbox=True)
        if ended and self.on_gone is not None:
            await self.on_gone(journal, member_id)
        return bool(ended)

    def _soon(self, work: Callable[[], Awaitable[Any]]) -> None:
        async def guarded() -> None:
            try:
                await work()
            except Exception as exc:
                log.warning("team.shutdown_failed", error=render_reason(exc))

        self.host.call_soon(lambda: None if self.lifecycle.disposed else self.lifecycle.track(guarded()))

    # ------------------------------------------------------------ recovery

    def recover(self, lead: Agent) -> None:
        """At the Lead's start: time open requests again, release approved members not yet released."""
        journal = self.journals.get(lead.session)
        for member_id, record in list(self.book.latest(journal.session).items()):
            if record.phase == "requested" and record.deadline is not None:
                self._arm(journal, member_id, record.deadline)
            elif record.phase == "approved" and self.host.agents.get(member_id) is None:
                self._soon(functools.partial(self.end, journal, member_id, "released", ""))

    def close(self) -> None:
        """Cancel every timer (the service is disposed; a restart times them again)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()


def gone_members(events: Sequence[Event], team_id: str) -> frozenset[str]:
    """The members of Team ``team_id`` released or stopped for good, from its Lead log ``events``.

    The same fold the live book applies, for a command judging a stopped run.
    """
    latest = fold_latest(SHUTDOWN_RECORDS, events, team_id, {})
    return frozenset(member_id for member_id, record in latest.items() if record.phase in GONE)
