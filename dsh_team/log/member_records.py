"""Side records kept per member beside the Team fold: each member's latest record of one type.

A role (``team/role``) and a shutdown edge (``team/shutdown``) are records of
the Lead log that the Team fold does not read; what their rooms need of them is
each member's latest one. :class:`MemberRecords` folds that incrementally per
live Lead session (each event once; a resumed activation of the id folds
afresh), and :class:`RecordKind` holds the one strict decoder and version of a
type, which the invariant applies before such a record may be appended
(:mod:`dsh_team.roster.vetting`) and the fold applies again when it reads it
back, so both judge a record by the same rule.

A record its fold cannot read (written by something without the invariant) is
logged and skipped, never guessed at; a record of another Team (a fork's
inherited prefix carries its parent's) is not this Team's, as for the Team fold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

import msgspec
import structlog

from dsh_team.core.event_filter import of_types

if TYPE_CHECKING:
    from host_spec.events import Event
    from host_spec.protocols import Session

__all__ = ["SideRecord", "RecordKind", "MemberRecords", "fold_latest"]

log = structlog.get_logger(__name__)


class SideRecord(Protocol):
    """What a side record carries for its fold: its version, its Team and its member."""

    @property
    def version(self) -> int: ...

    @property
    def team_id(self) -> str: ...

    @property
    def member_id(self) -> str: ...


R = TypeVar("R", bound=SideRecord)


class RecordKind(Generic[R]):
    """One side record type: its event type, its strict decoder and the version written now.

    Args:
        event_type: The event type (``team/role``).
        record: The payload's ``msgspec.Struct``.
        version: The one version this build writes and reads (no upcasters yet).
    """

    __slots__ = ("event_type", "version", "_decoder")

    def __init__(self, event_type: str, record: type[R], version: int) -> None:
        self.event_type = event_type
        self.version = version
        self._decoder = msgspec.json.Decoder(record)

    def decode(self, event: Event) -> R:
        """The record ``event`` carries (``msgspec.DecodeError`` when it is unreadable)."""
        return self._decoder.decode(event.data)

    def failure(self, team_id: str, event: Event) -> str | None:
        """Why ``event`` may not enter ``team_id``'s log, or ``None`` (another Team's record is not judged)."""
        try:
            record = self.decode(event)
        except msgspec.DecodeError as exc:
            return f"unreadable {self.event_type} record: {exc}"
        if record.team_id != team_id:
            return None
        if record.version != self.version:
            return f"{self.event_type} record version {record.version} is not the supported version {self.version}"
        return None


def fold_latest(kind: RecordKind[R], events: Sequence[Event], team_id: str, latest: dict[str, R]) -> dict[str, R]:
    """Fold ``events`` into ``latest`` (member id -> its latest record of ``kind`` in Team ``team_id``).

    The one fold of a side record, shared by the live books and the commands that
    judge a stopped run's log (``dsh team send``), so both see the same member.
    """
    for event in of_types(events, (kind.event_type,)):
        try:
            record = kind.decode(event)  # vetted before it was appended, where the invariant runs
        except msgspec.DecodeError as exc:  # written by something else: named, never guessed at
            log.error("team.record_unreadable", type=event.type, seq=event.seq, error=str(exc))
            continue
        if record.team_id == team_id:  # a fork's inherited prefix is another Team's
            latest[record.member_id] = record
    return latest


class MemberRecords(Generic[R]):
    """Each member's latest record of one kind, per live Lead session, folded incrementally."""

    def __init__(self, kind: RecordKind[R]) -> None:
        self.kind = kind
        #: Lead session id -> (session object, events folded, member id -> latest record).
        self._by_id: dict[str, tuple[Session, int, dict[str, R]]] = {}

    def latest(self, session: Session) -> Mapping[str, R]:
        """Member id -> its latest record, up to ``session``'s last event (a resume folds afresh)."""
        entry = self._by_id.get(session.id)
        start, latest = (entry[1], entry[2]) if entry is not None and entry[0] is session else (0, {})
        count = session.last_seq
        if start < count:
            fold_latest(self.kind, session.events[start:count], session.id, latest)
            self._by_id[session.id] = (session, count, latest)
        return latest

    def restore(self, session: Session, count: int, latest: Mapping[str, R]) -> None:
        """Continue ``session``'s fold from ``latest``, the fold of its first ``count`` events (a checked checkpoint)."""
        self._by_id[session.id] = (session, count, dict(latest))

    def forget(self, session: Session) -> None:
        """Drop ``session``'s records (it left the live store)."""
        entry = self._by_id.get(session.id)
        if entry is not None and entry[0] is session:
            del self._by_id[session.id]
