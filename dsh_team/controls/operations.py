"""The controls' part of the Team service: plan steps, the write veto, gate recovery and the controls read.

:class:`ControlOperations` is a part of :class:`dsh_team.service.TeamService` (like
:class:`~dsh_team.member_operations.MemberOperations`): it holds no state of its
own and works on the service's journals, membership and the controls rooms
(:mod:`.gates`, :mod:`.plans`, the fold of :mod:`.ledger`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

from host_spec import hookimpl
from host_spec.messages import text_block

from dsh_team.controls.plans import GATED_TOOLS
from dsh_team.errors import TeamCode, TeamError

if TYPE_CHECKING:
    from host_spec.protocols import Agent
    from host_spec.records import AbortSignal

    from dsh_team.controls.gates import Gates
    from dsh_team.controls.ledger import ControlsState, LiveControls
    from dsh_team.controls.plans import Plans
    from dsh_team.core.snapshots import TeamTaskSnapshot
    from dsh_team.core.state import TeamState
    from dsh_team.log.lifecycle import Lifecycle
    from dsh_team.mode import ModeControl
    from dsh_team.core.task_view import TaskView
    from dsh_team.log.journal import Journal
    from dsh_team.mail.send import SendResult
    from dsh_team.log.membership import Membership
    from dsh_team.worktrees.merge import Merges

__all__ = ["ControlOperations"]


class ControlOperations:
    """Plan approval and quality-gate calls of the Team service (a part of ``TeamService``).

    Attributes:
        controls, gates, plans: The controls fold of each live Lead, the gate runner
            and the plan decisions (set by the service).
    """

    controls: LiveControls
    gates: Gates
    merges: Merges
    plans: Plans
    lifecycle: Lifecycle
    mode: ModeControl

    if TYPE_CHECKING:  # the service's own calls

        def membership(self, agent: Agent) -> Membership: ...
        def try_membership(self, agent: Agent) -> Membership | None: ...
        def _lead(self, membership: Membership) -> Journal: ...
        async def send_message(
            self, caller: Agent, *, target: Any, content: Any, signal: AbortSignal | None = None
        ) -> SendResult: ...
        async def update_task(
            self, caller: Agent, *, task_id: Any, expected_revision: Any, action: Any, subject: Any = None,
            description: Any = None, blocked_by: Any = None, write_scopes: Any = None, owner: Any = None,
            signal: AbortSignal | None = None, gated: bool = True,
        ) -> TaskView: ...

    def controls_state(self, caller: Agent) -> ControlsState:
        """The gate runs and plan approvals of the caller's Team.

        Raises:
            TeamError: ``TEAM_NOT_MEMBER``.
        """
        return self.controls.state(self._lead(self.membership(caller)).session)

    async def plan_step(
        self, caller: Agent, *, plan: Any, target: Any, text: Any, by: Literal["lead", "user"] = "lead",
        signal: AbortSignal | None = None,
    ) -> SendResult:
        """Submit a plan (teammate) or approve/reject one (Lead, or the user through the Lead), then tell the other side.

        Returns the notice's send result (durable once returned).

        Raises:
            TeamError: the codes of :meth:`~dsh_team.controls.plans.Plans.step`, then those of ``send_message``.
        """
        membership = self.membership(caller)
        if not isinstance(target, str) or not isinstance(text, str):
            raise TeamError("plan target and message must be strings", TeamCode.INVALID_ARGUMENT)
        who, notice = await self.plans.step(self._lead(membership), membership, plan, target, text, by)
        return await self.send_message(caller, target=who, content=[text_block(notice)], signal=signal)

    @hookimpl(specname="dsh_tool_pre_call")
    def tool_pre_call(self, agent: Agent, tool: str) -> None:
        """Refuse a write tool of a teammate whose plan is not approved (``TEAM_PLAN_NOT_APPROVED``)."""
        if tool in GATED_TOOLS:
            membership = self.try_membership(agent)
            if membership is not None and not membership.is_lead:
                self.plans.require_approved(self._lead(membership), membership, tool)

    def _gated_complete(
        self, caller: Agent, task_id: Any, decide: Callable[[TeamState, Membership], TeamTaskSnapshot],
        signal: AbortSignal | None,
    ) -> Awaitable[TaskView] | None:
        """The gated run of ``complete`` when the task has gates (``None``: complete it the ordinary way).

        Raises:
            TeamError: ``TEAM_NOT_MEMBER`` (at once).
        """
        membership = self.membership(caller)
        journal = self._lead(membership)
        if not self.gates.applies(journal.state, task_id):
            return None

        def check(state: TeamState) -> None:
            self.lifecycle.admit()
            self.mode.require_enabled(caller, (membership.root, state))
            self.plans.require_approved(journal, membership, "running checks")

        def finish(revision: int) -> Awaitable[TaskView]:
            return self.update_task(caller, task_id=task_id, expected_revision=revision, action="complete", gated=False)

        return self.gates.complete(membership, lambda state: decide(state, membership), check, finish, signal)

    def _controls_started(self, agent: Agent) -> None:
        """A Lead started: recover the gate runs and the merges a crash cut (:meth:`~dsh_team.controls.gates.Gates.recover`,
        :meth:`~dsh_team.worktrees.merge.Merges.recover`)."""
        membership = self.try_membership(agent)
        if membership is None or not membership.is_lead:
            return
        self.gates.agent_started(agent, self._lead(membership), self._complete_ungated, self._notify)
        self.merges.agent_started(agent, self._lead(membership), self._complete_ungated, self._notify)

    async def _complete_ungated(self, lead: Agent, task_id: str, revision: int) -> TaskView:
        return await self.update_task(lead, task_id=task_id, expected_revision=revision, action="complete", gated=False)

    async def _notify(self, lead: Agent, member: str, text: str) -> SendResult:
        return await self.send_message(lead, target=member, content=[text_block(text)])
