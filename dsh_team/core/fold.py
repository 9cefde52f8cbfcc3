"""The one pure fold of a Team: ``evolve(state, event) -> state``.

The service, the browser projection, the invariant plugin and ``dsh team show``
all fold the Lead log with this function, so they cannot disagree. Rules (§3.2 of
the reference, plus ``team/mode``):

1. A state with ``failure`` is terminal: every later event returns it unchanged.
2. A non-Team event returns the *same* state object.
3. A record of another Team (``team_id`` differs: inherited fork records, other
   Teams) returns the same state, even when it is malformed or of another version,
   as long as its ``{version, team_id}`` selector is readable.
4. An unreadable selector, a payload that fails the strict schema, an unsupported
   ``version`` or a broken transition rule yields a *new* state with ``failure``
   and the last valid collections.
5. An applied event yields a new state that replaces only the touched collection
   (roster, board or mailbox); the others keep their identity.

Fast path: the strict payload is decoded first, and the loose selector only when
that fails; the outcome is the same as decoding the selector first (a strict
payload always has a valid selector) at one decode per event instead of two.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

import msgspec

from host_spec.events import Event

from dsh_team.config import MAX_SAFE_INTEGER
from dsh_team.core.records import (
    TEAM_MEMBER,
    TEAM_MESSAGE_DELIVERED,
    TEAM_MESSAGE_QUEUED,
    TEAM_MODE,
    TEAM_TASK,
    VERSION,
    MemberRecord,
    MessageDeliveredRecord,
    MessageQueuedRecord,
    ModeRecord,
    TaskRecord,
    TeamTaskSnapshot,
    decode_payload,
    decode_selector,
    numeric_task_number,
)
from dsh_team.core.state import EMPTY, Board, Mailbox, Memo, Roster, TeamState, initial_state
from dsh_team.core.dag import check_candidate, relink

__all__ = ["evolve", "replay"]

_Rule = Callable[[TeamState, Event, object], "TeamState | str"]


def _failed(state: TeamState, event: Event, failure: str) -> TeamState:
    return TeamState(
        state.team_id, state.members, state.tasks, state.mail, state.mode, failure, event.seq
    )


def _unreadable(state: TeamState, event: Event) -> TeamState:
    """Decide a payload that failed the strict schema from its selector alone."""
    try:
        selector = decode_selector(event.data)
    except msgspec.DecodeError:
        return _failed(state, event, f"persisted Agent Teams {event.type} payload is invalid")
    if selector.team_id != state.team_id:
        return state
    if selector.version != VERSION:
        return _failed(state, event, f"unsupported Agent Teams event version {selector.version}")
    return _failed(state, event, f"persisted Agent Teams {event.type} payload is invalid")


# ---------------------------------------------------------------- transition rules


def _member(state: TeamState, event: Event, record: MemberRecord) -> TeamState | str:
    member = record.member
    roster = state.members
    member_id, name = member.id, member.name
    owner = roster.names.get(name)
    if owner is not None and owner != member_id:
        return f'team member name "{name}" is reused by another member'
    previous = roster.members.get(member_id)
    if previous is None:
        if member.phase != "provisioning":
            return f'team member "{member_id}" must begin provisioning'
        roster = Roster(
            roster.members.set(member_id, member),
            roster.order.set(member_id, len(roster.order)),
            roster.names.set(name, member_id),
            Memo(),
        )
    else:
        if (previous.name, previous.provider, previous.context) != (name, member.provider, member.context):
            return f'team member "{member_id}" changed immutable identity fields'
        if previous.phase != "provisioning" or member.phase == "provisioning":
            return f'team member "{member_id}" has an invalid {previous.phase} -> {member.phase} transition'
        roster = Roster(roster.members.set(member_id, member), roster.order, roster.names, Memo())
    return TeamState(state.team_id, roster, state.tasks, state.mail, state.mode, None, event.seq)


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


def _task(state: TeamState, event: Event, record: TaskRecord) -> TeamState | str:
    task = record.task
    board = state.tasks
    previous = board.tasks.get(task.id)
    if previous is None:
        if task.revision != 1:
            return f'team task "{task.id}" must begin at revision 1'
    elif task.revision != previous.revision + 1:
        return (
            f'team task "{task.id}" revision is not contiguous '
            f"({task.revision} after {previous.revision})"
        )
    violation = check_candidate(board, task, previous)
    if violation is not None:
        return violation.message
    board = _apply_task(board, task, previous)
    return TeamState(state.team_id, state.members, board, state.mail, state.mode, None, event.seq)


def _queued(state: TeamState, event: Event, record: MessageQueuedRecord) -> TeamState | str:
    message = record.message
    mail = state.mail
    queued = mail.queued
    message_id = message.id
    if message_id in queued:
        return f'team message "{message_id}" was queued twice'
    target = message.target_id
    pending = mail.pending
    mail = Mailbox(
        queued.set(message_id, message),
        pending.set(target, pending.get(target, EMPTY).set(message_id, len(queued))),
    )
    return TeamState(state.team_id, state.members, state.tasks, mail, state.mode, None, event.seq)


def _delivered(state: TeamState, event: Event, record: MessageDeliveredRecord) -> TeamState | str:
    mail = state.mail
    message_id, target = record.message_id, record.target_id
    queued = mail.queued.get(message_id)
    if queued is None:
        return f'team message "{message_id}" was delivered before queueing'
    if queued.target_id != target:
        return f'team message "{message_id}" target changed'
    # A queued message is undelivered exactly while it is in its target's pending map.
    waiting = mail.pending.get(target)
    if waiting is None or message_id not in waiting:
        return f'team message "{message_id}" was delivered twice'
    remaining = waiting.delete(message_id)
    pending = mail.pending.set(target, remaining) if len(remaining) else mail.pending.delete(target)
    mail = Mailbox(mail.queued, pending)
    return TeamState(state.team_id, state.members, state.tasks, mail, state.mode, None, event.seq)


def _mode(state: TeamState, event: Event, record: ModeRecord) -> TeamState | str:
    # A mode selection is not Team activity: it keeps ``position`` so waits (and
    # ``since`` cursors) never fire on it (seed 003: mode changes do not end waits).
    return TeamState(
        state.team_id, state.members, state.tasks, state.mail, record.enabled, None, state.position
    )


_RULES: Final[dict[str, _Rule]] = {
    TEAM_MEMBER: _member,  # type: ignore[dict-item]
    TEAM_TASK: _task,  # type: ignore[dict-item]
    TEAM_MESSAGE_QUEUED: _queued,  # type: ignore[dict-item]
    TEAM_MESSAGE_DELIVERED: _delivered,  # type: ignore[dict-item]
    TEAM_MODE: _mode,  # type: ignore[dict-item]
}


#: ``(event, before, after)`` of the last Team event folded by :func:`evolve`.
_last: tuple[Event | None, TeamState | None, TeamState | None] = (None, None, None)


def evolve(state: TeamState, event: Event) -> TeamState:
    """Fold one event into ``state`` (pure; see the module docstring for the rules).

    The same committed event is usually folded twice in a row onto equal states:
    by ``dsh-team-invariant`` before the append and by the Team journal right after
    it. The last Team event's result is remembered, so the second fold costs two
    identity checks, and both folds share one state object from then on (the first
    repeat after two independent seeds pays one structural comparison, which makes
    them share). Only an equal state gets the remembered result, so this never
    changes an outcome; the one-slot memo keeps at most one extra state alive.

    Returns:
        ``state`` itself when the event changes nothing, otherwise a new state.
    """
    global _last
    if state.failure is not None:
        return state
    rule = _RULES.get(event.type)
    if rule is None:
        return state
    last_event, before, after = _last
    if last_event is event and (
        before is state or (before.position == state.position and before == state)  # type: ignore[union-attr]
    ):
        return state if after is before else after  # type: ignore[return-value]
    result = _apply(rule, state, event)
    _last = (event, state, result)
    return result


def _apply(rule: _Rule, state: TeamState, event: Event) -> TeamState:
    try:
        record = decode_payload(event.type, event.data)
    except msgspec.DecodeError:
        return _unreadable(state, event)
    if record.team_id != state.team_id:
        return state
    if record.version != VERSION:
        return _failed(state, event, f"unsupported Agent Teams event version {record.version}")
    result = rule(state, event, record)
    if isinstance(result, str):
        return _failed(state, event, result)
    return result


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
