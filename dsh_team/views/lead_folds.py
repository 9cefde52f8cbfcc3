"""The folds an offline view reads of a stored Lead log, from its checkpoint when the log confirms it.

``dsh team show`` folds the Team, the cost ledger, the controls and the
permission asks of a stored Lead log. When the reader's store keeps checkpoints
(``host_spec.storage.CheckpointingBackend``) and the view is of the whole log,
the folds start from the checkpoint :func:`dsh_team.checkpoint.load_checked`
confirms and fold only the tail, the same reader and the same check a resume
uses; a view ``--at`` an earlier seq, a damaged log, or no valid checkpoint
folds from the first event. Either way the folds are the ones a full fold gives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from host_spec.storage import CheckpointingBackend

from dsh_team.checkpoint.keeper import load_checked
from dsh_team.controls.ledger import ControlsState, replay_controls
from dsh_team.core.fold import replay
from dsh_team.core.state import TeamState
from dsh_team.cost.ledger import CostLedger, replay_costs
from dsh_team.permissions.ledger import PermissionsState, replay_permissions

if TYPE_CHECKING:
    from host_spec.cli import SessionReader, StoredLog

__all__ = ["LeadFolds", "lead_folds"]


class LeadFolds(NamedTuple):
    """The folds of a Lead log up to one seq, and the seq they started from (0: the first event)."""

    state: TeamState
    ledger: CostLedger
    controls: ControlsState
    permissions: PermissionsState
    start: int


def lead_folds(reader: SessionReader, stored: StoredLog, team_id: str, at: int) -> LeadFolds:
    """The folds of ``stored.events[:at]``, from a confirmed checkpoint when ``at`` is the whole sound log."""
    events = stored.events
    checkpoint = None
    if at == len(events) and stored.damage is None and isinstance(reader, CheckpointingBackend):
        checkpoint = load_checked(reader.checkpoints, stored.header, events)
    if checkpoint is None:
        head = events[:at]
        return LeadFolds(
            replay(head, team_id), replay_costs(head, team_id), replay_controls(head, team_id),
            replay_permissions(head, team_id), 0,
        )
    tail = events[checkpoint.seq : at]
    return LeadFolds(
        replay(tail, team_id, checkpoint.team),
        replay_costs(tail, team_id, checkpoint.costs),
        replay_controls(tail, team_id, checkpoint.controls),
        replay_permissions(tail, team_id, checkpoint.permissions),
        checkpoint.seq,
    )
