"""Plan approval: a plan-gated teammate may not write until the Lead (or the user) approved its plan.

A teammate spawned with ``plan_approval`` (or under a profile whose default is on)
starts in planning: the host's ``dsh_tool_pre_call`` veto refuses its write tools
(``write_file``, ``edit_file``, ``bash``) with ``TEAM_PLAN_NOT_APPROVED``, and a
gated completion refuses to run its checks. It reads, explores and sends its plan
to the Lead (``send_message`` with ``plan: "submit"``); the Lead answers with
``plan: "approve"`` or ``"reject"`` and feedback (the user can do the same from the
web panel). A rejection returns it to planning with the feedback; a revised plan
may be submitted at any time before approval.

Every step is a ``team/plan`` record in the Lead log (:mod:`.records`), so the
state is a fold and survives a crash and resume; ``required`` is written before
the teammate exists, so there is no moment in which it could write ungated. Each
step is followed by a Team message (the plan to the Lead, the decision to the
teammate) that wakes the reader; the record is the truth, the message the notice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

from dsh_team.controls.records import CONTROLS_VERSION, TEAM_PLAN, PlanAction, PlanRecord
from dsh_team.errors import TeamCode, TeamError
from dsh_team.log.journal import Append

if TYPE_CHECKING:
    from dsh_team.controls.ledger import ControlsState, LiveControls
    from dsh_team.core.snapshots import TeamMemberSnapshot
    from dsh_team.core.state import TeamState
    from dsh_team.log.journal import Journal
    from dsh_team.log.membership import Membership

__all__ = [
    "GATED_TOOLS", "PLAN_STEPS", "Plans", "active_teammate", "decide_plan", "decide_step", "not_approved", "notice",
    "step_action",
]

#: The tools a teammate in planning may not call.
GATED_TOOLS: Final = frozenset({"write_file", "edit_file", "bash"})
#: ``send_message``'s ``plan`` values and the step each records.
PLAN_STEPS: Final[dict[str, PlanAction]] = {"submit": "submitted", "approve": "approved", "reject": "rejected"}
PLAN_TEXT_MAX: Final = 16384


def not_approved(name: str, what: str) -> TeamError:
    """``TEAM_PLAN_NOT_APPROVED`` for ``name`` trying ``what``."""
    return TeamError(
        f'{what} needs an approved plan: send your plan with send_message(target="lead", plan="submit") '
        "and wait for the Lead's approval",
        TeamCode.PLAN_NOT_APPROVED,
        member=name,
    )


class Plans:
    """The plan-approval decisions (a part of the Team service); every step goes through the Lead's journal."""

    def __init__(self, controls: LiveControls) -> None:
        self.controls = controls

    def may_write(self, journal: Journal, membership: Membership) -> bool:
        """Whether ``membership``'s member may write now (the Lead always may)."""
        return membership.is_lead or self.controls.state(journal.session).may_write(membership.name)

    def require_approved(self, journal: Journal, membership: Membership, what: str) -> None:
        """Raise ``TEAM_PLAN_NOT_APPROVED`` unless the member may write."""
        if not self.may_write(journal, membership):
            raise not_approved(membership.name, what)

    async def require(self, journal: Journal, team_id: str, name: str) -> None:
        """Record that the teammate ``name`` (about to be spawned) needs plan approval.

        A record left by an earlier spawn of the name that never started its teammate
        is kept (nothing is appended twice).

        Raises:
            TeamError: ``TEAM_MEMBER_NAME_TAKEN`` when ``name`` is on the roster already (its
                approval cannot begin after it started), whatever the journal raises.
        """

        def decide(state: TeamState) -> Append | None:
            if state.members.by_name(name) is not None:
                raise TeamError(f'team member name "{name}" is taken', TeamCode.MEMBER_NAME_TAKEN, name=name)
            if self.controls.state(journal.session).plan(name) is not None:
                return None  # recorded by a spawn of this name that did not start its teammate
            return Append(TEAM_PLAN, PlanRecord(
                version=CONTROLS_VERSION, team_id=team_id, member=name, action="required", by="lead"
            ))

        await journal.transact(decide, what=f"the plan approval of {name}")

    async def step(
        self, journal: Journal, membership: Membership, plan: Any, target: str, text: str,
        by: Literal["lead", "user"] = "lead",
    ) -> tuple[str, str]:
        """Record one plan step; returns ``(who to tell, what to tell them)``.

        ``submit``: the caller (a plan-gated teammate, not approved yet) sends ``text``
        as its plan to ``target`` ``lead``. ``approve``/``reject``: the Lead decides on
        the plan ``target`` submitted, ``text`` being the feedback.

        Raises:
            TeamError: ``TEAM_INVALID_ARGUMENT`` (an unknown step, a plan too long),
                ``TEAM_LEAD_REQUIRED`` (a teammate deciding), ``TEAM_PLAN_INVALID`` (no
                plan approval for that member, or not in the step's state).
        """
        action = step_action(plan, text)
        if action == "submitted":
            if membership.is_lead or target != "lead":
                raise TeamError('a teammate submits its plan to target "lead"', TeamCode.PLAN_INVALID)
            member, who = membership.name, membership.name
        else:
            if not membership.is_lead:
                raise TeamError("only the Team Lead approves or rejects a plan", TeamCode.LEAD_REQUIRED)
            member, who = target, by

        def decide(state: TeamState) -> Append:
            controls = self.controls.state(journal.session)
            return Append(TEAM_PLAN, decide_plan(state, controls, membership.team_id, member, action, who, text))

        await journal.transact(decide, what=f"the plan of {member}")
        return notice(action, member, text)


