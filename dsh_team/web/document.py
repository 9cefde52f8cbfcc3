"""The page's JSON document: a Lead log folded the way ``dsh team show`` folds it.

The document *is* :class:`~dsh_team.views.show.TeamShow` (same keys, same
meaning, so any front end that reads ``dsh team show --json`` reads this) plus
what only a panel needs:

* ``live`` -- whether statuses come from running agents; when they do, each
  member's ``status`` is ``running`` / ``idle`` for an attached agent, else the
  offline status, and ``offline`` is ``false``;
* ``layers`` -- the task DAG in layers (a task sits one layer below its deepest
  listed blocker), so the page only draws;
* ``timeline`` -- Team changes with their cause (:mod:`dsh_team.web.timeline`);
* ``queued_at`` on each pending message and ``as_of`` (time of the last folded
  event), so the page can show a message's age, live or at any past position;
* ``message_status`` -- ``queued`` / ``delivered`` / ``read`` now, for every
  message the timeline window names (the page marks each send with it).

``costs`` is ``dsh team show``'s cost section, folded from the same Lead log (a
new charge is a ``team`` change, so a live panel shows spend as it happens).

:class:`PanelFold` folds incrementally: it keeps the state and the recent
timeline (at least :data:`TIMELINE_KEPT` entries, never the whole history) and
only ever reads events after its position, so a watcher costs one ``evolve`` per
new event, never a re-scan.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec

from host_spec.events import Event

from dsh_team.core.fold import evolve
from dsh_team.core.state import TeamState, initial_state
from dsh_team.core.records import TEAM_MESSAGE_DELIVERED, TEAM_MESSAGE_QUEUED, TEAM_MESSAGE_READ
from dsh_team.cost.ledger import CostLedger, fold_cost
from dsh_team.controls.ledger import ControlsState, fold_controls
from dsh_team.cost.report import build_report
from dsh_team.log.member_records import fold_latest
from dsh_team.roster.shutdown import GONE, SHUTDOWN_RECORDS, TEAM_SHUTDOWN, ShutdownRecord
from dsh_team.views.controls import build_controls
from dsh_team.views.permissions import build_permissions
from dsh_team.permissions.ledger import PermissionsState, fold_permissions
from dsh_team.views.show import ShowTask, build_show, offline_status
from dsh_team.views.show_messages import pending_messages
from dsh_team.views.usage import MemberUsage
from dsh_team.views.writes import ShowWrite
from dsh_team.web.timeline import TimelineEntry, timeline_entry
from dsh_team.worktrees.records import TEAM_MERGE, TEAM_WORKTREE
from dsh_team.worktrees.report import build_worktrees

if TYPE_CHECKING:
    from host_spec.worktrees import Worktrees

__all__ = [
    "Change",
    "PanelFold",
    "LiveStatus",
    "dag_layers",
    "document",
    "mail_delta",
    "member_statuses",
    "message_statuses",
    "plain",
]

#: The worktree side records the panel keeps (``worktrees`` of the document).
_WORKTREE_RECORDS: Final = frozenset({TEAM_WORKTREE, TEAM_MERGE})

#: How many timeline entries a full document carries (the newest; deltas carry all new ones).
TIMELINE_WINDOW: Final = 300

#: Timeline entries a fold keeps at least (between this and twice this): more than a
#: document shows, so a watcher further behind than the kept ones is one that gets a snapshot anyway.
TIMELINE_KEPT: Final = 2 * TIMELINE_WINDOW

#: ``member_id -> "running" | "idle"`` for attached agents, ``None`` when not attached.
LiveStatus = Callable[[str], "Literal['running', 'idle'] | None"]

Change = Literal["none", "team", "mail"]

_MAIL_RECORDS: Final = frozenset({TEAM_MESSAGE_QUEUED, TEAM_MESSAGE_DELIVERED, TEAM_MESSAGE_READ})

_to_builtins: Final = msgspec.to_builtins


def plain(value: Any) -> Any:
    """``value`` (Structs, tuples) as JSON-ready builtins."""
    return _to_builtins(value)


def dag_layers(tasks: Sequence[ShowTask]) -> list[list[str]]:
    """Task ids by layer: layer 0 has no listed blocker, layer n+1 is blocked by layer <= n.

    Blockers that are not listed (deleted tasks) are ignored. The board refuses
    cycles, so every task gets a layer; the loop is bounded by the task count anyway.
    """
    listed = {task.id: task for task in tasks}
    depth: dict[str, int] = {}
    for _ in range(len(tasks)):
        changed = False
        for task in tasks:
            blockers = [depth.get(b, -1) if b in listed else -1 for b in task.blocked_by]
            level = 1 + max(blockers, default=-1)
            if depth.get(task.id) != level:
                depth[task.id] = level
                changed = True
        if not changed:
            break
    layers: list[list[str]] = [[] for _ in range(1 + max(depth.values(), default=-1))]
    for task in tasks:
        layers[depth[task.id]].append(task.id)
    return layers


class PanelFold:
    """The incrementally folded Lead log of one Team, with its timeline.

    Args:
        team_id: The Lead session id.
    """

    def __init__(self, team_id: str) -> None:
        self.team_id = team_id
        self.state: TeamState = initial_state(team_id)
        self.seq = 0
        self.time = 0
        self.timeline: list[TimelineEntry] = []  # the newest entries (see TIMELINE_KEPT)
        self.dropped = 0  # seq of the newest entry let go (0: none)
        self.queued_at: dict[str, int] = {}  # pending message id -> time of its queued record
        self.ledger = CostLedger(team_id)
        self.controls = ControlsState(team_id)
        #: The ``team/worktree`` and ``team/merge`` records folded so far (a few per member).
        self.worktree_records: list[Event] = []
        #: Member id -> its latest ``team/shutdown`` record (who shut down for good).
        self.shutdowns: dict[str, ShutdownRecord] = {}
        self.permissions = PermissionsState(team_id)
        #: The log last folded from (a view, never a copy): a deleted task's whole snapshot is read there.
        self.events: Sequence[Event] = ()

    def advance(self, events: Sequence[Event], upto: int) -> Change:
        """Fold ``events[seq:upto]``; says whether the roster/board/mode changed, only the mailbox, or nothing.

        Decided by the kinds of the records that changed the state, not by object
        identity: :func:`~dsh_team.core.fold.evolve` may hand back an equal state
        another reader folded, whose collections are equal but not the same objects.
        """
        change: Change = "none"
        self.events = events
        state = self.state
        ledger = self.ledger
        controls = self.controls
        permissions = self.permissions
        for event in events[self.seq : upto]:
            charged = fold_cost(ledger, event)
            if charged is not ledger:
                ledger, change = charged, "team"
            gated = fold_controls(controls, event)
            if gated is not controls:
                controls, change = gated, "team"
            if event.type in _WORKTREE_RECORDS:
                self.worktree_records.append(event)
            if event.type == TEAM_SHUTDOWN:
                fold_latest(SHUTDOWN_RECORDS, (event,), self.team_id, self.shutdowns)
                change = "team"
            asked = fold_permissions(permissions, event)
            if asked is not permissions:
                permissions, change = asked, "team"
            after = evolve(state, event)
            entry = timeline_entry(state, after, event)
            if entry is not None:
                self.timeline.append(entry)
                if after.failure is None and event.type in _MAIL_RECORDS:
                    change = "mail" if change == "none" else change
                    if event.type == TEAM_MESSAGE_QUEUED:
                        self.queued_at[event.value()["message"]["id"]] = event.time
                    elif event.type == TEAM_MESSAGE_DELIVERED:  # only pending mail shows its age
                        self.queued_at.pop(event.value()["message_id"], None)
                else:
                    change = "team"
            state = after
            self.time = event.time
        self.seq = max(self.seq, upto)
        self.state = state
        self.ledger = ledger
        self.controls = controls
        self.permissions = permissions
        timeline = self.timeline
        if len(timeline) > 2 * TIMELINE_KEPT:  # trimmed in batches: amortised O(1) per entry
            self.dropped = timeline[-TIMELINE_KEPT - 1].seq
            del timeline[:-TIMELINE_KEPT]
        return change

    def gone(self) -> frozenset[str]:
        """Ids of the members that shut down for good (released or stopped), as folded so far."""
        return frozenset(member_id for member_id, record in self.shutdowns.items() if record.phase in GONE)

    def entries_after(self, seq: int) -> list[TimelineEntry] | None:
        """Timeline entries with a position after ``seq`` (what a resuming watcher missed).

        ``None`` when some of them were let go (more than :data:`TIMELINE_KEPT` came
        after ``seq``): such a watcher needs a snapshot.
        """
        if self.dropped > seq:
            return None
        timeline = self.timeline
        low, high = 0, len(timeline)
        while low < high:
            middle = (low + high) // 2
            if timeline[middle].seq <= seq:
                low = middle + 1
            else:
                high = middle
        return timeline[low:]


def member_statuses(fold: PanelFold, live: LiveStatus) -> dict[str, str]:
    """``member id -> status``: ``running`` / ``idle`` for an attached agent, else the offline status.

    ``failed`` and ``provisioning`` are durable phases and win over attachment.
    """
    statuses: dict[str, str] = {fold.team_id: live(fold.team_id) or "inactive"}
    gone = fold.gone()
    for member in fold.state.members.listed():
        status = offline_status(member.phase, member.id in gone)
        statuses[member.id] = (live(member.id) or status) if status == "inactive" else status
    return statuses


def document(
    fold: PanelFold,
    *,
    log_length: int,
    live: LiveStatus | None = None,
    enabled: bool | None = None,
    damage: tuple[str, int] | None = None,
    writes: tuple[ShowWrite, ...] = (),
    usage: Mapping[str, MemberUsage] | None = None,
    git: Worktrees | None = None,
) -> dict[str, Any]:
    """The page document of ``fold`` (the Team at ``fold.seq`` of a log of ``log_length``).

    Args:
        fold: The folded log.
        log_length: Events in the Lead log (the slider's end).
        live: Live statuses of attached agents; ``None`` for a stored run.
        enabled: Team mode as the live service reports it (``None``: as recorded in the log).
        damage: A damaged log's ``(message, seq)`` (see :func:`~dsh_team.views.show.build_show`).
        writes: The members' audited writes (``writes[]`` of ``dsh team show``).
        usage: Token usage by member id (``members[].usage``).
        git: The host's git, for worktree members' commits ahead (``worktrees`` of ``dsh team show``).
    """
    show = build_show(fold.state, session_id=fold.team_id, log_length=log_length, at=fold.seq, damage=damage,
                      writes=writes, usage=usage, costs=build_report(fold.state, fold.ledger, events=fold.events),
                      controls=build_controls(fold.controls),
                      worktrees=build_worktrees(fold.worktree_records, fold.team_id, lambda: git),
                      gone=fold.gone(), permissions=build_permissions(fold.permissions))
    doc: dict[str, Any] = _to_builtins(show)
    if live is not None:
        doc["offline"] = False
        statuses = member_statuses(fold, live)
        for member in doc["members"]:
            member["status"] = statuses[member["id"]]
    if enabled is not None:
        doc["enabled"] = enabled
    doc["live"] = live is not None
    doc["as_of"] = fold.time
    doc["layers"] = dag_layers(show.tasks)
    doc["pending_mail"] = _pending(fold)
    window = fold.timeline[-TIMELINE_WINDOW:]
    doc["timeline"] = _to_builtins(window)
    doc["message_status"] = message_statuses(fold, window)
    return doc


def message_statuses(fold: PanelFold, entries: Sequence[TimelineEntry]) -> dict[str, str]:
    """``message id -> status`` (as of the fold) for every message ``entries`` name.

    Entries name only messages of applied records, so each was queued: one the
    mailbox no longer holds was read.
    """
    status = fold.state.mail.status
    return {entry.message_id: status(entry.message_id) for entry in entries if entry.message_id is not None}


def _pending(fold: PanelFold) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = _to_builtins(pending_messages(fold.state))
    for message in rows:
        message["queued_at"] = fold.queued_at.get(message["id"])
    return rows


def mail_delta(fold: PanelFold, *, log_length: int, entries: Sequence[TimelineEntry] = ()) -> dict[str, Any]:
    """What a mailbox-only change touches: pending mail, each member's pending and unread
    counts, and the status of the messages the new timeline ``entries`` name.

    Built from the mailbox alone (no roster or board work), so busy mail traffic
    costs a watcher only the mail it carries.
    """
    mail = fold.state.mail
    ids = [fold.team_id, *fold.state.members.members]
    return {"at": fold.seq, "log_length": log_length, "as_of": fold.time,
            "pending_mail": _pending(fold), "pending_counts": {key: mail.pending_count(key) for key in ids},
            "unread_counts": {key: mail.unread_count(key) for key in ids},
            "message_status": message_statuses(fold, entries)}
