"""A live session's event list that keeps only its recent events in memory.

A session that runs for days appends millions of events, and holding every
decoded one made a live host grow with its history (about 67 MB per 100k Team
events). Its readers do not need them: each fold (the Team's, the mail index,
the costs) advances from where it stopped and reads only the newest events; the
old ones are read again only by history readers (``dsh log``, ``team show
--at``, trace export, a fold that starts over), which are rare and sequential.

So :class:`History` keeps the events from :attr:`History.base` on in a list and
forgets the older *durable* ones once the list holds more than twice what it
keeps. A forgotten event is read back from the log on demand. No index of
offsets is needed: a JSONL log is sorted by seq, so the line of seq ``n`` is
found by bisecting the file's bytes (each probe reads the seq of the first whole
line after a position), and a sequential reader decodes whole chunks after it.
A log in a database needs no bisection: it reads a page of events by seq range
(:class:`SeqLog`: the PostgreSQL writer). Only a backend that can read its
durable events back (a :class:`LogFile` or a :class:`SeqLog`) has its history
forgotten; any other backend (a wrapper, memory) keeps every event, as before.

Reads give what the list gave: the same events (equal values) in the same
order, a growing length, negative indexes, slices as copies, and an iterator
that sees events appended while it runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final, Protocol, overload, runtime_checkable

import msgspec

from host_spec.errors import SessionCorruptError
from host_spec.events import Event, decode_event

from host_spec.host.store import heap

__all__ = ["History", "LogFile", "SeqLog", "KEPT_EVENTS", "PAGE_EVENTS", "readable_log"]

#: Events a live session keeps decoded in memory (it forgets down to this many).
KEPT_EVENTS: Final = 4096
#: Bytes read at a time by a sequential reader of forgotten events.
_CHUNK: Final = 256 << 10
#: Events a store-backed reader decodes per read (its pages start at multiples of this).
PAGE_EVENTS: Final = 1024
_LINES: Final = msgspec.json.Decoder(Event)


@runtime_checkable
class LogFile(Protocol):
    """A session log whose committed bytes are a readable JSONL file (host-internal)."""

    @property
    def path(self) -> Path:
        """The log file: a header line, then one event per line in seq order."""

    @property
    def size(self) -> int:
        """Bytes of the file that are synced (complete lines only)."""


@runtime_checkable
class SeqLog(Protocol):
    """A session log that can read its durable events back by seq (host-internal)."""

    def read_events(self, first: int, stop: int) -> list[Event]:
        """The stored events of seq ``first`` up to (not including) ``stop``: exactly those, in seq order.

        Raises:
            SessionCorruptError: a stored event is unreadable, missing, or not at its seq
                (never a wrong event or a short answer).
            OSError: the store cannot be reached (after its own retries).
        """


def readable_log(backend: object) -> LogFile | SeqLog | None:
    """``backend`` if a session may forget its durable events and read them back from it, else ``None``."""
    return backend if isinstance(backend, (LogFile, SeqLog)) else None


class _PageReader:
    """Reads events of seq ``1..limit`` back from a :class:`SeqLog`, a page of seqs at a time.

    Pages are aligned (page ``k`` holds indexes ``k * PAGE_EVENTS`` on), so a
    reader going forwards or backwards decodes each page once. A page is one
    round trip to the store, made by the caller's thread as a JSONL read is:
    history readers are rare and sequential, and the hot path never gets here.
    """

    __slots__ = ("log", "limit", "_page", "_page_start")

    def __init__(self, log: SeqLog) -> None:
        self.log = log
        self.limit = 0  # durable events known to hold every forgotten one
        self._page: list[Event] = []
        self._page_start = 0  # index of _page[0]

    def get(self, index: int) -> Event:
        """The event at ``index`` (seq ``index + 1``)."""
        offset = index - self._page_start
        if not 0 <= offset < len(self._page):
            start = index - index % PAGE_EVENTS
            self._page = self.log.read_events(start + 1, min(start + PAGE_EVENTS, self.limit) + 1)
            self._page_start = start
            offset = index - start
        return self._page[offset]


class _Reader:
    """Reads events of seq ``1..count`` back from a JSONL log (positions found by bisection)."""

    __slots__ = ("path", "limit", "_block", "_block_start", "_block_end")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.limit = 0  # synced bytes known to hold every forgotten event
        self._block: list[Event] = []  # the last decoded run of events (a sequential reader's cache)
        self._block_start = 0  # index of _block[0]
        self._block_end = 0  # byte offset just after _block's last line

    def get(self, index: int) -> Event:
        """The event at ``index`` (seq ``index + 1``)."""
        block = self._block
        offset = index - self._block_start
        if not 0 <= offset < len(block):
            if offset == len(block) and block:
                self._load(index, self._block_end)  # the next run of a sequential read
            else:
                self._load(index, self._find(index + 1))
            offset = 0
        return self._block[offset]

    def _load(self, index: int, position: int) -> None:
        """Decode the whole lines from byte ``position`` (the line of ``index``) on, a chunk of them."""
        with open(self.path, "rb") as handle:
            handle.seek(position)
            room = self.limit - position  # never past the synced bytes (a write may be running)
            data = handle.read(min(_CHUNK, room))
            end = data.rfind(b"\n") + 1
            while not end:  # one line longer than a chunk
                data += handle.read(min(_CHUNK, room - len(data)))
                end = data.rfind(b"\n") + 1
        # A chunk's own bytes: a kept event never pins a larger buffer.
        events: list[Event] = _LINES.decode_lines(data[:end])
        if not events or events[0].seq != index + 1:
            raise SessionCorruptError(f"{self.path}: seq {index + 1} is not where the log had it", path=str(self.path))
        self._block, self._block_start, self._block_end = events, index, position + end

    def _find(self, seq: int) -> int:
        """Byte offset of the line of ``seq``: bisection over the committed bytes (lines are in seq order)."""
        with open(self.path, "rb") as handle:
            low = len(handle.readline())  # the first event's line
            if seq == 1:
                return low
            high = self.limit  # invariant: the line of ``seq`` starts in [low, high); low starts a line of a lower seq
            while high - low > 1:
                middle = (low + high) // 2
                handle.seek(middle - 1)
                handle.readline()  # to the first line starting at or after ``middle``
                start = handle.tell()
                line = handle.readline()
                if start >= high or not line.endswith(b"\n"):  # no whole line starts in [middle, high)
                    high = middle
                    continue
                found = decode_event(line).seq
                if found == seq:
                    return start
                if found < seq:
                    low = start
                else:
                    high = middle
        raise SessionCorruptError(f"{self.path}: seq {seq} is missing from the log", path=str(self.path))


class History(Sequence[Event]):
    """The events of a live session (``history[i].seq == i + 1``); old durable ones are read back from the log."""

    __slots__ = ("recent", "base", "_reader")

    def __init__(self, events: list[Event]) -> None:
        #: The events from :attr:`base` on, in memory (the list is owned: nobody else appends).
        self.recent = events
        #: How many of the oldest events were forgotten (read back from the log).
        self.base = 0
        self._reader: _Reader | _PageReader | None = None

    def __len__(self) -> int:
        return self.base + len(self.recent)

    def append(self, event: Event) -> None:
        self.recent.append(event)

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...

    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        base = self.base
        if isinstance(index, slice):
            start, stop, step = index.indices(base + len(self.recent))
            if step == 1 and start >= base:
                return self.recent[start - base : max(start, stop) - base]
            return [self[i] for i in range(start, stop, step)]
        if index < 0:
            index += len(self)
        if index >= base:
            return self.recent[index - base]
        if index < 0:
            raise IndexError("event index out of range")
        assert self._reader is not None  # base > 0 only once a reader exists
        return self._reader.get(index)

    def iter_from(self, start: int) -> Iterator[Event]:
        """Events from index ``start`` on, including those appended while the iterator runs."""
        index = start
        while True:
            base = self.base
            if index >= base:
                offset = index - base
                recent = self.recent
                if offset >= len(recent):
                    return
                yield recent[offset]
            else:
                yield self[index]
            index += 1

    def __iter__(self) -> Iterator[Event]:
        return self.iter_from(0)

    def forget(self, durable: int, log: LogFile | SeqLog, keep: int = KEPT_EVENTS) -> bool:
        """Forget the oldest durable events past ``keep`` once more than ``2 * keep`` are held.

        ``durable`` events are stored in ``log`` (only those may be forgotten).
        The kept ones are copied out of any larger buffer they were decoded from
        (a resumed log's events share the whole file's bytes). Returns whether
        anything was forgotten.
        """
        held = durable - self.base
        if held <= 2 * keep:
            return False
        drop = held - keep
        reader = self._reader
        if isinstance(log, LogFile):
            if reader is None:
                reader = self._reader = _Reader(log.path)
            reader.limit = log.size
        else:
            if reader is None:
                reader = self._reader = _PageReader(log)
            reader.limit = durable
        recent = self.recent
        # Copies first, while the forgotten events still fill their memory: the copies
        # land in fresh memory, and the memory the forgotten ones leave is freed whole.
        for offset in range(drop, min(drop + keep, len(recent))):
            event = recent[offset]
            copied = event.data.copy()
            if copied is not event.data:
                recent[offset] = msgspec.structs.replace(event, data=copied)
        # A new list of the kept ones, not ``del recent[:drop]``: that deletion first copies
        # the ``drop`` forgotten pointers into a scratch block as large as the history (8 MB
        # after a resume of a million events). The folds' first pass over a resumed log frees
        # copies that large, which raises glibc's dynamic mmap threshold past them, so the
        # scratch block lands on the heap and its freed space stays resident: a process
        # larger the longer its history. The old list is freed whole (unmapped) instead.
        self.recent = recent[drop:]
        self.base += drop
        if drop >= heap.BURST_EVENTS:
            del recent  # the forgotten events go now, and with them what the resume decoded
            heap.release_free_memory()
        return True
