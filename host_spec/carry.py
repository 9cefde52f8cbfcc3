"""Folds carried across activations of one session, so a wake never re-reads its history.

A continuable child sleeps on disk and is rebuilt from its log at every wake; a
reader that folds the log from scratch each time (the conversation, the inbox,
a message index, a Team fold) makes the n-th wake cost O(n). Instead, whoever
folds a session keeps its fold when the activation ends, and the next
activation continues it from where it stopped.

Why a continued fold equals a fresh one: a session's log only grows, by appends
of its single live activation (one process holds a Team's lock), and recovery
only drops a torn or unflushed tail. So a later log with the same header that
still holds, at the fold's position, the exact event the fold stopped at extends
the folded prefix unchanged. Anything else (a shorter log, another event there,
another header) is not continued: the reader folds from scratch.

The store is bounded (least recently kept first out): a carried fold is a cache,
never the truth, so dropping one only costs a fresh fold.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Generic, TypeVar

import attrs
import msgspec

from host_spec.events import Event, SessionHeader

__all__ = ["LogMark", "CarriedFolds", "CARRY_LIMIT"]

T = TypeVar("T")

#: How many released sessions keep their folds by default.
CARRY_LIMIT: Final = 128


@attrs.frozen
class LogMark:
    """Where a fold of one session's log stopped.

    Attributes:
        header: The session's header (another session under the same id differs here).
        position: How many events the fold covers (``events[:position]``).
        last: ``events[position - 1]`` (``None`` when ``position`` is 0).
    """

    header: SessionHeader
    position: int
    last: Event | None

    @classmethod
    def of(cls, header: SessionHeader, events: Sequence[Event], position: int) -> LogMark:
        """The mark of a fold covering the first ``position`` of ``events``.

        The last event's payload is copied out of the buffer it may share with
        every event read with it (a resumed log's), so a carried mark never keeps
        that buffer alive (a live session lets go of its older events).
        """
        if not position:
            return cls(header, position, None)
        last = events[position - 1]
        data = last.data.copy()
        return cls(header, position, last if data is last.data else msgspec.structs.replace(last, data=data))

    def continues(self, header: SessionHeader, events: Sequence[Event]) -> bool:
        """Whether ``events`` (with ``header``) extend the prefix this mark was taken on."""
        position = self.position
        if header != self.header or len(events) < position:
            return False
        return position == 0 or events[position - 1] == self.last


class CarriedFolds(Generic[T]):
    """Folds of sessions that left the live store, by session id (bounded).

    Args:
        limit: How many sessions are kept; the least recently kept goes first.
    """

    def __init__(self, limit: int = CARRY_LIMIT) -> None:
        self._limit = limit
        self._folds: dict[str, tuple[LogMark, T]] = {}

    def __len__(self) -> int:
        return len(self._folds)

    def keep(self, header: SessionHeader, events: Sequence[Event], position: int, fold: T) -> None:
        """Keep ``fold``, which covers ``events[:position]`` of the session ``header.id``."""
        folds = self._folds
        folds.pop(header.id, None)
        folds[header.id] = (LogMark.of(header, events, position), fold)
        while len(folds) > self._limit:
            del folds[next(iter(folds))]

    def take(self, header: SessionHeader, events: Sequence[Event]) -> tuple[int, T] | None:
        """Remove and return ``(position, fold)`` when ``events`` continue it, else ``None``.

        A kept fold that ``events`` do not continue is dropped: it can never match again.
        """
        found = self._folds.pop(header.id, None)
        if found is None:
            return None
        mark, fold = found
        return (mark.position, fold) if mark.continues(header, events) else None

    def drop(self, session_id: str) -> None:
        """Forget the fold of ``session_id`` (its log was discarded)."""
        self._folds.pop(session_id, None)
