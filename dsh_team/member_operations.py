"""The roster and mailbox operations of the Team service, and what its members spent.

``list_members``, ``spawn_teammate``, ``send_message``, ``send_from_user`` and ``interrupt`` are
carried out by the rooms :class:`dsh_team.coordination.Coordination` wires (the
roster, the provisioner, the sender); the service hands them the exact live
caller, after the Team budget had its say on a spawn. ``member_costs`` reads
the spend the cost room charged (:mod:`dsh_team.cost`).

:class:`MemberOperations` is a part of :class:`dsh_team.service.TeamService`: it
holds no state of its own and works on the service's rooms and membership.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from host_spec.messages import text_block

from dsh_team.errors import TeamCode, TeamError
from dsh_team.roster.roles import check_model, check_tools, find_role, role_names, with_instructions
from dsh_team.roster.roster import validate_name

if TYPE_CHECKING:
    from host_spec.protocols import Agent, Host
    from host_spec.records import AbortSignal

    from dsh_team.config import TeamConfig
    from dsh_team.controls.ledger import ControlsState
    from dsh_team.controls.plans import Plans
    from dsh_team.coordination import Coordination
    from dsh_team.cost.costs import TeamCosts
    from dsh_team.cost.report import MemberCost
    from dsh_team.log.journal import Journal
    from dsh_team.mail.send import SendResult
    from dsh_team.log.membership import Membership
    from dsh_team.roster.roster import InterruptResult, MemberView

__all__ = ["MemberOperations"]


def _text(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise TeamError("the message must be a non-empty string", TeamCode.INVALID_ARGUMENT)
    return text


class MemberOperations:
    """Roster, mailbox and spend calls of the Team service (a part of ``TeamService``).

    Attributes:
        coordination, costs: The service's roster and mailbox runtime and its cost room.
    """

    coordination: Coordination
    costs: TeamCosts
    config: TeamConfig
    plans: Plans
    host: Host

    if TYPE_CHECKING:  # the service's own membership calls

        def membership(self, agent: Agent) -> Membership: ...
        def try_membership(self, agent: Agent) -> Membership | None: ...
        def _lead(self, membership: Membership) -> Journal: ...
        def controls_state(self, caller: Agent) -> ControlsState: ...

    def list_members(self, caller: Agent) -> list[MemberView]:
        """The Lead row, then every teammate ever provisioned in creation order.

        Raises:
            TeamError: ``TEAM_NOT_MEMBER``, ``TEAM_STREAM_FAILED``.
        """
        return self.coordination.roster.list_members(caller)

    async def spawn_teammate(
        self,
        caller: Agent,
        *,
        name: Any,
        description: Any,
        prompt: Any,
        context: Any = "fresh",
        provider: Any,
        signal: AbortSignal | None = None,
        plan_approval: Any = None,
        role: Any = None,
    ) -> MemberView:
        """Create a named continuable teammate (Lead only); see :mod:`dsh_team.roster.provisioning`.

        A reached Team budget refuses it (``TEAM_BUDGET_EXCEEDED``, see :mod:`dsh_team.cost`).
        ``plan_approval`` (default: the config's) makes it plan before it may write
        (:mod:`dsh_team.controls.plans`); its ``required`` record is durable before the teammate exists.
        ``role`` names a role (:mod:`dsh_team.roster.roles`): its instructions are appended
        to ``prompt``, its description stands in for an empty ``description``, its
        allowlist and model apply to the member (``TEAM_ROLE_NOT_FOUND``, ``TEAM_ROLE_INVALID``).
        In ``worktree`` mode (the role's ``workspace_mode``, else the config's) the member
        works in its own git worktree (:mod:`dsh_team.worktrees`; ``TEAM_WORKTREE_UNAVAILABLE``).
        """
        if plan_approval is not None and type(plan_approval) is not bool:
            raise TeamError("plan_approval must be a boolean", TeamCode.INVALID_ARGUMENT, field="plan_approval")
        membership = self.try_membership(caller)
        if membership is not None and membership.is_lead:
            self.costs.require_spawn(membership)
        chosen = None
        if role is not None:
            membership = self.membership(caller)
            spec = find_role(role, cwd=membership.root.session.header.cwd, table=self.config.roles)
            check_tools(spec, [tool.name for tool in self.host.tools.visible(caller)], f'"{role}"')
            check_model(spec, self.host.continuations, f'"{role}"')
            chosen = (role, spec)
            prompt = with_instructions(list(prompt), spec) if isinstance(prompt, list) else prompt
            if spec.description and (not isinstance(description, str) or not description.strip()):
                description = spec.description
        worktree = self.coordination.worktrees.mode(chosen[1].workspace_mode if chosen else None) == "worktree"
        if membership is not None and membership.is_lead:
            if self.config.plan_approval if plan_approval is None else plan_approval:
                await self.plans.require(self._lead(membership), membership.team_id, validate_name(name))
        return await self.coordination.provisioner.spawn(
            caller, name=name, description=description, prompt=prompt, context=context, provider=provider,
            signal=signal, role=chosen, worktree=worktree,
        )  # fmt: skip

    def control_choices(self, caller: Agent) -> dict[str, list[str]]:
        """The values of the control fields ``caller`` could send right now (``role``, ``plan``, ``shutdown``).

        A hint for a step's closed sets, never a check (the operations still decide):
        the Lead may name a configured role, decide a submitted plan and ask an active
        teammate to shut down; a teammate may submit a plan its approval waits for and
        answer an open shutdown request. An empty list: nothing valid to send now.

        Raises:
            TeamError: ``TEAM_NOT_MEMBER``.
        """
        membership = self.membership(caller)
        plans = self.controls_state(caller).plans
        if membership.is_lead:
            teammates = [m for m in self.list_members(caller) if m.role == "teammate" and m.status != "failed"]
            return {
                "role": role_names(cwd=membership.root.session.header.cwd, table=self.config.roles),
                "plan": ["approve", "reject"] if any(p.status == "submitted" for p in plans.values()) else [],
                "shutdown": ["request"] if teammates else [],
            }
        own = plans.get(membership.name)
        shutdown = self.coordination.shutdowns.book.latest(membership.root.session).get(membership.member_id)
        return {
            "role": [],
            "plan": ["submit"] if own is not None and own.status in ("required", "rejected") else [],
            "shutdown": ["approve", "decline"] if shutdown is not None and shutdown.phase == "requested" else [],
        }

    def tool_allowlist(self, agent: Agent) -> frozenset[str] | None:
        """The non-Team tools ``agent``'s role allows (``None``: no role, or a role without an allowlist)."""
        membership = self.try_membership(agent)
        if membership is None or membership.is_lead:
            return None
        record = self.coordination.roles.roles(membership.root.session).get(membership.member_id)
        if record is None or record.spec.tools is None:
            return None
        return frozenset(record.spec.tools)

    async def send_message(
        self, caller: Agent, *, target: Any, content: Any, signal: AbortSignal | None = None
    ) -> SendResult:
        """Queue a peer message durably and try to deliver it; see :mod:`dsh_team.mail.send`."""
        return await self.coordination.sender.send(caller, target=target, content=content, signal=signal)

    async def send_from_user(self, lead: Agent, target: Any, text: Any) -> SendResult:
        """Queue the user's message ``text`` to ``target`` (a teammate's name or ``lead``), exactly once.

        ``lead`` is the Team's live Lead agent: whoever holds the run speaks for the
        user (the web panel, ``dsh chat``'s ``/send NAME text``). The target sees
        ``Message <id> from the user:`` with a ``user`` source, never a member's name;
        delivery is the Team mail's (a sleeping teammate is resumed to read it).

        Raises:
            TeamError: ``TEAM_LEAD_REQUIRED``, ``TEAM_NOT_MEMBER``, ``TEAM_DISPOSED``,
                ``TEAM_INVALID_ARGUMENT`` (``text`` not a non-empty string),
                ``TEAM_MEMBER_NOT_FOUND``, ``TEAM_MAILBOX_FULL``, ``TEAM_MESSAGE_TOO_LARGE``,
                ``TEAM_STREAM_FAILED``, ``TEAM_PERSISTENCE_UNCONFIRMED`` (queued, do not resend).
        """
        return await self.coordination.sender.send_from_user(lead, target=target, content=[text_block(_text(text))])

    async def request_shutdown(self, caller: Agent, target: Any, text: Any) -> SendResult:
        """Ask a teammate to shut down (Lead only); see :mod:`dsh_team.roster.shutdown`.

        Raises:
            TeamError: ``TEAM_INVALID_ARGUMENT``, ``TEAM_LEAD_REQUIRED``, ``TEAM_INVALID_TARGET``,
                ``TEAM_MEMBER_NOT_FOUND``, ``TEAM_SHUTDOWN_PENDING`` and the send codes.
        """
        return await self.coordination.shutdowns.request(caller, target, _text(text))

    async def answer_shutdown(self, caller: Agent, approve: bool, text: Any) -> SendResult:
        """A teammate's answer to its open shutdown request; approved, it is released when its turn ends.

        Raises:
            TeamError: ``TEAM_INVALID_ARGUMENT``, ``TEAM_NO_SHUTDOWN_REQUEST`` and the send codes.
        """
        return await self.coordination.shutdowns.answer(caller, approve, _text(text))

    def interrupt(self, caller: Agent, target: Any) -> InterruptResult:
        """Cancel an active teammate's current turn, keeping its inbox (Lead only)."""
        return self.coordination.roster.interrupt(caller, target)

    def member_costs(self, caller: Agent) -> dict[str, MemberCost]:
        """Spend per member id of the caller's Team (charged so far) and whether a budget refuses it.

        Raises:
            TeamError: ``TEAM_NOT_MEMBER``.
        """
        return self.costs.costs(self._lead(self.membership(caller)))
