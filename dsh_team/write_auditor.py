"""The Team's answer to the workspace host's write audits: members get a verdict, others none.

The host asks about every file write through the contract's
:class:`~host_spec.workspace.WriteAuditor`; this object finds the writer's Team
and hands its folded state to the pure verdict of :mod:`dsh_team.core.write_audit`.
It lives beside the service, not in the pure core, because it resolves live
memberships and the Team mode.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from host_spec.workspace import WriteAudit

from dsh_team.core.write_audit import audit_write

if TYPE_CHECKING:
    from host_spec.protocols import Agent

    from dsh_team.mode import ModeControl
    from dsh_team.log.membership import MembershipResolver

__all__ = ["TeamWriteAuditor"]


class TeamWriteAuditor:
    """The Team's :class:`~host_spec.workspace.WriteAuditor`: members get a verdict, others none.

    Args:
        members: Resolves the writer's membership (exact live agent).
        mode: Team mode; with it off the Team has no say.
    """

    def __init__(self, members: MembershipResolver, mode: ModeControl) -> None:
        self.members = members
        self.mode = mode

    def audit_write(self, agent: Agent, path: str) -> WriteAudit | None:
        """The verdict, or ``None`` for a non-member, Team mode off, or an unreadable Team stream."""
        membership = self.members.try_resolve(agent)
        if membership is None or not self.mode.is_enabled(agent):
            return None
        state = self.members.state_of(membership.root.session)
        if state.failure is not None:  # a failed stream gives no plan to judge by; the write is not ours to stop
            return None
        return audit_write(state, membership.member_id, membership.name, path)
