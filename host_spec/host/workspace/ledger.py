"""The read ledger: which version of each file an agent has seen, folded from its own log.

An agent may overwrite a file only if it knows what it is overwriting. What it
knows is exactly what its session log says it read (``workspace/read``) or wrote
(``workspace/write``): after a cold resume or a crash the log is all that is
left, so the ledger is nothing but a fold of it. Folding is incremental: a
session is folded once when first needed (inherited fork seed included -- a
fork's model saw those reads too), then each committed event updates it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import attrs
import msgspec
import structlog

from host_spec.workspace import WORKSPACE_READ, WORKSPACE_WRITE, FileRead, FileWrite

if TYPE_CHECKING:
    from host_spec.events import Event
    from host_spec.protocols import Session

__all__ = ["Seen", "Ledger", "Ledgers"]

log = structlog.get_logger(__name__)

_read_decoder = msgspec.json.Decoder(FileRead)
_write_decoder = msgspec.json.Decoder(FileWrite)


@attrs.frozen
class Seen:
    """The version of one path an agent last saw (``snapshot``: its text, when small)."""

    sha256: str
    snapshot: str | None


@attrs.define(eq=False)
class Ledger:
    """``path -> Seen`` for one session."""

    seen: dict[str, Seen] = attrs.Factory(dict)

    def apply(self, event: Event) -> None:
        """Fold one event (anything but ``workspace/read``/``write`` is ignored)."""
        try:
            if event.type == WORKSPACE_READ:
                read = _read_decoder.decode(event.data)
                self.seen[read.path] = Seen(read.sha256, read.snapshot)
            elif event.type == WORKSPACE_WRITE:
                write = _write_decoder.decode(event.data)
                self.seen[write.path] = Seen(write.sha256, write.snapshot)
        except msgspec.DecodeError:  # a record we cannot read proves no read: the guard stays closed
            log.warning("workspace.ledger_record_unreadable", seq=event.seq, type=event.type)

    def get(self, path: str) -> Seen | None:
        return self.seen.get(path)


@attrs.define(eq=False)
class Ledgers:
    """One ledger per live session object (a resumed session gets a fresh fold)."""

    by_session: dict[str, tuple[Session, Ledger]] = attrs.Factory(dict)

    def of(self, session: Session) -> Ledger:
        """``session``'s ledger, folding its events the first time."""
        entry = self.by_session.get(session.id)
        if entry is not None and entry[0] is session:
            return entry[1]
        ledger = Ledger()
        _fold(ledger, session.events)
        self.by_session[session.id] = (session, ledger)
        return ledger

    def committed(self, session: Session, event: Event) -> None:
        """Apply a newly committed event to a session that was folded already."""
        entry = self.by_session.get(session.id)
        if entry is not None and entry[0] is session:
            entry[1].apply(event)

    def drop(self, session: Session) -> None:
        entry = self.by_session.get(session.id)
        if entry is not None and entry[0] is session:
            del self.by_session[session.id]


def _fold(ledger: Ledger, events: Iterable[Event]) -> None:
    for event in events:
        ledger.apply(event)
