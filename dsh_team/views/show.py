"""The offline view of one Team, as ``dsh team show`` prints it.

``dsh team show`` runs in a process that drives no agent: it folds a stored Lead
log with the same pure fold the service uses and renders the result. Two things
follow from being offline, and the output says so rather than guessing:

* live status is unknown, so an ``active`` member (and the Lead) shows as
  ``inactive`` -- the model-facing meaning of that word ("no turn is running
  here") is exactly true of a process that runs none;
* Team mode is shown as recorded: ``enabled`` is ``null`` when the root never
  selected a mode and has no Team records, because the answer then depends on the
  profile's ``team_mode_default``, which a log does not record.

:class:`TeamShow` is also the ``--json`` document. Its keys are snake_case, every
key is always present (``null`` when empty) and ``version`` changes only when a
key's meaning does, so scripts can rely on them. The text rendering is in
:mod:`dsh_team.views.show_text`, the mail part in :mod:`dsh_team.views.show_messages`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

import msgspec

from dsh_team.core.snapshots import MemberPhase, TaskStatus
from dsh_team.core.state import TeamState
from dsh_team.core.task_view import LEAD_NAME, list_views, owner_name
from dsh_team.cost.report import CostReport
from dsh_team.views.controls import ControlsReport
from dsh_team.worktrees.report import WorktreeReport
from dsh_team.views.permissions import PermissionsReport
from dsh_team.views.show_messages import ShowMessage, ShowMessageStatus, pending_messages, recent_messages
from dsh_team.views.writes import ShowWrite
from dsh_team.views.usage import MemberUsage

__all__ = [
    "SHOW_VERSION",
    "OfflineStatus",
    "ShowMember",
    "ShowTask",
    "ShowFailure",
    "ShowStalledTask",
    "ShowQuiescence",
    "TeamShow",
    "offline_status",
    "build_show",
    "show_quiescence",
    "render_json",
]

#: ``TeamShow.version``: bumped only when the meaning of an existing key changes.
SHOW_VERSION: Final = 1

OfflineStatus = Literal["inactive", "provisioning", "failed", "shut down"]

_json: Final = msgspec.json.Encoder()


class ShowMember(msgspec.Struct, frozen=True):
    """One roster row. The Lead comes first (``role`` ``lead``, no description/provider/context).

    ``status`` is the offline status: ``failed`` and ``provisioning`` follow the
    recorded phase, a member released or stopped by a shutdown is ``shut down``, any
    other ``active`` member is ``inactive`` (no process is attached).
    ``pending_mail`` counts messages queued to this member and not yet delivered;
    ``unread_mail`` the delivered ones no completed model step of it has seen yet.
    ``usage`` sums the token usage recorded in the member's own log (``null`` when
    its log could not be read); ``usage.model`` is the model of its latest step.
    """

    id: str
    name: str
    role: Literal["lead", "teammate"]
    status: OfflineStatus
    phase: MemberPhase
    description: str | None
    provider: str | None
    context: Literal["fresh", "fork"] | None
    error: str | None
    pending_mail: int
    usage: MemberUsage | None = None
    unread_mail: int = 0


class ShowTask(msgspec.Struct, frozen=True):
    """One non-deleted task with what the board says about it (readiness, scope warnings)."""

    id: str
    revision: int
    subject: str
    description: str
    status: TaskStatus
    owner_id: str | None
    owner_name: str | None
    blocked_by: tuple[str, ...]
    write_scopes: tuple[str, ...]
    ready: bool
    write_scope_warnings: tuple[str, ...]


class ShowFailure(msgspec.Struct, frozen=True):
    """Why the view stops early.

    Attributes:
        source: ``team`` -- a Team record broke the stream (the fold's ``failure``);
            ``log`` -- the session log itself is damaged at that line.
        message: The fold's failure text or the store's error message.
        seq: The first position that could not be folded.
    """

    source: Literal["team", "log"]
    message: str
    seq: int


class ShowStalledTask(msgspec.Struct, frozen=True):
    """An in-progress task of a quiet Team, with its owner's name (``null`` when not on the roster)."""

    id: str
    owner_id: str
    owner_name: str | None


class ShowQuiescence(msgspec.Struct, frozen=True):
    """The latest ``team/quiescent`` record: when nothing could progress, and what was left undone.

    Attributes:
        seq: Its log position.
        current: ``true`` when no Team change came after it (the Team is still that quiet).
        in_progress: Stalled in-progress tasks.
        ready: Ready task ids nobody claimed.
        failed: Names of members whose provisioning failed.
    """

    seq: int
    current: bool
    in_progress: tuple[ShowStalledTask, ...]
    ready: tuple[str, ...]
    failed: tuple[str, ...]


class TeamShow(msgspec.Struct, frozen=True):
    """The whole view (the ``--json`` document).

    Attributes:
        version: :data:`SHOW_VERSION`.
        team_id: The Lead session id.
        session_id: The session that was asked for (a teammate's id shows its Team).
        log_length: Readable events in the Lead log.
        at: The fold covers seqs ``1..at`` (``--at``, default ``log_length``).
        position: Seq of the last Team record folded (0: none).
        offline: Always ``true``: statuses come from the log, not from running agents.
        enabled: Team mode: the recorded selection, ``true`` for a Team with records,
            ``null`` when the profile's ``team_mode_default`` decides.
        failure: ``null``, or why the shown state is the last valid one.
        members: Lead first, then teammates in creation order.
        tasks: Non-deleted tasks in creation order.
        pending_mail: Undelivered messages in queue order.
        writes: Every member's audited file write, oldest first
            (:mod:`dsh_team.views.writes`).
        messages: The :data:`~dsh_team.views.show_messages.RECENT_MESSAGES` most
            recently queued messages with their status, in queue order.
        costs: Spend per member and per task and the budgets reached, from the
            Lead log's charges (:mod:`dsh_team.cost.report`).
        quiescence: The latest quiescence record, ``null`` when the Team was never quiet.
        controls: Every quality-gate run and plan approval (:mod:`dsh_team.views.controls`),
            ``null`` when the Team had none.
        worktrees: Each worktree member's branch, commits ahead and what remains on disk,
            and every merge (:mod:`dsh_team.worktrees.report`), ``null`` in shared mode.
    """

    version: int
    team_id: str
    session_id: str
    log_length: int
    at: int
    position: int
    offline: bool
    enabled: bool | None
    failure: ShowFailure | None
    members: tuple[ShowMember, ...]
    tasks: tuple[ShowTask, ...]
    pending_mail: tuple[ShowMessage, ...]
    writes: tuple[ShowWrite, ...] = ()
    messages: tuple[ShowMessageStatus, ...] = ()
    costs: CostReport | None = None
    quiescence: ShowQuiescence | None = None
    controls: ControlsReport | None = None
    worktrees: WorktreeReport | None = None
    permissions: PermissionsReport | None = None


def show_quiescence(state: TeamState) -> ShowQuiescence | None:
    """The latest quiescence of ``state`` with member names, or ``None``."""
    found = state.quiescence
    if found is None:
        return None
    stalled = found.stalled
    return ShowQuiescence(
        seq=found.seq,
        current=state.quiet,
        in_progress=tuple(ShowStalledTask(t.id, t.owner_id, owner_name(state, t.owner_id)) for t in stalled.in_progress),
        ready=stalled.ready,
        failed=tuple(owner_name(state, member_id) or member_id for member_id in stalled.failed),
    )


def offline_status(phase: str, gone: bool = False) -> OfflineStatus:
    """The status of a member with ``phase`` (``gone``: it shut down for good) when no process is attached."""
    if gone:
        return "shut down"
    if phase == "failed":
        return "failed"
    if phase == "provisioning":
        return "provisioning"
    return "inactive"


def _enabled(state: TeamState) -> bool | None:
    if state.mode is not None:
        return state.mode
    if len(state.tasks.tasks) or len(state.members.members):
        return True
    return None


def build_show(
    state: TeamState,
    *,
    session_id: str,
    log_length: int,
    at: int,
    damage: tuple[str, int] | None = None,
    writes: tuple[ShowWrite, ...] = (),
    usage: Mapping[str, MemberUsage] | None = None,
    costs: CostReport | None = None,
    controls: ControlsReport | None = None,
    worktrees: WorktreeReport | None = None,
    gone: frozenset[str] = frozenset(),
    permissions: PermissionsReport | None = None,
) -> TeamShow:
    """The view of ``state`` (the Lead log folded up to ``at``).

    Args:
        state: The folded state; a ``failure`` on it becomes a ``team`` failure.
        session_id: The session the user asked for.
        log_length: Readable events in the Lead log.
        at: Last seq folded.
        damage: ``(message, seq)`` when the log is damaged at ``seq <= at + 1``;
            reported as a ``log`` failure unless the fold failed first.
        writes: The members' audited writes (:func:`~dsh_team.views.writes.collect_writes`).
        usage: Member id -> usage folded from its own log (missing ids show ``null``).
        costs: The cost section (:func:`~dsh_team.cost.report.build_report`).
        controls: The controls section (:func:`~dsh_team.views.controls.build_controls`).
        worktrees: The worktree section (:func:`~dsh_team.worktrees.report.build_worktrees`).
        gone: Ids of the members that shut down for good (:func:`~dsh_team.roster.shutdown.gone_members`).
        permissions: The permissions section (:func:`~dsh_team.views.permissions.build_permissions`).
    """
    spent = usage or {}
    mail = state.mail
    lead = ShowMember(
        id=state.team_id, name=LEAD_NAME, role="lead", status="inactive", phase="active",
        description=None, provider=None, context=None, error=None,
        pending_mail=mail.pending_count(state.team_id), usage=spent.get(state.team_id),
        unread_mail=mail.unread_count(state.team_id),
    )
    members = [lead]
    members.extend(
        ShowMember(
            id=m.id, name=m.name, role="teammate", status=offline_status(m.phase, m.id in gone), phase=m.phase,
            description=m.description, provider=m.provider, context=m.context, error=m.error,
            pending_mail=mail.pending_count(m.id), usage=spent.get(m.id), unread_mail=mail.unread_count(m.id),
        )
        for m in state.members.listed()
    )
    tasks = tuple(
        ShowTask(
            id=v.id, revision=v.revision, subject=v.subject, description=v.description, status=v.status,
            owner_id=v.owner_id, owner_name=v.owner_name, blocked_by=v.blocked_by, write_scopes=v.write_scopes,
            ready=v.ready, write_scope_warnings=v.write_scope_warnings,
        )
        for v in list_views(state)
    )
    pending = pending_messages(state)
    failure = None
    if state.failure is not None:
        failure = ShowFailure(source="team", message=state.failure.message, seq=state.failure.seq)
    elif damage is not None:
        failure = ShowFailure(source="log", message=damage[0], seq=damage[1])
    return TeamShow(
        version=SHOW_VERSION, team_id=state.team_id, session_id=session_id, log_length=log_length, at=at,
        position=state.position, offline=True, enabled=_enabled(state), failure=failure,
        members=tuple(members), tasks=tasks, pending_mail=pending, writes=writes, messages=recent_messages(state),
        costs=costs,
        quiescence=show_quiescence(state),
        controls=controls,
        worktrees=worktrees,
        permissions=permissions,
    )


def render_json(show: TeamShow) -> str:
    """The ``--json`` document (indented, keys in declaration order)."""
    return msgspec.json.format(_json.encode(show), indent=2).decode()
