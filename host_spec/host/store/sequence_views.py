"""Read-only views over a growing list that cost O(1) to make and never copy it.

The session's event list and an agent's message list only ever grow, and they
are read far more often than they change: handing the list itself out would let
a reader mutate the log, and copying it on every read would make hot readers
O(n). These views share the list instead, each fixing what part of it a reader
sees: everything from an index on (live), a prefix frozen at its current length
(a snapshot), or the list followed by one more item. Slices are copies.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import TypeVar, overload

from host_spec.events import Event

from host_spec.host.store.history import History

__all__ = ["EventsView", "Extended", "Prefix"]

T = TypeVar("T")


class EventsView(Sequence[Event]):
    """A read-only, allocation-free view of a session's event list (or tuple) from ``start`` on.

    Handing out the list itself would let callers mutate the log; copying it on
    every ``session.events`` read would make hot readers O(n). Slices are copies.
    """

    __slots__ = ("_items", "_start")

    def __init__(self, items: Sequence[Event], start: int = 0) -> None:
        self._items = items
        self._start = start

    def __len__(self) -> int:
        return max(0, len(self._items) - self._start)

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Event, ...]: ...

    def __getitem__(self, index: int | slice) -> Event | tuple[Event, ...]:
        if isinstance(index, slice):
            first, stop, step = index.indices(len(self))
            if step == 1:  # only the range asked for: a session's history may have to be read back
                start = self._start
                return tuple(self._items[start + first : start + max(first, stop)])
            return tuple(self._items[self._start :][index] if self._start else self._items[index])
        if not self._start:
            return self._items[index]
        if index < 0:
            index += len(self)
        if index < 0 or index >= len(self):
            raise IndexError("event index out of range")
        return self._items[self._start + index]

    def __iter__(self) -> Iterator[Event]:
        # A list iterator sees events appended while it runs, like the list itself.
        if isinstance(self._items, History):
            return self._items.iter_from(self._start)
        items = iter(self._items)
        return itertools.islice(items, self._start, None) if self._start else items

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (EventsView, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # unhashable like a list; typeshed types it as a method

    def __repr__(self) -> str:
        return f"<events {len(self)} from {self._start}>"


class Prefix(Sequence[T]):
    """The first ``len(items)`` items of a list that only grows, frozen at that count (no copy).

    A snapshot of an append-only list in O(1): later appends (by whoever the list
    is handed to next) never show here, so the snapshot stays what it was.
    """

    __slots__ = ("items", "_count")

    def __init__(self, items: list[T]) -> None:
        self.items = items
        self._count = len(items)

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            return tuple(self.items[: self._count][index])
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError("index out of range")
        return self.items[index]

    def __iter__(self) -> Iterator[T]:
        return itertools.islice(iter(self.items), self._count)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Prefix, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # unhashable like a list

    def __repr__(self) -> str:
        return f"<prefix {self._count}>"


class Extended(Sequence[T]):
    """``items`` followed by one more item, without copying ``items`` (O(1) to build)."""

    __slots__ = ("_items", "_last")

    def __init__(self, items: Sequence[T], last: T) -> None:
        self._items = items
        self._last = last

    def __len__(self) -> int:
        return len(self._items) + 1

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        count = len(self._items)
        if index < 0:
            index += count + 1
        if index == count:
            return self._last
        if not 0 <= index < count:
            raise IndexError("index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[T]:
        return itertools.chain(self._items, (self._last,))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Extended, Prefix, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # unhashable like a list

    def __repr__(self) -> str:
        return f"<{len(self._items)} items and one more>"
