"""Routing a member's permission ask: recorded in the Lead log, answered once, by the user or the Lead.

:class:`PermissionRoutes` is the Team's :class:`host_spec.permissions.PermissionRouter`
(the host's gate asks it, for every Team member). For one ask it:

1. answers at once when a session rule covers the call (an earlier "allow always"
   of this member: :attr:`~dsh_team.permissions.ledger.PermissionsState.always`);
2. records ``permission/requested`` through the Lead's journal, decided by
   :func:`~dsh_team.permissions.decide.decide_permission` (once per call: asking
   again after a crash finds the recorded request and its fixed deadline);
3. when the profile delegates (``[permissions] delegate = "lead"``) and a teammate
   asks, queues the Lead a framed Team notice (:func:`request_text`) that wakes its
   wait; the Lead answers with ``send_message(permission=ID, answer=...)``;
4. waits for the answer, or for the deadline, at which it records the denial
   (``by: "deadline"``) itself.

Answers come through :meth:`PermissionRoutes.answer` alone (the Lead's tool, the
chat's ``/permit``, the web panel, an editor): one transaction, one record,
``PERMISSION_ALREADY_ANSWERED`` for every later one. Whoever wants to show open
asks (a chat prompt line, an editor's ``session/request_permission``) registers a
listener (:meth:`PermissionRoutes.listen`) and reads :meth:`PermissionRoutes.open_asks`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec
import structlog

from host_spec.permissions import PermissionAnswer, PermissionRequest, RuleSet, evaluate
from host_spec.records import Handle

from dsh_team.errors import TeamCode, TeamError, render_reason
from dsh_team.log.journal import Append
from dsh_team.permissions.decide import AnswerCommand, PermissionLimits, RequestCommand, decide_permission
from dsh_team.permissions.records import PERMISSION_ANSWERED, PERMISSION_REQUESTED, Answerer, RequestedRecord

if TYPE_CHECKING:
    from host_spec.protocols import Agent, Host

    from dsh_team.log.journal import Journal
    from dsh_team.log.journals import Journals
    from dsh_team.log.lifecycle import Lifecycle
    from dsh_team.mail.send import MessageSender
    from dsh_team.permissions.ledger import Ask, LivePermissions, PermissionsState
    from dsh_team.log.membership import MembershipResolver

__all__ = ["PermissionRoutes", "request_text", "DEADLINE_REASON"]

log = structlog.get_logger(__name__)

#: The reason recorded when an ask's deadline denies it.
DEADLINE_REASON: Final = "no answer before the ask's deadline"
_MAX_SHOWN: Final = 2_000

AskListener = Callable[[str, "Ask"], None]


def request_text(request: RequestedRecord) -> str:
    """The framed request the Lead reads when the profile delegates its teammates' asks."""
    arguments = request.arguments if len(request.arguments) <= _MAX_SHOWN else request.arguments[:_MAX_SHOWN] + "..."
    return (
        f"Permission request {request.ask_id} from {request.member}: {request.tool} {arguments} "
        f'(rule "{request.rule}"). Answer with send_message(target="{request.member}", '
        f'permission="{request.ask_id}", answer="allow" | "always" | "deny", message="why"). '
        "Unanswered, it is denied at its deadline; the user may answer first."
    )


def _now_ms() -> int:
    return int(time.time() * 1000)


