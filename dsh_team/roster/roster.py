"""The roster as members see it: rows with live status, name rules, interrupt, teardown drain.

The durable roster (``team/member`` records in the Lead log) says who was ever
provisioned and how that ended; it never says whether a teammate is busy. Live
status is derived at read time from the host's agents, so a crash can never
leave a stale "running" behind:

* ``failed`` / ``provisioning``: the record's phase;
* ``active``: ``running`` while the teammate's agent runs a turn, else
  ``inactive`` (idle, or not loaded at all: asleep on disk is not a failure);
* ``shut down``: released or stopped by a shutdown (:mod:`dsh_team.roster.shutdown`),
  gone for good: it takes no mail and is never woken again.

Membership itself (who may call, as Lead or teammate) is resolved by
:mod:`dsh_team.log.membership` from the same folded roster.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec
import structlog

from dsh_team.errors import TeamCode, TeamError
from dsh_team.core.snapshots import TeamMemberSnapshot
from dsh_team.core.state import TeamState
from dsh_team.core.targets import resolve_target
from dsh_team.core.task_view import LEAD_NAME

if TYPE_CHECKING:
    from host_spec.protocols import Agent, Host
    from dsh_team.log.journal import Journal
    from dsh_team.log.journals import Journals
    from dsh_team.log.lifecycle import Lifecycle
    from dsh_team.log.membership import Membership, MembershipResolver

__all__ = [
    "NAME_MAX",
    "TEXT_MAX",
    "MemberStatus",
    "MemberView",
    "InterruptResult",
    "validate_name",
    "RosterService",
]

log = structlog.get_logger(__name__)

#: Longest teammate name.
NAME_MAX: Final = 64
#: Longest description or provider name (after trimming).
TEXT_MAX: Final = 200

_NAME: Final = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

MemberStatus = Literal["running", "inactive", "provisioning", "failed", "shut down"]


class MemberView(msgspec.Struct, frozen=True, omit_defaults=True):
    """One roster row (``list_members``; ``spawn_teammate`` returns the new member's).

    Attributes:
        id: The member's session id (the Team id for the Lead). Tools show ``name``.
        status: ``running`` / ``inactive`` (live), ``provisioning`` / ``failed`` (durable),
            ``shut down`` (released or stopped by a shutdown: gone for good, never woken again).
        model: The live agent's model, else the Lead's; absent when neither is known.
        diagnostics: The provisioning error of a failed member, else empty.
        pending: Team messages queued for the member and not yet delivered (a
            sender can see its message is still on its way instead of resending).
        unread: Team messages delivered to the member that no completed model
            step of it has seen yet (a read receipt clears one).
    """

    id: str
    name: str
    role: Literal["lead", "teammate"]
    status: MemberStatus
    description: str | None = None
    provider: str | None = None
    context: Literal["fresh", "fork"] | None = None
    model: str | None = None
    diagnostics: tuple[str, ...] = ()
    pending: int = 0
    unread: int = 0


class InterruptResult(msgspec.Struct, frozen=True):
    """What ``interrupt`` saw just before cancelling (``inactive``: nothing was running)."""

    previous_status: Literal["running", "inactive"]


def validate_name(name: Any) -> str:
    """A teammate name exactly as given: lower-kebab-case, at most 64 characters, not ``lead``.

    Raises:
        TeamError: ``TEAM_INVALID_MEMBER_NAME``.
    """
    if not isinstance(name, str) or len(name) > NAME_MAX or name == LEAD_NAME or not _NAME.fullmatch(name):
        raise TeamError(
            f"invalid teammate name {name!r}: use lower-kebab-case (a-z, 0-9, single hyphens), "
            f'at most {NAME_MAX} characters, and not "{LEAD_NAME}"',
            TeamCode.INVALID_MEMBER_NAME,
        )
    return name


class RosterService:
    """Roster reads, interrupt and the teardown drain (provisioning lives in :mod:`.provisioning`).

    Args:
        host: The host (``agents``, ``sessions``, ``continuations``).
        journals: The per-Lead journals.
        members: Membership resolution.
    """

    def __init__(self, host: Host, journals: Journals, members: MembershipResolver) -> None:
        self.host = host
        self.journals = journals
        self.members = members
        #: Whether a member of a Lead's journal shut down for good (the shutdown flow sets it).
        self.gone: Callable[[Journal, str], bool] = lambda journal, member_id: False

    def _lead(self, caller: Agent) -> tuple[Membership, TeamState]:
        membership = self.members.resolve(caller)
        return membership, self.journals.get(membership.root.session).authoritative()

    def live_status(self, agent_id: str) -> Literal["running", "inactive"]:
        agent = self.host.agents.get(agent_id)
        return "running" if agent is not None and agent.status == "running" else "inactive"

    def view(
        self, member: TeamMemberSnapshot, fallback_model: str | None, pending: int = 0, unread: int = 0,
        gone: bool = False,
    ) -> MemberView:
        """The row of one roster record; ``fallback_model`` applies when the child is not loaded."""
        agent = self.host.agents.get(member.id)
        if gone:
            status: MemberStatus = "shut down"
        elif member.phase == "active":
            status = self.live_status(member.id)
        else:
            status = member.phase
        model = agent.model if agent is not None and agent.model is not None else fallback_model
        return MemberView(
            id=member.id,
            name=member.name,
            role="teammate",
            status=status,
            description=member.description,
            provider=member.provider,
            context=member.context,
            model=model,
            diagnostics=(member.error,) if member.error is not None else (),
            pending=pending,
            unread=unread,
        )

    def list_members(self, caller: Agent) -> list[MemberView]:
        """The Lead row, then every teammate ever provisioned, in creation order.

        Raises:
            TeamError: ``TEAM_NOT_MEMBER``, ``TEAM_STREAM_FAILED``.
        """
        membership, state = self._lead(caller)
        root = membership.root
        journal = self.journals.get(root.session)
        mail = state.mail
        rows = [
            MemberView(
                id=root.id,
                name=LEAD_NAME,
                role="lead",
                status=self.live_status(root.id),
                model=root.model,
                pending=mail.pending_count(root.id),
                unread=mail.unread_count(root.id),
            )
        ]
        rows.extend(
            self.view(member, root.model, mail.pending_count(member.id), mail.unread_count(member.id),
                      self.gone(journal, member.id))
            for member in state.members.listed()
        )
        return rows

    def interrupt(self, caller: Agent, target: Any) -> InterruptResult:
        """Cancel an active teammate's current turn, keeping its inbox (Lead only; synchronous).

        Mail, task ownership and the roster are untouched. A teammate that is not
        loaded reports ``inactive`` and nothing happens.

        Raises:
            TeamError: ``TEAM_NOT_MEMBER``, ``TEAM_LEAD_REQUIRED``, ``TEAM_INVALID_TARGET``
                (the Lead itself), ``TEAM_MEMBER_NOT_FOUND``, ``TEAM_INVALID_ARGUMENT``.
            SubagentError: the host refused the interrupt.
        """
        membership, state = self._lead(caller)
        if not membership.is_lead:
            raise TeamError("only the Team Lead can interrupt teammates", TeamCode.LEAD_REQUIRED)
        member_id, _ = resolve_target(state, target)
        if member_id == membership.team_id:
            raise TeamError("the Team Lead cannot interrupt itself", TeamCode.INVALID_TARGET)
        agent = self.host.agents.get(member_id)
        if agent is None:
            return InterruptResult(previous_status="inactive")
        previous = self.live_status(member_id)
        self.host.continuations.interrupt(member_id, membership.root)
        log.info("team.interrupted", team=membership.team_id, member=member_id, previous=previous)
        return InterruptResult(previous_status=previous)

    def live_children(self, journal: Journal) -> list[str]:
        """Ids of every rostered child (any phase) whose session is live."""
        sessions = self.host.sessions
        return [member.id for member in journal.state.members.listed() if sessions.get(member.id) is not None]

    async def drain(self, lifecycle: Lifecycle) -> list[BaseException]:
        """Drain every live Lead's live rostered children, child-first, each drain bounded (a disposal step).

        Every drain error is a failure (admission is already closed, so nothing
        here is the service's own cancellation).

        Current turns are cancelled but pending inboxes are *kept*: a message
        acknowledged as delivered may still be pending there, and the next cold
        resume works it off (discarding it would lose acknowledged mail). Non-Team children of a
        Lead are left alone. Returns the failures instead of raising, so one
        Lead's failure does not keep the others' children alive.
        """
        failures: list[BaseException] = []
        for journal in self.journals:
            root = self.host.agents.get(journal.team_id)
            if root is None or root.session is not journal.session:
                continue
            children = self.live_children(journal)
            if not children:
                continue
            try:
                await lifecycle.with_timeout(
                    self.host.continuations.drain(root, children, keep_inbox=True), "teammate drain"
                )
            except Exception as exc:
                log.warning("team.drain_failed", team=journal.team_id, error=repr(exc))
                failures.append(exc)
        return failures
