"""The storage-backend contract: where a host keeps its session logs.

A session log is an append-only list of :class:`~host_spec.events.Event` whose
seqs run ``1..n`` behind one :class:`~host_spec.events.SessionHeader`. A host's
live session appends in memory and makes batches durable through the log's
:class:`SessionLog`; everything else (listing, ``inspect``, ``team show``) reads
through the :class:`StorageBackend`.

The contract is shaped so that very different media can keep it:

* **Compare-and-set on the tail.** :meth:`SessionLog.append` names the seq the
  log must currently end at (``expected_seq``); a log that ends elsewhere refuses
  with :class:`~host_spec.errors.SequenceConflictError` and stores nothing. A
  local file checks its own tail (its lock already excludes a second writer); a
  SQL backend can make it one ``INSERT ... WHERE`` on the highest seq (or a
  unique key on ``(session, seq)``); a networked log sends it with the batch.
* **Append, then sync.** ``append`` places a batch at the tail, ``sync`` makes
  every appended batch durable. A file may write in ``append`` and ``fsync`` in
  ``sync``; a database may insert and commit; a remote log may send and await the
  acknowledgement. A failed ``append`` or ``sync`` leaves the log ending at its
  last synced seq, so the caller retries the same events at the same
  ``expected_seq`` and no seq is stored twice.
* **Layout is the backend's business.** Nothing here names files, lines or
  tables; one file per session, preallocated segments or rows are all fine.

* **Checkpoints are a cache beside the log.** A backend may offer
  :class:`Checkpoints` (as :class:`CheckpointingBackend`): a named, opaque
  payload per session that says which seq it covers. The log stays the truth;
  whoever reads a checkpoint checks it against the log before trusting it, so a
  backend may lose one (it only costs a full fold), but must never leave one
  half-written where the previous one stood.

``host_spec.testing`` holds the conformance suite every backend runs against
itself, an in-memory backend and a fault-injecting wrapper; ``docs/host-contract.md``
(section for backend authors) explains both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from host_spec.events import Event, SessionHeader

__all__ = ["CheckpointingBackend", "CheckpointedSessions", "Checkpoints", "SessionLog", "StorageBackend"]


@runtime_checkable
class SessionLog(Protocol):
    """The exclusive writer of one session's log, from open until :meth:`close`.

    One caller drives a log at a time (the host never runs two ``append`` or
    ``sync`` calls of one log concurrently), possibly from a worker thread.
    A log may declare ``inline = True`` when its calls are fast I/O (a local
    file, a near database) that a host may run on its event-loop thread; without
    it a host uses a thread. On that thread an inline log may refuse a ``sync``
    that would have to wait (a connection to re-open) with
    :class:`BlockingIOError`, a medium failure like any ``OSError``; the host
    then appends and syncs the same batch again from a thread.
    """

    @property
    def header(self) -> SessionHeader:
        """The header the log was created with (or found under on resume)."""

    @property
    def tail_seq(self) -> int:
        """The seq the log ends at: its last appended event (``0`` when empty)."""

    def append(self, events: Sequence[Event], *, expected_seq: int) -> None:
        """Place ``events`` (seqs ``expected_seq + 1 ...`` in order) at the tail.

        Appended events count for :attr:`tail_seq` at once but are durable only
        after :meth:`sync`. An empty batch checks the tail and stores nothing.

        Raises:
            SequenceConflictError: the log does not end at ``expected_seq``, or the
                batch does not continue it; nothing is stored.
            SessionNotLiveError: the log was closed.
            SessionExistsError: the first batch of a created log found another
                log stored under the same id (two creators raced).
            OSError: the medium failed; as after a failed :meth:`sync`, the log is
                back at its last synced seq.
        """

    def sync(self) -> None:
        """Make every appended event durable; a no-op when nothing is pending.

        Raises:
            SessionNotLiveError: the log was closed.
            OSError: the medium failed; every event appended since the last
                successful sync is dropped and :attr:`tail_seq` returns to the
                synced tail, so the caller appends them again.
        """

    def close(self) -> None:
        """Release the log (its lock, handle or connection). Idempotent.

        Events appended but not synced may be lost; the owner syncs first.
        """


@runtime_checkable
class StorageBackend(Protocol):
    """Where the session logs of one host (one data directory, database, cluster) live."""

    def exists(self, session_id: str) -> bool:
        """Whether a log with at least its header is stored under ``session_id``."""

    def list_ids(self) -> list[str]:
        """Stored session ids in creation order (header ``created_at``, then id)."""

    def read(self, session_id: str) -> tuple[SessionHeader, list[Event]]:
        """The stored header and durable events, without taking the writer's lock.

        A damaged tail that a crash explains (a half-written last batch) is left
        out; damage before it is corruption.

        Raises:
            SessionNotFoundError: nothing is stored under this id.
            SessionCorruptError: a stored event is unreadable or a seq is missing.
            SessionFormatError: the log was written in a version this backend does not read.
        """

    def create(self, header: SessionHeader) -> SessionLog:
        """Open a new, empty log for writing; it is stored by its first ``append``.

        Until then :meth:`exists` is false, and a crash leaves nothing to resume.

        Raises:
            SessionExistsError: a log is already stored under ``header.id``.
            SessionLockedError: another writer holds this id.
        """

    def resume(self, session_id: str) -> tuple[SessionLog, list[Event]]:
        """Open a stored log for writing, dropping a torn tail, and return its events.

        The log's ``header`` is the stored one and its ``tail_seq`` is the last
        returned event's seq.

        Raises:
            SessionNotFoundError: nothing is stored under this id.
            SessionLockedError: another writer holds this id.
            SessionCorruptError / SessionFormatError: as for :meth:`read`.
        """


@runtime_checkable
class Checkpoints(Protocol):
    """Named checkpoints of the folds of a session's log: a cache, never the truth.

    A plugin that folds a long log (the Team's folds of its Lead log) saves its
    folded state with the seq it covers, so a cold start folds only the events
    after it. The payload is opaque here (the plugin encodes it, with whatever it
    needs to check it against the log); the backend keeps the newest one per
    ``(session_id, name)``. Calls may block (file or network I/O); a host runs
    them off its event loop when they are slow.
    """

    def save(self, session_id: str, name: str, seq: int, payload: bytes) -> None:
        """Replace the checkpoint ``name`` of ``session_id`` by ``payload``, covering events ``1..seq``.

        Atomic: a crash during the call leaves either the previous checkpoint or
        this one readable, never a mix or nothing (where there was one).

        Raises:
            ValueError: ``name`` is empty or not a plain word, or ``seq`` is negative.
            OSError: the medium failed; the previous checkpoint is still there.
        """

    def load(self, session_id: str, name: str) -> tuple[int, bytes] | None:
        """``(seq, payload)`` of the newest saved checkpoint ``name`` of ``session_id``, or ``None``.

        Raises:
            ValueError: as for :meth:`save`.
        """


@runtime_checkable
class CheckpointingBackend(Protocol):
    """A storage backend that keeps checkpoints beside its logs."""

    @property
    def checkpoints(self) -> Checkpoints:
        """The checkpoints of this backend's sessions."""


@runtime_checkable
class CheckpointedSessions(Protocol):
    """A host's session store that exposes its backend's checkpoints to plugins.

    ``checkpoints`` is ``None`` when the backend keeps none (memory only, a
    wrapper): the plugin then folds its logs in full, as before.
    """

    @property
    def checkpoints(self) -> Checkpoints | None:
        """The backend's checkpoints, or ``None``."""