def step_action(plan: Any, text: str) -> PlanAction:
    """The step ``plan`` (``submit``, ``approve``, ``reject``) records.

    Raises:
        TeamError: ``TEAM_INVALID_ARGUMENT`` (an unknown step, a plan too long).
    """
    action = PLAN_STEPS.get(plan) if isinstance(plan, str) else None
    if action is None:
        raise TeamError(f"unknown plan step {plan!r}", TeamCode.INVALID_ARGUMENT, field="plan")
    if len(text) > PLAN_TEXT_MAX:
        raise TeamError(f"a plan message has at most {PLAN_TEXT_MAX} characters", TeamCode.INVALID_ARGUMENT)
    return action


def decide_plan(
    state: TeamState, controls: ControlsState, team_id: str, member: str, action: PlanAction, by: str, text: str
) -> PlanRecord:
    """The ``team/plan`` record of one step, judged on the Team and its controls.

    Pure, and the one decision both the live service (``send_message(plan=...)``) and
    ``dsh team plan`` make, so they answer alike: a decision on a name that is no active
    teammate is ``TEAM_MEMBER_NOT_FOUND`` (before asking whether it has a plan), then
    :func:`decide_step` judges the plan's state. A submission is the caller's own.

    Raises:
        TeamError: ``TEAM_MEMBER_NOT_FOUND``, ``TEAM_PLAN_INVALID``.
    """
    if action != "submitted":
        active_teammate(state, member)
    return decide_step(controls, team_id, member, action, by, text)


def active_teammate(state: TeamState, name: str) -> TeamMemberSnapshot:
    """The active teammate called ``name``.

    Raises:
        TeamError: ``TEAM_MEMBER_NOT_FOUND`` (no such member, or not active).
    """
    row = state.members.by_name(name)
    if row is None or row.phase != "active":
        raise TeamError(f'active teammate "{name}" not found', TeamCode.MEMBER_NOT_FOUND, target=name)
    return row


#: Where a member's approval stands, in the words a user reads (not the record's state names).
_STANDING: Final[Mapping[PlanAction, str]] = {
    "required": "has not submitted a plan yet",
    "submitted": "has a plan waiting for a decision",
    "approved": "already has an approved plan",
    "rejected": "has not submitted a plan since the last was rejected",
}


def decide_step(
    controls: ControlsState, team_id: str, member: str, action: PlanAction, by: str, text: str
) -> PlanRecord:
    """The ``team/plan`` record of ``member``'s next step, if its approval is in the state the step follows.

    Pure: the live service and ``dsh team plan`` (a decision written while no run is live) decide alike.

    Raises:
        TeamError: ``TEAM_PLAN_INVALID``.
    """
    current = controls.plan(member)
    if current is None:
        raise TeamError(f'"{member}" was not spawned with plan_approval', TeamCode.PLAN_INVALID, member=member)
    allowed = ("required", "rejected", "submitted") if action == "submitted" else ("submitted",)
    if current.status not in allowed:
        verb = {"submitted": "submit", "approved": "approve", "rejected": "reject", "required": "require"}[action]
        raise TeamError(f'"{member}" {_STANDING[current.status]}: cannot {verb} it', TeamCode.PLAN_INVALID,
                        member=member)
    return PlanRecord(version=CONTROLS_VERSION, team_id=team_id, member=member, action=action, by=by, text=text)


def notice(action: PlanAction, member: str, text: str) -> tuple[str, str]:
    """Who is told of a plan step, and the Team message they get."""
    if action == "submitted":
        return "lead", f"Plan from {member} for approval (answer with plan approve or reject):\n{text}"
    if action == "approved":
        return member, f"Your plan is approved; you may write now. {text}".rstrip()
    feedback = f" Feedback: {text}" if text.strip() else ""
    return member, f"Your plan was rejected; revise it and submit again.{feedback}"
