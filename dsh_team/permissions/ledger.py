"""The permissions fold: every ask of a Team and its one answer, a pure fold of the Lead log.

The live router, the invariant plugin, ``dsh team show``, ``dsh team permit``, the
web panel and the trace export fold with :func:`fold_permissions`, so what a
running Team enforces and what its logs show cannot disagree. Kept beside the
Team state (like the controls fold): asks change no roster, board or mailbox.

Rules (a broken one makes the state ``failed``, terminal; the invariant refuses
to append a record that would break one):

* a request's ``ask_id`` is ``ask-N`` with N one more than the requests before it,
  and its ``key`` (one call of one member) was never requested before;
* an answer names a requested ask that has no answer yet (exactly once);
* ``always`` goes with ``allow`` only; it adds the request's ``always_rule`` to the
  member's session rules.

A record of another Team is ignored; a malformed one or another version fails the fold.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import immutables
import msgspec
import structlog

from dsh_team.core.event_filter import of_types
from dsh_team.permissions.records import (
    ASK_ID_PREFIX,
    PERMISSION_EVENT_TYPES,
    PERMISSION_REQUESTED,
    PERMISSIONS_VERSION,
    AnsweredRecord,
    RequestedRecord,
    decode_permission,
)

if TYPE_CHECKING:
    from host_spec.events import Event
    from host_spec.protocols import Session

__all__ = ["Ask", "PermissionsState", "fold_permissions", "replay_permissions", "LivePermissions"]

log = structlog.get_logger(__name__)

_EMPTY: Final[immutables.Map[Any, Any]] = immutables.Map()


class Ask(msgspec.Struct, frozen=True, gc=False):
    """One ask: its request (and the seq that recorded it), its answer once recorded."""

    request: RequestedRecord
    seq: int
    answer: AnsweredRecord | None = None
    answered_seq: int = 0

    @property
    def open(self) -> bool:
        """Requested and not answered yet."""
        return self.answer is None


class PermissionsState(msgspec.Struct, frozen=True, gc=False):
    """Every ask of a Team as of its last folded permission record.

    Attributes:
        team_id: The Lead session id.
        asks: ask id -> :class:`Ask`.
        order: ask ids in log order.
        keys: call key -> ask id (one request per call).
        always: member id -> the session rules its "allow always" answers added.
        failure: Why the fold stopped (``None``: it did not).
    """

    team_id: str
    asks: immutables.Map[str, Ask] = _EMPTY
    order: tuple[str, ...] = ()
    keys: immutables.Map[str, str] = _EMPTY
    always: immutables.Map[str, tuple[str, ...]] = _EMPTY
    failure: str | None = None

    def listed(self) -> tuple[Ask, ...]:
        """Every ask in log order."""
        return tuple(self.asks[ask_id] for ask_id in self.order)

    def open_asks(self) -> tuple[Ask, ...]:
        """Asks without an answer, in log order."""
        return tuple(ask for ask in self.listed() if ask.open)

    def next_id(self) -> str:
        """The id the next request gets."""
        return f"{ASK_ID_PREFIX}{len(self.order) + 1}"


def _fail(state: PermissionsState, message: str, seq: int) -> PermissionsState:
    return msgspec.structs.replace(state, failure=f"seq {seq}: {message}")


def _requested(state: PermissionsState, record: RequestedRecord, seq: int) -> PermissionsState:
    if record.ask_id != state.next_id():
        return _fail(state, f"permission ask {record.ask_id} is out of order (expected {state.next_id()})", seq)
    if record.key in state.keys:
        return _fail(state, f"the call {record.key} was asked about twice", seq)
    return msgspec.structs.replace(
        state,
        asks=state.asks.set(record.ask_id, Ask(record, seq)),
        order=(*state.order, record.ask_id),
        keys=state.keys.set(record.key, record.ask_id),
    )


def _answered(state: PermissionsState, record: AnsweredRecord, seq: int) -> PermissionsState:
    ask = state.asks.get(record.ask_id)
    if ask is None:
        return _fail(state, f"permission ask {record.ask_id} answered without a request", seq)
    if not ask.open:
        return _fail(state, f"permission ask {record.ask_id} answered twice", seq)
    if record.always and record.decision != "allow":
        return _fail(state, f"permission ask {record.ask_id}: only an allow can be always", seq)
    always = state.always
    rule = ask.request.always_rule
    if record.always and rule:
        member = ask.request.member_id
        always = always.set(member, (*always.get(member, ()), rule))
    answered = msgspec.structs.replace(ask, answer=record, answered_seq=seq)
    return msgspec.structs.replace(state, asks=state.asks.set(record.ask_id, answered), always=always)


def fold_permissions(state: PermissionsState, event: Event) -> PermissionsState:
    """Fold one event (pure). Returns ``state`` itself when it is no permission record of this Team."""
    if state.failure is not None or event.type not in PERMISSION_EVENT_TYPES:
        return state
    try:
        record = decode_permission(event.type, event.data)
    except msgspec.DecodeError as exc:
        return _fail(state, f"invalid {event.type} payload ({exc})", event.seq)
    if record.team_id != state.team_id:
        return state
    if record.version != PERMISSIONS_VERSION:
        return _fail(state, f"unsupported {event.type} version {record.version}", event.seq)
    if event.type == PERMISSION_REQUESTED:
        assert isinstance(record, RequestedRecord)
        return _requested(state, record, event.seq)
    assert isinstance(record, AnsweredRecord)
    return _answered(state, record, event.seq)


def replay_permissions(
    events: Sequence[Event], team_id: str, state: PermissionsState | None = None
) -> PermissionsState:
    """Fold a whole Lead log, or its tail after ``state`` (``dsh team show``, ``dsh team permit``, the trace export)."""
    state = PermissionsState(team_id) if state is None else state
    for event in of_types(events, PERMISSION_EVENT_TYPES):
        state = fold_permissions(state, event)
    return state


class LivePermissions:
    """The permissions state of each live Lead session, folded incrementally (each event once, never a re-scan)."""

    def __init__(self) -> None:
        #: Lead session id -> (session object, events folded, state).
        self._by_id: dict[str, tuple[Session, int, PermissionsState]] = {}

    def state(self, session: Session) -> PermissionsState:
        """``session``'s permissions state up to its last event; a new session object (a resume) is folded afresh."""
        entry = self._by_id.get(session.id)
        start, state = (entry[1], entry[2]) if entry is not None and entry[0] is session else (
            0, PermissionsState(session.id))
        count = session.last_seq
        if start < count:
            before = state.failure
            for event in of_types(session.events[start:count], PERMISSION_EVENT_TYPES):
                state = fold_permissions(state, event)
            self._by_id[session.id] = (session, count, state)
            if state.failure is not None and before is None:
                log.error("team.permissions_failed", team=session.id, error=state.failure)
        return state

    def restore(self, session: Session, count: int, state: PermissionsState) -> None:
        """Continue ``session``'s fold from ``state``, the fold of its first ``count`` events (a checked checkpoint)."""
        self._by_id[session.id] = (session, count, state)

    def forget(self, session: Session) -> None:
        """Drop ``session``'s state (it left the live store)."""
        entry = self._by_id.get(session.id)
        if entry is not None and entry[0] is session:
            del self._by_id[session.id]
