"""The one pure fold of a Team: ``evolve(state, event) -> state``.

The service, the browser projection, the invariant plugin and ``dsh team show``
all fold the Lead log with this function, so they cannot disagree. Rules:

1. A state with ``failure`` is terminal: every later event returns it unchanged.
2. A non-Team event returns the *same* state object.
3. A record of another Team (``team_id`` differs: inherited fork records, other
   Teams) returns the same state, even when it is malformed or of another version,
   as long as its ``{version, team_id}`` selector is readable.
4. A record of an older version is upcast (:mod:`dsh_team.core.upcast`) and then
   folded like a current one.
5. An unreadable selector, a payload that fails the strict schema, an unsupported
   ``version`` or a broken transition rule yields a *new* state whose ``failure``
   is a :class:`~dsh_team.core.state.FoldFailure` naming the rule, and the last
   valid collections.
6. An applied event yields a new state that replaces only the touched collection
   (roster, board or mailbox); the others keep their identity.

The fold keeps nothing between calls: it is a function of its arguments only.
Whoever folds a session owns that fold (see :class:`dsh_team.log.journal.TeamFolds`).

Fast path: the strict payload of the current version is decoded first, and the
loose selector only when that fails; the outcome is the same as decoding the
selector first (a strict payload always has a valid selector) at one decode per
event instead of two.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Final

import msgspec

from host_spec.events import Event

from dsh_team.config import MAX_SAFE_INTEGER
from dsh_team.core.dag import check_candidate, relink
from dsh_team.core.records import (
    TEAM_MEMBER,
    TEAM_MESSAGE_DELIVERED,
    TEAM_MESSAGE_QUEUED,
    TEAM_MESSAGE_READ,
    TEAM_MODE,
    TEAM_TASK,
    VERSION,
    MemberRecord,
    MessageDeliveredRecord,
    MessageQueuedRecord,
    MessageReadRecord,
    ModeRecord,
    TaskRecord,
    TeamTaskSnapshot,
    decode_payload,
    decode_selector,
    numeric_task_number,
)
from dsh_team.core.state import EMPTY, Board, FoldFailure, FoldRule, Mailbox, Memo, Roster, TeamState, initial_state
from dsh_team.core.upcast import UnsupportedVersion, decode_older

__all__ = ["evolve", "replay"]


#: The fold rule a DAG violation kind breaks.
_DAG_RULES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "self": FoldRule.TASK_DEPENDENCY_CYCLE,
        "cycle": FoldRule.TASK_DEPENDENCY_CYCLE,
        "duplicate": FoldRule.TASK_DUPLICATE_BLOCKER,
        "missing": FoldRule.TASK_MISSING_BLOCKER,
    }
)

_Rule = Callable[[TeamState, Event, Any], "TeamState | FoldFailure"]


def _failed(state: TeamState, failure: FoldFailure) -> TeamState:
    return TeamState(
        state.team_id, state.members, state.tasks, state.mail, state.mode, failure, failure.seq, state.changes
    )


def _invalid(event: Event) -> FoldFailure:
    return FoldFailure(FoldRule.INVALID_PAYLOAD, f"persisted Agent Teams {event.type} payload is invalid", event.seq)


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
    return TeamState(state.team_id, roster, state.tasks, state.mail, state.mode, None, seq, changes)


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
    was_live = previous is not None and previous.status != "deleted"
    if was_live != (task.status != "deleted"):
        live = live.delete(task_id) if was_live else live.set(task_id, order[task_id])
    return Board(
        board.tasks.set(task_id, task),
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
    return TeamState(state.team_id, state.members, board, state.mail, state.mode, None, event.seq, changes)


def _queued(state: TeamState, event: Event, record: MessageQueuedRecord) -> TeamState | FoldFailure:
    message = record.message
    mail = state.mail
    queued = mail.queued
    message_id = message.id
    if message_id in queued:
        return FoldFailure(FoldRule.MESSAGE_QUEUED_TWICE, f'team message "{message_id}" was queued twice', event.seq)
    target = message.target_id
    pending = mail.pending
    index = len(queued)
    mail = Mailbox(
        queued.set(message_id, message),
        pending.set(target, pending.get(target, EMPTY).set(message_id, index)),
        mail.unread,
        mail.read,
    )
    changes = state.changes.message(message.sender_id, message_id, target, index, event.seq)
    return TeamState(state.team_id, state.members, state.tasks, mail, state.mode, None, event.seq, changes)


def _delivered(state: TeamState, event: Event, record: MessageDeliveredRecord) -> TeamState | FoldFailure:
    mail = state.mail
    message_id, target = record.message_id, record.target_id
    queued = mail.queued.get(message_id)
    if queued is None:
        return FoldFailure(
            FoldRule.MESSAGE_DELIVERED_BEFORE_QUEUED, f'team message "{message_id}" was delivered before queueing', event.seq
        )
    if queued.target_id != target:
        return FoldFailure(FoldRule.MESSAGE_TARGET_CHANGED, f'team message "{message_id}" target changed', event.seq)
    # A queued message is undelivered exactly while it is in its target's pending map.
    waiting = mail.pending.get(target)
    if waiting is None or message_id not in waiting:
        return FoldFailure(FoldRule.MESSAGE_DELIVERED_TWICE, f'team message "{message_id}" was delivered twice', event.seq)
    index = waiting[message_id]
    remaining = waiting.delete(message_id)
    pending = mail.pending.set(target, remaining) if len(remaining) else mail.pending.delete(target)
    unread = mail.unread.set(target, mail.unread.get(target, EMPTY).set(message_id, index))
    mail = Mailbox(mail.queued, pending, unread, mail.read)
    changes = state.changes.message(queued.sender_id, message_id, target, index, event.seq)
    return TeamState(state.team_id, state.members, state.tasks, mail, state.mode, None, event.seq, changes)


def _read(state: TeamState, event: Event, record: MessageReadRecord) -> TeamState | FoldFailure:
    mail = state.mail
    message_id, target = record.message_id, record.target_id
    queued = mail.queued.get(message_id)
    if queued is None or not mail.is_delivered(message_id):
        return FoldFailure(
            FoldRule.MESSAGE_READ_BEFORE_DELIVERED, f'team message "{message_id}" was read before delivery', event.seq
        )
    if queued.target_id != target:
        return FoldFailure(FoldRule.MESSAGE_TARGET_CHANGED, f'team message "{message_id}" target changed', event.seq)
    waiting = mail.unread.get(target)
    if waiting is None or message_id not in waiting:
        return FoldFailure(FoldRule.MESSAGE_READ_TWICE, f'team message "{message_id}" was read twice', event.seq)
    index = waiting[message_id]
    remaining = waiting.delete(message_id)
    unread = mail.unread.set(target, remaining) if len(remaining) else mail.unread.delete(target)
    mail = Mailbox(mail.queued, mail.pending, unread, mail.read.set(target, mail.read.get(target, 0) + 1))
    # A receipt keeps ``position``: it must not wake a wait once per message read; the
    # change index still records it at its own seq (the counts and the status moved).
    changes = state.changes.message(queued.sender_id, message_id, target, index, event.seq)
    return TeamState(state.team_id, state.members, state.tasks, mail, state.mode, None, state.position, changes)


def _mode(state: TeamState, event: Event, record: ModeRecord) -> TeamState | FoldFailure:
    # A mode selection is not Team activity: it keeps ``position`` so waits (and
    # ``since`` cursors) never fire on it; a mode change ends no wait.
    return TeamState(
        state.team_id, state.members, state.tasks, state.mail, record.enabled, None, state.position, state.changes
    )


_RULES: Final[Mapping[str, _Rule]] = MappingProxyType(
    {
        TEAM_MEMBER: _member,
        TEAM_TASK: _task,
        TEAM_MESSAGE_QUEUED: _queued,
        TEAM_MESSAGE_DELIVERED: _delivered,
        TEAM_MESSAGE_READ: _read,
        TEAM_MODE: _mode,
    }
)


def evolve(state: TeamState, event: Event) -> TeamState:
    """Fold one event into ``state`` (pure; see the module docstring for the rules).

    Returns:
        ``state`` itself when the event changes nothing, otherwise a new state.
    """
    if state.failure is not None:
        return state
    rule = _RULES.get(event.type)
    if rule is None:
        return state
    try:
        record = decode_payload(event.type, event.data)
    except msgspec.DecodeError:
        return _loose(rule, state, event)
    if record.team_id != state.team_id:
        return state
    if record.version != VERSION:
        return _older(rule, state, event)
    return _applied(rule, state, event, record)


def _applied(rule: _Rule, state: TeamState, event: Event, record: Any) -> TeamState:
    result = rule(state, event, record)
    return _failed(state, result) if isinstance(result, FoldFailure) else result


def _loose(rule: _Rule, state: TeamState, event: Event) -> TeamState:
    """Decide a payload that failed the strict current schema from its selector."""
    try:
        selector = decode_selector(event.data)
    except msgspec.DecodeError:
        return _failed(state, _invalid(event))
    if selector.team_id != state.team_id:
        return state
    if selector.version == VERSION:
        return _failed(state, _invalid(event))
    return _older(rule, state, event)


def _older(rule: _Rule, state: TeamState, event: Event) -> TeamState:
    """Fold a record of this Team written at another version: upcast, or fail loudly."""
    try:
        record = decode_older(event.type, event.data)
    except UnsupportedVersion as unsupported:
        return _failed(state, FoldFailure(FoldRule.UNSUPPORTED_VERSION, str(unsupported), event.seq))
    except msgspec.DecodeError:
        return _failed(state, _invalid(event))
    return _applied(rule, state, event, record)


def replay(events: Iterable[Event], team_id: str, state: TeamState | None = None) -> TeamState:
    """Fold ``events`` from ``state`` (default: the empty Team ``team_id``).

    Stops early once the stream has failed (failure is terminal).
    """
    current = initial_state(team_id) if state is None else state
    fold = evolve
    for event in events:
        current = fold(current, event)
        if current.failure is not None:
            break
    return current
