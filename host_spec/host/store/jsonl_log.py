"""The writer of one JSONL session log: ``pwrite`` at the end, a sync per batch, truncate back on failure.

The first batch *materializes* the log atomically (temp file, fsync, ``link``
onto the final name, directory fsync), so a crash never leaves a headerless log
and two creators cannot both win. Every later batch is written at the end of
what was appended; a failed write or sync truncates the file back to its synced
size, so a retry of the same events never stores a seq twice.
:class:`~host_spec.host.store.jsonl.JsonlStore` opens these writers.

Preallocation: once a log passes :data:`PREALLOCATE_FROM` bytes, the writer keeps
zero-filled, already written space (:data:`PREALLOCATE_CHUNK` at a time) past its
end. A batch that lands inside that space changes no file metadata, so its sync
is one ``fdatasync`` (the disk's cheapest durable write, what SQLite's reused WAL
pays); a batch that grows the file is synced with ``fsync``. Event lines never
hold a NUL byte, so readers take the first NUL as the end of the log
(:func:`~host_spec.host.store.jsonl_format.parse_log`); :meth:`JsonlSessionLog.close`
trims the zeros again, so only a crash leaves them on disk, and resume trims them.
Short logs are never preallocated: most sessions stay small, and a chunk of zeros
would multiply their size on disk.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import structlog

from host_spec.errors import SequenceConflictError, SessionExistsError, SessionNotLiveError
from host_spec.events import Event, SessionHeader

from host_spec.host.store import writeback
from host_spec.host.store.jsonl_format import LOG_NAME, TEMP_NAME, encode_batch, header_line

__all__ = ["JsonlSessionLog", "PREALLOCATE_CHUNK", "PREALLOCATE_FROM"]

log = structlog.get_logger(__name__)

#: Logs shorter than this (bytes) grow by plain appends.
PREALLOCATE_FROM = 64 << 10
#: Zero-filled space is added in multiples of this many bytes.
PREALLOCATE_CHUNK = 1 << 20
_ZEROS = bytes(PREALLOCATE_CHUNK)
#: macOS has no ``fdatasync``: ``fsync`` there.
_HAS_DATASYNC = hasattr(os, "fdatasync")


def _write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class JsonlSessionLog:
    """The exclusive writer of one session log (holds its ``flock`` until :meth:`close`).

    Implements :class:`host_spec.storage.SessionLog`: ``append`` is one ``pwrite``
    at the end of the log, ``sync`` one ``fsync``. Not thread-safe: the owning
    ``Session`` runs at most one call at a time.
    """

    #: A local-file write may run on the event loop thread while it stays fast
    #: (see :mod:`host_spec.host.store.commit`); wrappers that can block must say ``False``.
    inline = True

    def __init__(
        self,
        directory: Path,
        header: SessionHeader,
        lock_fd: int,
        fd: int | None,
        size: int,
        tail_seq: int,
        *,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.directory = directory
        self.path = directory / LOG_NAME
        self.header = header
        self._lock_fd: int | None = lock_fd
        self._fd = fd  # None until the first batch materializes the file
        self._size = size  # synced bytes
        self._end = size  # bytes appended (synced or not)
        self._allocated = size  # bytes the file holds: the log, then zero-filled space
        self._grown = False  # the file size changed since the last sync
        self._synced = self._tail = tail_seq
        self._dirty = False  # bytes past _end may exist (a failed write whose truncate failed too)
        self._on_close = on_close  # releases the session tree's lock (one process per Team)

    @property
    def materialized(self) -> bool:
        return self._fd is not None

    @property
    def size(self) -> int:
        """Bytes of synced log (header included) on disk."""
        return self._size

    @property
    def tail_seq(self) -> int:
        return self._tail

    def _closed(self) -> SessionNotLiveError:
        return SessionNotLiveError(f"session {self.header.id}: writer is closed", session=self.header.id)

    def append(self, events: Sequence[Event], *, expected_seq: int) -> None:
        """Write ``events`` at the end of the log; the first batch materializes it durably.

        Raises:
            SequenceConflictError: the log does not end at ``expected_seq`` or the batch does not continue it.
            SessionNotLiveError: the writer was closed.
            SessionExistsError: materialization found another log at the path.
            OSError: the write failed (the file is truncated back to its synced size first).
        """
        if self._lock_fd is None:  # checked inline: this runs once per group commit
            raise self._closed()
        count = len(events)
        if expected_seq != self._tail or (
            count and (events[0].seq != expected_seq + 1 or events[-1].seq != expected_seq + count)
        ):
            raise SequenceConflictError(
                f"session {self.header.id}: append at seq {expected_seq} "
                f"(batch {events[0].seq if count else '-'}..) but the log ends at seq {self._tail}",
                session=self.header.id,
                expected=expected_seq,
                actual=self._tail,
            )
        if not count:
            return
        data = encode_batch(events)
        if self._fd is None:
            self._materialize(data)
            self._synced = self._tail = events[-1].seq
            return
        fd, end = self._fd, self._end + len(data)
        try:
            if self._dirty:
                os.ftruncate(fd, self._end)
                self._allocated = self._end
                self._dirty = False
            self._dirty = True
            written = os.pwrite(fd, data, self._end)  # one event line: a single pwrite, no loop
            if written < len(data):
                _write_all(fd, data[written:], self._end + written)
            if end > self._allocated:
                self._grown = True
                self._allocated = end
                if end >= PREALLOCATE_FROM:
                    self._preallocate(fd, end)
        except BaseException:
            self._roll_back(fd)
            raise
        self._dirty = False
        self._end = end
        self._tail = events[-1].seq

    def write_ahead(self, events: Sequence[Event], *, expected_seq: int) -> bool:
        """:meth:`append` now and start writing the bytes out; the next :meth:`sync` waits for them.

        The host calls this when it appends ahead of its sync (see
        :mod:`host_spec.host.store.writeback`); nothing is durable before the sync.
        A log not yet materialized declines (``False``, nothing stored): its first
        batch is a durable write of its own.

        Raises:
            Whatever :meth:`append` raises (the log is back at its synced tail).
        """
        if self._fd is None:
            return False
        self.append(events, expected_seq=expected_seq)
        writeback.start_writeback(self._fd, self._size, self._end - self._size)
        return True

    def _preallocate(self, fd: int, end: int) -> None:
        """Write zeros from ``end`` up to the next chunk boundary past it (synced with the batch).

        Best effort: on a nearly full disk the zeros may not fit while the batch
        did, and a log must never refuse events for want of spare space. The
        partial zeros are cut off again (if even that fails, the batch fails).
        """
        target = (end // PREALLOCATE_CHUNK + 1) * PREALLOCATE_CHUNK
        try:
            _write_all(fd, _ZEROS[: target - end], end)
        except OSError as exc:
            os.ftruncate(fd, end)
            log.info("session.preallocation_skipped", session=self.header.id, error=str(exc))
            return
        self._allocated = target

    def sync(self) -> None:
        """Make what was appended since the last sync durable; on failure drop it again.

        ``fdatasync`` when the batch stayed inside zero-filled space, ``fsync`` when
        it grew the file.

        Raises:
            SessionNotLiveError: the writer was closed.
            OSError: the fsync failed (the file is truncated back to its synced size first).
        """
        if self._lock_fd is None:
            raise self._closed()
        if self._end == self._size:
            return
        fd = self._fd
        assert fd is not None  # bytes were appended, so the log is materialized
        try:
            if self._grown or not _HAS_DATASYNC:
                os.fsync(fd)
            else:
                os.fdatasync(fd)
        except BaseException:
            self._roll_back(fd)
            raise
        self._grown = False
        self._size = self._end
        self._synced = self._tail

    def _roll_back(self, fd: int) -> None:
        """Forget everything appended since the last sync, on disk too when the disk lets us."""
        self._end, self._tail = self._size, self._synced
        self._dirty = True
        try:
            os.ftruncate(fd, self._size)
            os.fsync(fd)
            self._allocated, self._grown = self._size, False
            self._dirty = False
        except OSError:
            log.exception("session.truncate_failed", session=self.header.id, path=str(self.path))

    def _materialize(self, batch: bytes) -> None:
        data = header_line(self.header) + batch
        temp = self.directory / TEMP_NAME
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            _write_all(fd, data, 0)
            os.fsync(fd)
            try:
                os.link(temp, self.path)
            except FileExistsError:
                raise SessionExistsError(
                    f"session {self.header.id} already has a persisted log at {self.path}; resume it instead",
                    session=self.header.id,
                ) from None
        except BaseException:
            os.close(fd)
            temp.unlink(missing_ok=True)
            raise
        temp.unlink()
        _fsync_dir(self.directory)
        self._fd, self._size, self._end = fd, len(data), len(data)  # the temp's fd now names the published inode
        self._allocated = len(data)

    def close(self) -> None:
        """Trim the zero-filled space and any unsynced append, close the log and release the lock. Idempotent.

        Trimming needs no sync: a crash before it reaches the disk leaves zeros,
        which readers skip, or events that were never acknowledged as durable.
        """
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                if self._allocated > self._size and not self._dirty:
                    os.ftruncate(fd, self._size)
            except OSError:
                log.exception("session.trim_failed", session=self.header.id, path=str(self.path))
            finally:
                os.close(fd)
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the description releases the flock
            self._lock_fd = None
        if self._on_close is not None:
            release, self._on_close = self._on_close, None
            release()
