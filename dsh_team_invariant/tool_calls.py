"""A tool call is recorded once: refuse a second ``tool/call`` of one call (its id, tool and arguments) in a log.

A model's tool call runs a command, writes a file, spends money: recording the
same call id twice in one log means the host issued it twice, and whatever it
did happened twice. No correct writer does that (a cold resume answers a call cut
off mid-flight ``TOOL_OUTCOME_UNKNOWN`` instead of running it again), so a second
record is a bug of some writer -- a stale cache, a takeover race -- and this veto
makes that bug fail loudly at the append, with rule :data:`RULE`, instead of
running the command again. It runs in ``dsh_pre_append``, above every storage
backend, so it holds for the JSONL files and the PostgreSQL store alike.

A call is its id *with* its tool and arguments: some OpenAI-compatible servers
number the calls of each response from ``call_0`` again, so an id alone may come
back for another call, which is no repeat; the same id asking the same tool the same
thing again is.

Only a session's own events count (after a fork's inherited prefix), as the
reliability suite's checker reads them: a fork's seed is its parent's history.

Cost: one set lookup per append; a ``tool/call`` decodes only
its id, tool and arguments. The calls a session recorded are kept per live session object,
seeded once from its own events (on its first tool record), and carried across
activations (:mod:`host_spec.carry`) so a woken member's log is not scanned
again. As in :mod:`.invariant`, the candidate is *staged* (another plugin may
still veto the append) and settled at the next check of that session: it was
committed exactly when the log holds that event at its seq.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs
import msgspec

from host_spec import hookimpl
from host_spec.carry import CarriedFolds
from host_spec.events import EventType
from host_spec.records import Violation

if TYPE_CHECKING:
    from host_spec.events import Event
    from host_spec.protocols import Session

__all__ = ["ToolCallsOnce", "RULE"]

#: The rule name of a refused second record of a call id.
RULE: Final = "tool-call-once"
_KINDS: Final = frozenset({EventType.TOOL_CALL})


class _CallId(msgspec.Struct):
    call_id: str | None = None
    name: str = ""
    arguments: str = ""


_decode_id = msgspec.json.Decoder(_CallId).decode


class _Ids:
    """The call ids one session object recorded, by kind, plus the candidate staged by its last check."""

    __slots__ = ("session", "seen", "staged")

    def __init__(self, session: Session, seen: dict[str, set[str]]) -> None:
        self.session = session
        self.seen = seen
        #: ``(event, kind, call id)`` passed by the last check, not yet settled.
        self.staged: tuple[Event, str, str] | None = None

    def settle(self) -> None:
        """Adopt the staged id if its event was committed (the log holds that very event at its seq)."""
        staged, self.staged = self.staged, None
        if staged is None:
            return
        event, kind, call_id = staged
        session = self.session
        if event.seq <= session.last_seq:
            held = session.events[event.seq - 1]
            if held is event or held == event:
                self.seen[kind].add(call_id)


def _call_id(event: Event) -> str | None:
    """The call a record names (id, tool, arguments), or ``None`` without an id."""
    try:
        call = _decode_id(event.data)
    except msgspec.DecodeError:
        return None  # not this check's to judge: the host refuses a malformed record elsewhere
    return None if call.call_id is None else f"{call.call_id}\0{call.name}\0{call.arguments}"


def _scan(events: object) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {EventType.TOOL_CALL: set()}
    for event in events:  # type: ignore[attr-defined]
        if event.type in _KINDS:
            call_id = _call_id(event)
            if call_id is not None:
                seen[event.type].add(call_id)
    return seen


@attrs.define(eq=False)
class ToolCallsOnce:
    """The veto (``dsh_pre_append``) and its per-session ledgers of recorded call ids."""

    _ids: dict[str, _Ids] = attrs.Factory(dict)
    _carried: CarriedFolds[dict[str, set[str]]] = attrs.Factory(CarriedFolds)

    def _ledger(self, session: Session) -> _Ids:
        ids = self._ids.get(session.id)
        if ids is None or ids.session is not session:
            own = session.own_events()
            carried = self._carried.take(session.header, own)
            if carried is None:
                seen = _scan(own)
            else:
                position, seen = carried
                fresh = _scan(own[position:])
                for kind in _KINDS:
                    seen[kind] |= fresh[kind]
            ids = self._ids[session.id] = _Ids(session, seen)
        return ids

    @hookimpl(specname="dsh_pre_append")
    def check(self, session: Session, event: Event) -> Violation | None:
        """Veto a ``tool/call`` whose call (id, tool, arguments) this session's own events already hold."""
        kind = event.type
        if kind not in _KINDS:
            return None
        ids = self._ledger(session)
        ids.settle()
        call_id = _call_id(event)
        if call_id is None:
            return None
        if call_id in ids.seen[kind]:
            return Violation(
                reason=(f"session event {event.seq} records {kind} {call_id.split(chr(0))[0]} a second time: "
                        f"a tool call is recorded once, so it never runs twice (rule {RULE})"),
                rule=RULE,
            )
        ids.staged = (event, kind, call_id)
        return None

    @hookimpl(specname="dsh_session_disposed")
    def forget(self, session: Session) -> None:
        """Carry the ledger of a session that left the live store to its next activation."""
        ids = self._ids.get(session.id)
        if ids is not None and ids.session is session:
            del self._ids[session.id]
            ids.settle()
            own = session.own_events()
            self._carried.keep(session.header, own, len(own), ids.seen)
