"""One JSONL file per session: a header line, then one event per line.

Layout: ``<root>/sessions/<encoded-id>/session.jsonl`` plus ``session.jsonl.lock``.
The first batch is *materialized* atomically (temp file, fsync, ``link`` onto the
final name, directory fsync) so a crash never leaves a headerless log and two
creators cannot both win. Later batches are one ``pwrite`` at the committed size
plus one ``fsync``; a failed write truncates back, so a retry never duplicates a
seq. A per-session ``flock`` keeps a second process from writing the same log.

Reading is tolerant only where a crash can explain the damage: a final line
without its newline (or an unparsable final line) is a torn tail, dropped with
a warning. Anything wrong before the tail is corruption, named by line number.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Sequence
from pathlib import Path

import structlog

from host_spec.errors import (
    SessionCorruptError,
    SessionError,
    SessionExistsError,
    SessionLockedError,
    SessionNotFoundError,
)
from host_spec.events import Event, SessionHeader

from host_spec.host.store.jsonl_format import (
    LOCK_NAME,
    LOG_NAME,
    TEMP_NAME,
    Scan,
    decode_id,
    encode_batch,
    encode_id,
    header_line,
    parse_header,
    parse_log,
)

__all__ = ["JsonlStore", "SessionBackend", "decode_id", "encode_id"]

log = structlog.get_logger(__name__)


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


class SessionBackend:
    """The exclusive writer of one session log (holds its ``flock`` until :meth:`close`).

    Not thread-safe: the owning ``Session`` runs at most one ``write`` at a time.
    """

    #: A local-file write may run on the event loop thread while it stays fast
    #: (see :mod:`host_spec.host.store.commit`); wrappers that can block must say ``False``.
    inline = True

    def __init__(self, directory: Path, header: SessionHeader, lock_fd: int, fd: int | None, size: int) -> None:
        self.directory = directory
        self.path = directory / LOG_NAME
        self.header = header
        self._lock_fd: int | None = lock_fd
        self._fd = fd  # None until the first batch materializes the file
        self._size = size
        self._dirty = False  # bytes past _size may exist (a failed write whose truncate failed too)

    @property
    def materialized(self) -> bool:
        return self._fd is not None

    @property
    def size(self) -> int:
        """Bytes of committed log (header included) on disk."""
        return self._size

    def write(self, events: Sequence[Event]) -> None:
        """Durably append ``events`` (write + one fsync); on failure nothing stays behind.

        Raises:
            SessionError: the backend was closed.
            SessionExistsError: materialization found another log at the path.
            OSError: the write or fsync failed (the file is truncated back first).
        """
        if self._lock_fd is None:
            raise SessionError(f"session {self.header.id}: writer is closed", code="SESSION_NOT_LIVE")
        if not events:
            return
        if self._fd is None:
            self._materialize(encode_batch(events))
            return
        data = encode_batch(events)
        fd = self._fd
        try:
            if self._dirty:
                os.ftruncate(fd, self._size)
                self._dirty = False
            self._dirty = True
            _write_all(fd, data, self._size)
            os.fsync(fd)
        except BaseException:
            self._truncate_back(fd)
            raise
        self._dirty = False
        self._size += len(data)

    def _truncate_back(self, fd: int) -> None:
        try:
            os.ftruncate(fd, self._size)
            os.fsync(fd)
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
        self._fd, self._size = fd, len(data)  # the temp's fd now names the published inode

    def close(self) -> None:
        """Close the log and release the lock. Idempotent."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the description releases the flock
            self._lock_fd = None