class PermissionRoutes:
    """The Team's permission router (see the module docstring).

    Args:
        host: The host (``call_soon`` for listeners).
        journals, members, lifecycle, sender: The service's journals, membership, lifetime and mail.
        live: The permissions fold of each live Lead.
    """

    def __init__(
        self, host: Host, journals: Journals, members: MembershipResolver, lifecycle: Lifecycle,
        sender: MessageSender, live: LivePermissions, limits: PermissionLimits = PermissionLimits(),
    ) -> None:  # fmt: skip
        self.host = host
        self.journals = journals
        self.members = members
        self.lifecycle = lifecycle
        self.sender = sender
        self.live = live
        self.limits = limits
        #: (team id, ask id) -> event set once the ask's answer is recorded here.
        self._answered: dict[tuple[str, str], asyncio.Event] = {}
        self._listeners: list[AskListener] = []

    # ------------------------------------------------------------ the host's router

    def routes(self, agent: Agent) -> bool:
        """Whether ``agent`` is a Team member (its asks are recorded in its Lead log)."""
        return self.members.try_resolve(agent) is not None

    def state(self, journal: Journal) -> PermissionsState:
        """The permissions fold of ``journal``'s Team."""
        return self.live.state(journal.session)

    async def ask(self, agent: Agent, request: PermissionRequest) -> PermissionAnswer:
        """Record ``request`` once and wait for its answer (or its deadline).

        Raises:
            TeamError: ``TEAM_NOT_MEMBER``, the journal's errors.
        """
        membership = self.members.resolve(agent)
        journal = self.journals.get(membership.root.session)
        state = self.state(journal)
        ask_id = state.keys.get(request.key)
        if ask_id is None:
            covered = self._session_rule(state, membership.member_id, request)
            if covered is not None:
                return PermissionAnswer(ask_id="", decision="allow", by="session", reason=f'session rule "{covered}"')
            route: Literal["user", "lead"] = "lead" if request.delegate == "lead" and not membership.is_lead else "user"
            command = RequestCommand(
                key=request.key, member=membership.name, member_id=membership.member_id, tool=request.tool,
                arguments=request.arguments, rule=request.rule, deadline=_now_ms() + request.timeout_ms, route=route,
                always_rule=request.always_rule,
            )  # fmt: skip

            def decide(_: Any) -> Append | None:
                record = decide_permission(self.state(journal), command, self.limits)
                return None if record is None else Append(PERMISSION_REQUESTED, record)

            await journal.transact(decide, what=f"the permission ask of {membership.name}")
            state = self.state(journal)
            ask_id = state.keys[request.key]
            recorded = state.asks[ask_id]
            log.info("team.permission_requested", ask=ask_id, member=membership.name, tool=request.tool, route=route)
            if route == "lead":
                await self.sender.notify_lead(journal, request_text(recorded.request))
            self._announce(journal.team_id, recorded)
        return await self._wait(journal, ask_id)

    def _session_rule(self, state: PermissionsState, member_id: str, request: PermissionRequest) -> str | None:
        rules = state.always.get(member_id)
        if not rules:
            return None
        try:
            arguments = msgspec.json.decode(request.arguments or "{}")
        except msgspec.DecodeError:  # pragma: no cover - the host decoded these arguments already
            return None
        verdict = evaluate(RuleSet.build(default="ask", allow=rules), request.tool, arguments if isinstance(
            arguments, dict) else {})
        return verdict.rule if verdict.decision == "allow" else None

    async def _wait(self, journal: Journal, ask_id: str) -> PermissionAnswer:
        event = self._answered.setdefault((journal.team_id, ask_id), asyncio.Event())
        try:
            while True:
                ask = self.state(journal).asks[ask_id]
                if ask.answer is not None:
                    answer = ask.answer
                    return PermissionAnswer(ask_id=ask_id, decision=answer.decision, by=answer.by,
                                            reason=answer.reason, always=answer.always)  # fmt: skip
                remaining = ask.request.deadline - _now_ms()
                if remaining <= 0:
                    await self._record(journal, AnswerCommand(ask_id, "deny", "deadline", DEADLINE_REASON))
                    continue
                try:
                    await asyncio.wait_for(event.wait(), remaining / 1000)
                except TimeoutError:
                    pass
                event.clear()
        finally:
            self._answered.pop((journal.team_id, ask_id), None)

    # ------------------------------------------------------------ answering

    async def answer(
        self, lead: Agent, ask_id: str, answer: str, *, by: Answerer, reason: str = ""
    ) -> Ask:
        """Answer ``ask_id`` of ``lead``'s Team once (the one path every live answerer takes).

        Args:
            lead: Any member of the Team (the Lead for the user's answers from chat or the panel).
            answer: ``allow``, ``always`` (allow, and a session rule for the member) or ``deny``.
            by: ``user`` or ``lead``.

        Raises:
            TeamError: the codes of :func:`~dsh_team.permissions.decide.decide_permission`,
                ``TEAM_NOT_MEMBER``.
        """
        membership = self.members.resolve(lead)
        if by == "lead" and not membership.is_lead:
            raise TeamError("only the Team Lead answers a delegated permission ask", TeamCode.LEAD_REQUIRED)
        journal = self.journals.get(membership.root.session)
        return await self._record(journal, AnswerCommand(ask_id, answer, by, reason))

    async def _record(self, journal: Journal, command: AnswerCommand) -> Ask:
        def decide(_: Any) -> Append:
            record = decide_permission(self.state(journal), command, self.limits)
            assert record is not None  # an answer always records
            return Append(PERMISSION_ANSWERED, record)

        await journal.transact(decide, what=f"the answer of permission ask {command.ask_id}")
        ask = self.state(journal).asks[command.ask_id]
        log.info("team.permission_answered", ask=command.ask_id, decision=ask.answer and ask.answer.decision,
                 by=command.by)  # fmt: skip
        event = self._answered.get((journal.team_id, command.ask_id))
        if event is not None:
            event.set()
        self._announce(journal.team_id, ask)
        return ask

    # ------------------------------------------------------------ the open-asks feed

    def open_asks(self, member: Agent) -> tuple[Ask, ...]:
        """The open asks of ``member``'s Team, in log order.

        Raises:
            TeamError: ``TEAM_NOT_MEMBER``.
        """
        membership = self.members.resolve(member)
        return self.state(self.journals.get(membership.root.session)).open_asks()

    def listen(self, listener: AskListener) -> Handle:
        """Call ``listener(team_id, ask)`` after every request and answer recorded here (until disposed)."""
        self._listeners.append(listener)
        return Handle(lambda: self._listeners.remove(listener), label="permission-listener")

    def _announce(self, team_id: str, ask: Ask) -> None:
        for listener in tuple(self._listeners):
            try:
                listener(team_id, ask)
            except Exception as exc:
                log.warning("team.permission_listener_failed", error=render_reason(exc))
