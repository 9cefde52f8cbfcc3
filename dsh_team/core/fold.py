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
   is a :class:`~dsh_team.core.fold_failure.FoldFailure` naming the rule, and the last
   valid collections.
6. An applied event yields a new state that replaces only the touched collection
   (roster, board or mailbox); the others keep their identity.

The fold keeps nothing between calls: it is a function of its arguments only.
Whoever folds a session owns that fold (see :class:`dsh_team.log.lead_fold.TeamFolds`).

Fast path: the strict payload of the current version is decoded first, and the
loose selector only when that fails; the outcome is the same as decoding the
selector first (a strict payload always has a valid selector) at one decode per
event instead of two. The transition rules of each record type live in
:mod:`dsh_team.core.rules`; :func:`replay` folds a long log in batches (a cold
resume of a million events) with the same outcome as :func:`evolve` per event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import msgspec

from host_spec.events import Event

from dsh_team.core.records import TEAM_EVENT_TYPES, TEAM_TASK, VERSION, TaskRecord, decode_payload, decode_selector
from dsh_team.core.changes import Changes
from dsh_team.core.rules import RULES, TransitionRule
from dsh_team.core.fold_failure import FoldFailure, FoldRule
from dsh_team.core.persistent import Memo
from dsh_team.core.state import Board, TeamState, initial_state
from dsh_team.core.tombstones import tombstone
from dsh_team.core.upcast import UnsupportedVersion, decode_older

__all__ = ["evolve", "replay"]


def _failed(state: TeamState, failure: FoldFailure) -> TeamState:
    return TeamState(
        state.team_id, state.members, state.tasks, state.mail, state.mode, failure, failure.seq, state.changes,
        state.quiescence,
    )


def _invalid(event: Event) -> FoldFailure:
    return FoldFailure(FoldRule.INVALID_PAYLOAD, f"persisted Agent Teams {event.type} payload is invalid", event.seq)


def evolve(state: TeamState, event: Event) -> TeamState:
    """Fold one event into ``state`` (pure; see the module docstring for the rules).

    Returns:
        ``state`` itself when the event changes nothing, otherwise a new state.
    """
    if state.failure is not None:
        return state
    rule = RULES.get(event.type)
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


def _applied(rule: TransitionRule, state: TeamState, event: Event, record: Any) -> TeamState:
    result = rule(state, event, record)
    return _failed(state, result) if isinstance(result, FoldFailure) else result


def _loose(rule: TransitionRule, state: TeamState, event: Event) -> TeamState:
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


def _older(rule: TransitionRule, state: TeamState, event: Event) -> TeamState:
    """Fold a record of this Team written at another version: upcast, or fail loudly."""
    try:
        record = decode_older(event.type, event.data)
    except UnsupportedVersion as unsupported:
        return _failed(state, FoldFailure(FoldRule.UNSUPPORTED_VERSION, str(unsupported), event.seq))
    except msgspec.DecodeError:
        return _failed(state, _invalid(event))
    return _applied(rule, state, event, record)


#: The strict decoder of a current task record (the batch path's hot decode).
_TASK: Final = msgspec.json.Decoder(TaskRecord)
_DELETED: Final = "deleted"


def replay(events: Iterable[Event], team_id: str, state: TeamState | None = None) -> TeamState:
    """Fold ``events`` from ``state`` (default: the empty Team ``team_id``).

    Equal to folding each event with :func:`evolve` (stopping at a failure, which
    is terminal), but a long log is folded in batches: a task record that only
    supersedes its task's previous snapshot (the next revision, the same blockers,
    live before and after, or deleted before and after) can break no rule but
    revision contiguity and changes nothing but that task, so such records are
    collected in a plain dict and substituted into the board at once when any
    other record comes (or the log ends). Every other record goes through
    :func:`evolve` on the state those substitutions produced.
    """
    current = initial_state(team_id) if state is None else state
    if current.failure is not None:
        return current
    types = TEAM_EVENT_TYPES
    decode = _TASK.decode
    latest: dict[str, Any] = {}  # task id -> superseding snapshot not yet on the board
    changed: dict[str, int] = {}  # task id -> seq of that snapshot (the change index)
    tasks = current.tasks.tasks
    position = current.position
    for event in events:
        kind = event.type
        if kind not in types:
            continue
        if kind == TEAM_TASK:
            try:
                record = decode(event.data)
            except msgspec.DecodeError:
                record = None
            if record is not None and record.version == VERSION and record.team_id == team_id:
                task = record.task
                task_id = task.id
                previous = latest.get(task_id)
                if previous is None:
                    previous = tasks.get(task_id)
                if (
                    previous is not None
                    and task.revision == previous.revision + 1
                    and (
                        (task.status == _DELETED) == (previous.status == _DELETED)
                        and (task.status == _DELETED or task.blocked_by == previous.blocked_by)
                    )
                ):
                    latest[task_id] = tombstone(task) if task.status == _DELETED else task
                    changed[task_id] = position = event.seq
                    continue
        if latest:
            current = _substituted(current, latest, changed, position)
            latest, changed = {}, {}
        current = evolve(current, event)
        if current.failure is not None:
            return current
        tasks = current.tasks.tasks
        position = current.position
    return _substituted(current, latest, changed, position) if latest else current


def _substituted(state: TeamState, latest: dict[str, Any], changed: dict[str, int], position: int) -> TeamState:
    """``state`` with superseding task snapshots put on the board (their order, links and count unchanged)."""
    board = state.tasks
    board = Board(board.tasks.update(latest), board.order, board.live, board.dependents, board.next_task_number, Memo())
    changes = state.changes
    changes = Changes(changes.members, changes.tasks.update(changed), changes.mail, changes.sent, changes.recent)
    return TeamState(
        state.team_id, state.members, board, state.mail, state.mode, None, position, changes, state.quiescence
    )