class JsonlStore:
    """Session logs under ``root`` (one store per data directory)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.sessions_dir = self.root / "sessions"

    def __repr__(self) -> str:
        return f"JsonlStore({str(self.root)!r})"

    def path(self, session_id: str) -> Path:
        """The log file of ``session_id`` (it may not exist yet)."""
        return self.sessions_dir / encode_id(session_id) / LOG_NAME

    def exists(self, session_id: str) -> bool:
        return self.path(session_id).is_file()

    def list_ids(self) -> list[str]:
        """Stored session ids in creation order (header ``created_at``, then id)."""
        try:
            entries = list(os.scandir(self.sessions_dir))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise SessionError(f"cannot read session data at {self.sessions_dir}: {exc.strerror}") from exc
        found: list[tuple[int, str]] = []
        for entry in entries:
            path = Path(entry.path) / LOG_NAME
            try:
                with path.open("rb") as handle:
                    header = parse_header(handle.readline().rstrip(b"\n"), path)
            except FileNotFoundError:
                continue  # a created but not yet materialized session
            except (OSError, SessionError) as exc:
                log.warning("session.unlistable", path=str(path), error=str(exc))
                continue
            found.append((header.created_at, header.id))
        return [session_id for _, session_id in sorted(found)]

    def read(self, session_id: str) -> tuple[SessionHeader, list[Event]]:
        """Read a stored session without locking or repairing it.

        Raises:
            SessionNotFoundError: no log is stored under this id.
            SessionCorruptError: the header or a committed line is unreadable, or a seq is missing.
            SessionFormatError: the log has a foreign format version.
            SessionError: the data directory cannot be read.
        """
        scan = self._scan(session_id)
        return scan.header, scan.events

    def _scan(self, session_id: str) -> Scan:
        path = self.path(session_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise SessionNotFoundError(f"session {session_id} not found", session=session_id) from None
        except OSError as exc:
            raise SessionError(f"cannot read session data at {path}: {exc.strerror}", path=str(path)) from exc
        scan = parse_log(path, data)
        if scan.header.id != session_id:
            raise SessionCorruptError(
                f"{path}: stored session identity mismatch ({scan.header.id!r} != {session_id!r})", path=str(path)
            )
        return scan

    def open_writer(self, header: SessionHeader, *, create: bool) -> SessionBackend:
        """Lock the session for writing.

        ``create=True`` prepares a new log (materialized by its first write);
        ``create=False`` opens the stored one, repairing a torn tail first.

        Raises:
            SessionLockedError: another process (or writer) holds the lock.
            SessionExistsError: ``create`` and a log is already stored.
            SessionNotFoundError: not ``create`` and nothing is stored.
        """
        if create:
            directory, lock_fd = self._lock(header.id)
            try:
                if (directory / LOG_NAME).exists():
                    raise SessionExistsError(
                        f"session {header.id} already has a persisted log on disk; resume it instead of creating",
                        session=header.id,
                    )
                (directory / TEMP_NAME).unlink(missing_ok=True)  # left by a crash mid-materialization
            except BaseException:
                os.close(lock_fd)
                raise
            return SessionBackend(directory, header, lock_fd, None, 0)
        backend, _ = self.resume(header.id)
        return backend

    def resume(self, session_id: str) -> tuple[SessionBackend, list[Event]]:
        """Lock a stored session, repair a torn tail, and return its writer and events.

        The backend's ``header`` is the stored header. Raises like :meth:`open_writer`
        and :meth:`read`.
        """
        directory, lock_fd = self._lock(session_id)
        try:
            scan = self._scan(session_id)
            fd = os.open(directory / LOG_NAME, os.O_WRONLY | os.O_CLOEXEC)
        except BaseException:
            os.close(lock_fd)
            raise
        if scan.good_size < scan.size:
            os.ftruncate(fd, scan.good_size)
            os.fsync(fd)
            log.warning("session.torn_tail_repaired", session=session_id, size=scan.good_size)
        return SessionBackend(directory, scan.header, lock_fd, fd, scan.good_size), scan.events

    def _lock(self, session_id: str) -> tuple[Path, int]:
        directory = self.sessions_dir / encode_id(session_id)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            lock_fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise SessionError(f"cannot open session data at {directory}: {exc.strerror}", path=str(directory)) from exc
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock_fd)
            raise SessionLockedError(
                f"session {session_id} is open for writing in another process", session=session_id
            ) from None
        return directory, lock_fd
