"""An in-memory storage backend: the smallest honest implementation of the storage contract.

It keeps every rule a durable backend keeps (compare-and-set on the tail,
nothing visible before ``sync``, a created log is stored only by its first
append), so tests of upper layers can run without files, and the conformance
suite has a second, independent implementation to agree with. Like a file store
it lets one writer per id open at a time; with ``exclusive=False`` it instead
lets any number open and decides at ``sync`` by the stored tail, as a database
with a compare-and-set on the log tail would. Nothing survives the process.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence

from host_spec.errors import (
    SequenceConflictError,
    SessionExistsError,
    SessionLockedError,
    SessionNotFoundError,
    SessionNotLiveError,
)
from host_spec.events import Event, SessionHeader

__all__ = ["MemoryCheckpoints", "MemoryLog", "MemoryStorage"]


class MemoryCheckpoints:
    """Checkpoints in a dict (implements :class:`host_spec.storage.Checkpoints`), shared by every reopened handle."""

    def __init__(self) -> None:
        self._saved: dict[tuple[str, str], tuple[int, bytes]] = {}
        self._lock = threading.Lock()

    def save(self, session_id: str, name: str, seq: int, payload: bytes) -> None:
        _checked(name, seq)
        with self._lock:
            self._saved[(session_id, name)] = (seq, bytes(payload))

    def load(self, session_id: str, name: str) -> tuple[int, bytes] | None:
        _checked(name, 0)
        with self._lock:
            return self._saved.get((session_id, name))


#: A checkpoint name: a plain lowercase word (a file-backed store puts it in a file name).
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def _checked(name: str, seq: int) -> None:
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise ValueError(f"checkpoint name {name!r} is not a plain lowercase word")
    if seq < 0:
        raise ValueError(f"checkpoint seq {seq} is negative")


class MemoryStorage:
    """Session logs in a dict (implements :class:`host_spec.storage.StorageBackend`
    and :class:`host_spec.storage.CheckpointingBackend`).

    Every :meth:`reopen` shares the same logs and locks, as two processes share
    one data directory.

    Args:
        exclusive: Refuse a second writer of an id (``SessionLockedError``) while
            one is open; ``False`` lets the stored tail decide at ``sync``.
    """

    def __init__(self, *, exclusive: bool = True) -> None:
        self.exclusive = exclusive
        self._logs: dict[str, tuple[SessionHeader, list[Event]]] = {}
        self._writers: set[str] = set()
        self._lock = threading.Lock()
        self.checkpoints = MemoryCheckpoints()

    def __repr__(self) -> str:
        return f"<MemoryStorage logs={len(self._logs)}>"

    def reopen(self) -> MemoryStorage:
        """Another handle on the same logs (a second process, a restart)."""
        other = MemoryStorage(exclusive=self.exclusive)
        other._logs, other._writers, other._lock = self._logs, self._writers, self._lock
        other.checkpoints = self.checkpoints
        return other

    def exists(self, session_id: str) -> bool:
        return session_id in self._logs

    def list_ids(self) -> list[str]:
        with self._lock:
            found = sorted((header.created_at, header.id) for header, _ in self._logs.values())
        return [session_id for _, session_id in found]

    def read(self, session_id: str) -> tuple[SessionHeader, list[Event]]:
        with self._lock:
            stored = self._logs.get(session_id)
            if stored is None:
                raise SessionNotFoundError(f"session {session_id} not found", session=session_id)
            return stored[0], list(stored[1])

    def create(self, header: SessionHeader) -> MemoryLog:
        with self._lock:
            if header.id in self._logs:
                raise SessionExistsError(f"session {header.id} is already stored", session=header.id)
            self._take(header.id)
        return MemoryLog(self, header, 0)

    def resume(self, session_id: str) -> tuple[MemoryLog, list[Event]]:
        with self._lock:
            stored = self._logs.get(session_id)
            if stored is None:
                raise SessionNotFoundError(f"session {session_id} not found", session=session_id)
            self._take(session_id)
            header, events = stored[0], list(stored[1])
        return MemoryLog(self, header, len(events)), events

    def _take(self, session_id: str) -> None:
        if not self.exclusive:
            return
        if session_id in self._writers:
            raise SessionLockedError(f"session {session_id} is open for writing elsewhere", session=session_id)
        self._writers.add(session_id)

    def _store(self, header: SessionHeader, events: list[Event], *, first: bool, tail: int) -> None:
        """Store a synced batch if the stored log still ends at ``tail`` (the compare-and-set)."""
        with self._lock:
            if first:
                if header.id in self._logs:
                    raise SessionExistsError(f"session {header.id} is already stored", session=header.id)
                self._logs[header.id] = (header, events)
                return
            stored = self._logs[header.id][1]
            if len(stored) != tail:
                raise SequenceConflictError(
                    f"session {header.id}: append at seq {tail} but the stored log ends at seq {len(stored)}",
                    session=header.id,
                    expected=tail,
                    actual=len(stored),
                )
            stored.extend(events)

    def _release(self, session_id: str) -> None:
        with self._lock:
            self._writers.discard(session_id)


class MemoryLog:
    """The writer of one in-memory log (implements :class:`host_spec.storage.SessionLog`)."""

    inline = True

    def __init__(self, storage: MemoryStorage, header: SessionHeader, tail_seq: int) -> None:
        self.header = header
        self._storage = storage
        self._synced = self._tail = tail_seq
        self._stored = tail_seq > 0
        self._pending: list[Event] = []
        self._open = True

    @property
    def tail_seq(self) -> int:
        return self._tail

    def _check_live(self) -> None:
        if not self._open:
            raise SessionNotLiveError(f"session {self.header.id}: writer is closed", session=self.header.id)

    def append(self, events: Sequence[Event], *, expected_seq: int) -> None:
        self._check_live()
        seqs = [event.seq for event in events]
        if expected_seq != self._tail or seqs != list(range(expected_seq + 1, expected_seq + 1 + len(seqs))):
            raise SequenceConflictError(
                f"session {self.header.id}: append at seq {expected_seq} but the log ends at seq {self._tail}",
                session=self.header.id,
                expected=expected_seq,
                actual=self._tail,
            )
        self._pending.extend(events)
        self._tail = expected_seq + len(seqs)

    def sync(self) -> None:
        self._check_live()
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        try:
            self._storage._store(self.header, pending, first=not self._stored, tail=self._synced)
        except BaseException:
            self._tail = self._synced
            raise
        self._stored = True
        self._synced = self._tail

    def close(self) -> None:
        if self._open:
            self._open = False
            self._pending = []
            self._storage._release(self.header.id)
