"""The transition rules of the Team fold: one pure function per Team record type.

Each rule takes the state before, the event and its strictly decoded current
record, and returns the next state or the :class:`~dsh_team.core.fold_failure.FoldFailure`
the record causes (the fold turns that into a failed state). Rules replace only
the collection they touch; :mod:`dsh_team.core.fold` dispatches to them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

import immutables

from host_spec.events import Event

from dsh_team.config import MAX_SAFE_INTEGER
from dsh_team.core.dag import check_candidate, relink
from dsh_team.core.records import (
    TEAM_MEMBER,
    TEAM_MESSAGE_DELIVERED,
    TEAM_MESSAGE_QUEUED,
    TEAM_MESSAGE_READ,
    TEAM_MODE,
    TEAM_QUIESCENT,
    TEAM_TASK,
    MemberRecord,
    MessageDeliveredRecord,
    MessageQueuedRecord,
    MessageReadRecord,
    ModeRecord,
    QuiescentRecord,
    TaskRecord,
)
from dsh_team.core.snapshots import TeamTaskSnapshot, numeric_task_number
from dsh_team.core.changes import SentMessage
from dsh_team.core.quiescence import durably_quiet, stalled_work
from dsh_team.core.fold_failure import FoldFailure, FoldRule
from dsh_team.core.mailbox import Mailbox
from dsh_team.core.persistent import EMPTY, Memo
from dsh_team.core.state import Board, Quiescence, Roster, TeamState
from dsh_team.core.tombstones import DELETED, tombstone

__all__ = ["RULES", "TransitionRule"]

#: The fold rule a DAG violation kind breaks.
_DAG_RULES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "self": FoldRule.TASK_DEPENDENCY_CYCLE,
        "cycle": FoldRule.TASK_DEPENDENCY_CYCLE,
        "duplicate": FoldRule.TASK_DUPLICATE_BLOCKER,
        "missing": FoldRule.TASK_MISSING_BLOCKER,
    }
)

TransitionRule = Callable[[TeamState, Event, Any], "TeamState | FoldFailure"]


# ---------------------------------------------------------------- transition rules


def _member(state: TeamState, event: Event, record: MemberRecord) -> TeamState | FoldFailure:
    member = record.member
    roster = state.members
    member_id, name = member.id, member.name
    owner = roster.names.get(name)
    seq = event.seq
    if owner is not None and owner != member_id:
        return FoldFailure(FoldRule.MEMBER_NAME_REUSED, f'team member name "{name}" is reused by another member', seq)
    previous = roster.members.get(member_id)
    if previous is None:
        if member.phase != "provisioning":
            return FoldFailure(
                FoldRule.MEMBER_MUST_BEGIN_PROVISIONING, f'team member "{member_id}" must begin provisioning', seq
            )
        roster = Roster(
            roster.members.set(member_id, member),
            roster.order.set(member_id, len(roster.order)),
            roster.names.set(name, member_id),
            Memo(),
        )
    else:
        if (previous.name, previous.provider, previous.context) != (name, member.provider, member.context):
            return FoldFailure(
                FoldRule.MEMBER_IDENTITY_CHANGED, f'team member "{member_id}" changed immutable identity fields', seq
            )
        if previous.phase != "provisioning" or member.phase == "provisioning":
            return FoldFailure(
                FoldRule.MEMBER_INVALID_TRANSITION,
                f'team member "{member_id}" has an invalid {previous.phase} -> {member.phase} transition',
                seq,
            )
        roster = Roster(roster.members.set(member_id, member), roster.order, roster.names, Memo())
    changes = state.changes.member(member_id, seq)
    return TeamState(state.team_id, roster, state.tasks, state.mail, state.mode, None, seq, changes, state.quiescence)


def _apply_task(board: Board, task: TeamTaskSnapshot, previous: TeamTaskSnapshot | None) -> Board:
    """The board with an already validated task snapshot substituted."""
    task_id = task.id
    order = board.order
    live = board.live
    number = board.next_task_number
    if previous is None:
        order = order.set(task_id, len(order))
        allocated = numeric_task_number(task_id)
        if allocated is not None and allocated >= number:
            number = allocated if allocated == MAX_SAFE_INTEGER else allocated + 1
    was_live = previous is not None and previous.status != DELETED
    if was_live != (task.status != DELETED):
        live = live.delete(task_id) if was_live else live.set(task_id, order[task_id])
    return Board(
        board.tasks.set(task_id, tombstone(task) if task.status == DELETED else task),
        order,
        live,
        relink(board.dependents, task, previous),
        number,
        Memo(),
    )


def _task(state: TeamState, event: Event, record: TaskRecord) -> TeamState | FoldFailure:
    task = record.task
    board = state.tasks
    previous = board.tasks.get(task.id)
    if previous is None:
        if task.revision != 1:
            return FoldFailure(
                FoldRule.TASK_MUST_BEGIN_AT_REVISION_1, f'team task "{task.id}" must begin at revision 1', event.seq
            )
    elif task.revision != previous.revision + 1:
        return FoldFailure(
            FoldRule.TASK_REVISION_NOT_CONTIGUOUS,
            f'team task "{task.id}" revision is not contiguous ({task.revision} after {previous.revision})',
            event.seq,
        )
    violation = check_candidate(board, task, previous)
    if violation is not None:
        return FoldFailure(_DAG_RULES[violation.kind], violation.message, event.seq)
    board = _apply_task(board, task, previous)
    changes = state.changes.task(task.id, event.seq)
    return TeamState(
        state.team_id, state.members, board, state.mail, state.mode, None, event.seq, changes, state.quiescence
    )


def _queued(state: TeamState, event: Event, record: MessageQueuedRecord) -> TeamState | FoldFailure:
    message = record.message
    mail = state.mail
    message_id = message.id
    seq = event.seq
    index, legacy = record.index, mail.legacy
    if message_id in mail.messages or message_id in legacy or (index is not None and index < mail.next_index):
        return FoldFailure(FoldRule.MESSAGE_QUEUED_TWICE, f'team message "{message_id}" was queued twice', seq)
    if index is None:  # an older record: numbered here, its id remembered for the rule above
        index, legacy = mail.next_index, legacy.set(message_id, None)
    elif index > mail.next_index:
        return FoldFailure(
            FoldRule.MESSAGE_INDEX_SKIPPED,
            f'team message "{message_id}" has queue index {index}, the next one is {mail.next_index}', seq,
        )
    target = message.target_id
    pending = mail.pending
    mail = Mailbox(
        mail.messages.set(message_id, message),
        pending.set(target, pending.get(target, EMPTY).set(message_id, index)),
        mail.unread,
        mail.read,
        index + 1,
        legacy,
    )
    entry = SentMessage(message_id, message.sender_name, target, index, seq)
    changes = state.changes.queued(message.sender_id, entry)
    return TeamState(state.team_id, state.members, state.tasks, mail, state.mode, None, seq, changes, state.quiescence)


def _take(
    by_target: immutables.Map[str, immutables.Map[str, int]], target: str, waiting: immutables.Map[str, int],
    message_id: str,
) -> tuple[int, immutables.Map[str, immutables.Map[str, int]]]:
    """``message_id``'s index in ``waiting`` (``by_target[target]``) and ``by_target`` without it.

    A target whose map becomes empty leaves ``by_target``, so "has pending or unread
    mail" stays a plain membership test.
    """
    remaining = waiting.delete(message_id)
    rest = by_target.set(target, remaining) if len(remaining) else by_target.delete(target)
    return waiting[message_id], rest


def _delivered(state: TeamState, event: Event, record: MessageDeliveredRecord) -> TeamState | FoldFailure:
    mail = state.mail
    message_id, target = record.message_id, record.target_id
    message = mail.messages.get(message_id)
    if message is None:  # never queued, or read already (a settled message is not kept)
        return FoldFailure(
            FoldRule.MESSAGE_DELIVERED_BEFORE_QUEUED,
            f'team message "{message_id}" was delivered before queueing (or after it was read)', event.seq,
        )
    if message.target_id != target:
        return FoldFailure(FoldRule.MESSAGE_TARGET_CHANGED, f'team message "{message_id}" target changed', event.seq)
    # An open message is undelivered exactly while it is in its target's pending map.
    waiting = mail.pending.get(target)
    if waiting is None or message_id not in waiting:
        return FoldFailure(FoldRule.MESSAGE_DELIVERED_TWICE, f'team message "{message_id}" was delivered twice', event.seq)
    index, pending = _take(mail.pending, target, waiting, message_id)
    unread = mail.unread.set(target, mail.unread.get(target, EMPTY).set(message_id, index))
    mail = Mailbox(mail.messages, pending, unread, mail.read, mail.next_index, mail.legacy)
    changes = state.changes.delivered(message.sender_id, message_id, event.seq)
    return TeamState(
        state.team_id, state.members, state.tasks, mail, state.mode, None, event.seq, changes, state.quiescence
    )


def _read(state: TeamState, event: Event, record: MessageReadRecord) -> TeamState | FoldFailure:
    mail = state.mail
    message_id, target = record.message_id, record.target_id
    message = mail.messages.get(message_id)
    # Not open (never queued, or read already: settled) or still pending: not delivered now.
    if message is None or message_id in mail.pending.get(message.target_id, EMPTY):
        return FoldFailure(
            FoldRule.MESSAGE_READ_BEFORE_DELIVERED,
            f'team message "{message_id}" was read before delivery (or read already)', event.seq,
        )
    if message.target_id != target:
        return FoldFailure(FoldRule.MESSAGE_TARGET_CHANGED, f'team message "{message_id}" target changed', event.seq)
    # Open and delivered: it waits in its target's unread map; the receipt settles it.
    _, unread = _take(mail.unread, target, mail.unread[target], message_id)
    mail = Mailbox(
        mail.messages.delete(message_id), mail.pending, unread, mail.read.set(target, mail.read.get(target, 0) + 1),
        mail.next_index, mail.legacy,
    )
    # A receipt keeps ``position``: it must not wake a wait once per message read; the
    # change index still records it at its own seq (the counts and the status moved).
    changes = state.changes.read(message.sender_id, message_id, event.seq)
    return TeamState(
        state.team_id, state.members, state.tasks, mail, state.mode, None, state.position, changes, state.quiescence
    )


def _mode(state: TeamState, event: Event, record: ModeRecord) -> TeamState | FoldFailure:
    # A mode selection is not Team activity: it keeps ``position`` so waits (and
    # ``since`` cursors) never fire on it; a mode change ends no wait.
    return TeamState(
        state.team_id, state.members, state.tasks, state.mail, record.enabled, None, state.position, state.changes,
        state.quiescence,
    )


def _quiescent(state: TeamState, event: Event, record: QuiescentRecord) -> TeamState | FoldFailure:
    # The durable half of quiescence is checked here; the live half (nobody running)
    # only the writer can see. The stalled list must be the one this state implies.
    seq = event.seq
    if state.quiet:
        return FoldFailure(FoldRule.QUIESCENCE_REPEATED, "team quiescence recorded twice without a change", seq)
    if not durably_quiet(state):
        return FoldFailure(
            FoldRule.QUIESCENCE_WHILE_BUSY, "team quiescence recorded while mail or provisioning is open", seq
        )
    if record.stalled != stalled_work(state):
        return FoldFailure(
            FoldRule.QUIESCENCE_STALLED_MISMATCH, "team quiescence lists other stalled work than the board", seq
        )
    quiescence = Quiescence(seq, record.stalled)
    return TeamState(
        state.team_id, state.members, state.tasks, state.mail, state.mode, None, seq, state.changes, quiescence
    )


RULES: Final[Mapping[str, TransitionRule]] = MappingProxyType(
    {
        TEAM_MEMBER: _member,
        TEAM_TASK: _task,
        TEAM_MESSAGE_QUEUED: _queued,
        TEAM_MESSAGE_DELIVERED: _delivered,
        TEAM_MESSAGE_READ: _read,
        TEAM_MODE: _mode,
        TEAM_QUIESCENT: _quiescent,
    }
)


