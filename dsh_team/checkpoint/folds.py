"""The Team service's live folds, captured into a checkpoint and restored from one.

Each fold the service keeps for a Lead session holds a ``(session, count,
state)`` cursor (the Team journal, the controls, permissions and cost folds, the
four side-record books). :class:`LiveFolds` names them once: :meth:`capture`
reads each at the session's last event into one
:class:`~dsh_team.checkpoint.codec.TeamCheckpoint`, and :meth:`restore` sets
each cursor to a checked checkpoint's seq and state, so the next read of any
fold folds only the tail, exactly as it would have continued in the process that
wrote the checkpoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from dsh_team.checkpoint.codec import SCHEMA, TeamCheckpoint, mark_of
from dsh_team.core.state import initial_state

if TYPE_CHECKING:
    from host_spec.protocols import Session

    from dsh_team.controls.ledger import LiveControls
    from dsh_team.cost.ledger import LiveLedgers
    from dsh_team.log.journals import Journals
    from dsh_team.permissions.ledger import LivePermissions
    from dsh_team.roster.roles import RoleBook
    from dsh_team.roster.shutdown import ShutdownBook
    from dsh_team.worktrees.merge import MergeBook
    from dsh_team.worktrees.room import WorktreeBook

__all__ = ["LiveFolds"]


@attrs.frozen
class LiveFolds:
    """Every fold the Team service keeps per Lead session."""

    journals: Journals
    controls: LiveControls
    permissions: LivePermissions
    costs: LiveLedgers
    roles: RoleBook
    shutdowns: ShutdownBook
    worktrees: WorktreeBook
    merges: MergeBook

    def capture(self, session: Session) -> TeamCheckpoint | None:
        """Every fold of ``session`` at its last event, or ``None`` when it leads no Team.

        A session whose Team fold is still the empty Team (a member's own log, a
        root that never used Team tools) gets no checkpoint: its other folds are
        not even built.
        """
        team = self.journals.get(session).state
        if team == initial_state(session.id):
            return None
        seq = session.last_seq
        return TeamCheckpoint(
            schema=SCHEMA,
            team_id=session.id,
            seq=seq,
            mark=mark_of(session.header, session.events[seq - 1]),
            team=team,
            controls=self.controls.state(session),
            permissions=self.permissions.state(session),
            costs=self.costs.ledger(session),
            # Copies: a book keeps folding into its own dict, the writer thread encodes this one.
            roles=dict(self.roles.latest(session)),
            shutdowns=dict(self.shutdowns.latest(session)),
            worktrees=dict(self.worktrees.latest(session)),
            merges=dict(self.merges.latest(session)),
        )

    def restore(self, session: Session, checkpoint: TeamCheckpoint) -> None:
        """Start every fold of ``session`` from ``checkpoint`` (checked against its log by the caller)."""
        seq = checkpoint.seq
        self.journals.seed(session, seq, checkpoint.team)
        self.controls.restore(session, seq, checkpoint.controls)
        self.permissions.restore(session, seq, checkpoint.permissions)
        self.costs.restore(session, seq, checkpoint.costs)
        self.roles.restore(session, seq, checkpoint.roles)
        self.shutdowns.restore(session, seq, checkpoint.shutdowns)
        self.worktrees.restore(session, seq, checkpoint.worktrees)
        self.merges.restore(session, seq, checkpoint.merges)
