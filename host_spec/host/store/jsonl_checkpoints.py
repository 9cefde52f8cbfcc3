"""Checkpoints beside a JSONL log: one file per name, replaced atomically.

Layout: ``<root>/sessions/<encoded-id>/checkpoint-<name>.bin`` next to the
session's ``session.jsonl``. The file is one JSON line (format version, the seq
covered, the payload's length and BLAKE2b digest) and then the payload bytes.

Why the steps of :meth:`JsonlCheckpoints.save`: the new file is written to a
temporary name, fsynced, renamed over the old one, and the directory fsynced.
A rename within one directory is atomic, so a crash at any step leaves either
the previous checkpoint or the new one under the real name; a temporary file a
crash left behind is never read and is truncated by the next save. The length
and digest make a damaged file (a medium that lost blocks) read as absent, never
as a payload: a checkpoint is a cache, and a missing one only costs a full fold.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from pathlib import Path
from typing import Final

import msgspec
import structlog

from host_spec.host.store.jsonl_format import encode_id

__all__ = ["JsonlCheckpoints", "checked_name"]

log = structlog.get_logger(__name__)

#: The version of a checkpoint file's first line.
FILE_VERSION: Final = 1
_NAME: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


class _Head(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    version: int
    seq: int
    size: int
    blake2b: str


_ENCODE: Final = msgspec.json.Encoder()
_DECODE: Final = msgspec.json.Decoder(_Head)


def checked_name(name: str, seq: int = 0) -> str:
    """``name`` if it is a plain word (it becomes part of a file name) and ``seq`` is not negative.

    Raises:
        ValueError: otherwise.
    """
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise ValueError(f"checkpoint name {name!r} is not a plain lowercase word")
    if seq < 0:
        raise ValueError(f"checkpoint seq {seq} is negative")
    return name


def _digest(payload: bytes) -> str:
    return hashlib.blake2b(payload, digest_size=16).hexdigest()


class JsonlCheckpoints:
    """The checkpoints of the sessions under one ``sessions`` directory (implements ``host_spec.storage.Checkpoints``)."""

    def __init__(self, sessions_dir: Path) -> None:
        self.sessions_dir = sessions_dir
        #: One save at a time in this process: the temporary name is fixed per checkpoint.
        self._lock = threading.Lock()

    def path(self, session_id: str, name: str) -> Path:
        """The file of checkpoint ``name`` of ``session_id`` (it may not exist)."""
        return self.sessions_dir / encode_id(session_id) / f"checkpoint-{checked_name(name)}.bin"

    def save(self, session_id: str, name: str, seq: int, payload: bytes) -> None:
        checked_name(name, seq)
        path = self.path(session_id, name)
        head = _ENCODE.encode(_Head(FILE_VERSION, seq, len(payload), _digest(payload))) + b"\n"
        temp = path.with_suffix(".tmp")
        with self._lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, head)
                view = memoryview(payload)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, path)
            directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)

    def load(self, session_id: str, name: str) -> tuple[int, bytes] | None:
        path = self.path(session_id, name)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("checkpoint.unreadable", path=str(path), error=exc.strerror)
            return None
        end = data.find(b"\n")
        try:
            head = _DECODE.decode(data[:end] if end >= 0 else data)
        except msgspec.DecodeError:
            head = None
        payload = data[end + 1 :]
        if head is None or head.version != FILE_VERSION or head.size != len(payload) or head.blake2b != _digest(payload):
            log.warning("checkpoint.damaged", path=str(path))
            return None
        return head.seq, payload
