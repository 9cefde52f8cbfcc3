"""Cursor waits: the delta a wait returns, and where members' live status last changed.

The durable part of a delta comes from the fold's change index
(:func:`dsh_team.core.delta.team_delta`); the live part (which members may have
started or ended a turn) from :class:`~dsh_team.log.waits.StatusMarks`, fed by
the host's status hook. Member statuses are read exactly the way ``list_agents``
reads them (:class:`~dsh_team.roster.roster.RosterService`), so a delta row and a
re-read row cannot disagree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_team.core.delta import TeamDelta, team_delta
from dsh_team.log.waits import StatusMarks

if TYPE_CHECKING:
    from host_spec.protocols import Agent

    from dsh_team.log.journal import Journal
    from dsh_team.log.journals import Journals
    from dsh_team.log.membership import MembershipResolver
    from dsh_team.roster.roster import RosterService

__all__ = ["CursorDeltas"]


class CursorDeltas:
    """Builds wait deltas and keeps the live-status marks of every Team.

    Args:
        journals: The per-Lead journals (the folded state and its durable position).
        members: Membership resolution (a caller that left the Team gets no delta).
        roster: Roster reads (member statuses as ``list_agents`` shows them).
    """

    def __init__(self, journals: Journals, members: MembershipResolver, roster: RosterService) -> None:
        self.journals = journals
        self.members = members
        self.roster = roster
        self.marks = StatusMarks()

    def opened(self, journal: Journal) -> int:
        """The Team's durable position now, noted as the first one this process knows (once)."""
        self.marks.opened(journal.team_id, journal.position)
        return journal.position

    def status_changed(self, team_id: str, member_id: str) -> None:
        """A member's live status changed: mark it at the Team's durable position now.

        Without a journal (not opened yet) nothing is marked: an unopened Team
        reports every member's status anyway.
        """
        journal = self.journals.find(team_id)
        if journal is not None:
            self.marks.changed(team_id, member_id, self.opened(journal))

    def delta(self, caller: Agent, since: int) -> TeamDelta | None:
        """What changed after ``since`` as ``caller`` sees it; ``None`` when it left the Team or the stream failed."""
        membership = self.members.try_resolve(caller)
        if membership is None:
            return None
        journal = self.journals.get(membership.root.session)
        self.opened(journal)
        state = journal.state
        if state.failure is not None:
            return None
        statuses = {row.id: row.status for row in self.roster.list_members(caller)}
        live = self.marks.after(membership.team_id, since, statuses)
        return team_delta(state, since, caller.id, statuses, live)
