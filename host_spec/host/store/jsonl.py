"""One JSONL file per session: a header line, then one event per line.

Layout: ``<root>/sessions/<encoded-id>/session.jsonl`` plus ``session.jsonl.lock``.
:class:`JsonlStore` implements :class:`host_spec.storage.StorageBackend`; the
writer it opens (:class:`~host_spec.host.store.jsonl_log.JsonlSessionLog`)
materializes the log atomically on its first batch and appends with one
``pwrite`` + one sync per batch (``fdatasync`` inside preallocated space). A per-session ``flock`` keeps a second
process from writing the same log, and a per-tree lock
(:mod:`~host_spec.host.store.team_lock`) keeps every session of one Team in one
process.

Reading is tolerant only where a crash can explain the damage: a final line
without its newline (or an unparsable final line) is a torn tail, dropped with
a warning, and the zero-filled space a crashed writer preallocated is no line
at all. Anything wrong before the tail is corruption, named by line number.
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
    encode_id,
    parse_header,
    parse_log,
)
from host_spec.host.store.jsonl_checkpoints import JsonlCheckpoints
from host_spec.host.store.jsonl_log import JsonlSessionLog
from host_spec.host.store.team_lock import TeamLocks

__all__ = ["JsonlSessionLog", "JsonlStore", "decode_id", "encode_id"]

log = structlog.get_logger(__name__)


class JsonlStore:
    """Session logs under ``root`` (one store per data directory).

    Implements :class:`host_spec.storage.StorageBackend` and
    :class:`host_spec.storage.CheckpointingBackend` (checkpoints beside each log:
    :mod:`~host_spec.host.store.jsonl_checkpoints`).
    """

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.sessions_dir = self.root / "sessions"
        self.teams = TeamLocks(self.root, self.sessions_dir)
        self.checkpoints = JsonlCheckpoints(self.sessions_dir)

    def __repr__(self) -> str:
        return f"JsonlStore({str(self.root)!r})"

    def path(self, session_id: str) -> Path:
        """The log file of ``session_id`` (it may not exist yet)."""
        return self.sessions_dir / encode_id(session_id) / LOG_NAME

    def exists(self, session_id: str) -> bool:
        return self.path(session_id).is_file()

    def list_ids(self) -> list[str]:
        """Stored session ids in creation order (header ``created_at``, then id); damaged headers are skipped."""
        return self.scan()[0]

    def scan(self) -> tuple[list[str], list[SessionError]]:
        """Stored session ids in creation order, and one error per log whose header is unreadable.

        A caller that *chooses* a session (the most recent root) must not ignore the
        errors: the damaged log may be the one it would have chosen.
        """
        try:
            entries = list(os.scandir(self.sessions_dir))
        except FileNotFoundError:
            return [], []
        except OSError as exc:
            raise SessionError(f"cannot read session data at {self.sessions_dir}: {exc.strerror}") from exc
        found: list[tuple[int, str]] = []
        damaged: list[SessionError] = []
        for entry in entries:
            path = Path(entry.path) / LOG_NAME
            try:
                with path.open("rb") as handle:
                    header = parse_header(handle.readline().rstrip(b"\n"), path)
            except FileNotFoundError:
                continue  # a created but not yet materialized session
            except (OSError, SessionError) as exc:
                log.warning("session.unlistable", path=str(path), error=str(exc))
                damaged.append(exc if isinstance(exc, SessionError) else SessionCorruptError(f"{path}: {exc}", path=str(path)))
                continue
            found.append((header.created_at, header.id))
        return [session_id for _, session_id in sorted(found)], damaged

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

    def create(self, header: SessionHeader) -> JsonlSessionLog:
        """Lock a new session for writing; its log is materialized by the first append.

        Raises:
            SessionLockedError: another process (or writer) holds the lock.
            SessionExistsError: a log is already stored under this id.
        """
        release = self.teams.acquire(header.id, header.parent_session)
        try:
            directory, lock_fd = self._lock(header.id)
        except BaseException:
            release()
            raise
        try:
            if (directory / LOG_NAME).exists():
                raise SessionExistsError(
                    f"session {header.id} already has a persisted log on disk; resume it instead of creating",
                    session=header.id,
                )
            (directory / TEMP_NAME).unlink(missing_ok=True)  # left by a crash mid-materialization
        except BaseException:
            os.close(lock_fd)
            release()
            raise
        return JsonlSessionLog(directory, header, lock_fd, None, 0, 0, on_close=release)

    def resume(self, session_id: str) -> tuple[JsonlSessionLog, list[Event]]:
        """Lock a stored session, repair a torn tail, and return its writer and events.

        The writer's ``header`` is the stored header.

        Raises:
            SessionLockedError: another process (or writer) holds the lock.
            SessionNotFoundError / SessionCorruptError / SessionFormatError: as for :meth:`read`.
        """
        release = self.teams.acquire(session_id, self.teams.stored_parent(session_id))
        try:
            directory, lock_fd = self._lock(session_id)
        except BaseException:
            release()
            raise
        try:
            scan = self._scan(session_id)
            fd = os.open(directory / LOG_NAME, os.O_WRONLY | os.O_CLOEXEC)
        except BaseException:
            os.close(lock_fd)
            release()
            raise
        if scan.good_size < scan.size:  # a torn line and/or zero-filled space a crash left behind
            os.ftruncate(fd, scan.good_size)
            os.fsync(fd)
            if scan.torn:
                log.warning("session.torn_tail_repaired", session=session_id, size=scan.good_size)
            else:
                log.info("session.preallocation_trimmed", session=session_id, size=scan.good_size)
        log_ = JsonlSessionLog(directory, scan.header, lock_fd, fd, scan.good_size, len(scan.events), on_close=release)
        return log_, scan.events

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
