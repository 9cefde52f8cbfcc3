"""File content as the tools see it: checked UTF-8 text, its digest, and atomic replacement.

Every tool that reads a file goes through :func:`load_text`, so the same bad
input (a directory, a binary, a huge or non-UTF-8 file) fails with the same code
everywhere and before anything is written. Versions are sha256 digests of the
raw bytes, never timestamps: a formatter that rewrites a file with identical
bytes changes nothing, one that changes a byte always changes the version.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import secrets
import stat
from pathlib import Path
from typing import Final

import attrs

from host_spec.workspace import WorkspaceCode, WorkspaceError

__all__ = ["Text", "digest", "load_text", "atomic_write", "short_diff"]

_BINARY_PROBE: Final = 8192


def digest(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


@attrs.frozen
class Text:
    """A file's decoded text and the digest of its bytes."""

    text: str
    sha256: str
    size: int


def load_text(path: Path, shown: str, *, max_bytes: int) -> Text:
    """Read ``path`` as UTF-8 text.

    Args:
        path: The resolved path.
        shown: The path as the model named it (for messages).
        max_bytes: Larger files are refused rather than half-read.

    Raises:
        WorkspaceError: ``FILE_NOT_FOUND``, ``NOT_A_FILE``, ``FILE_TOO_LARGE``,
            ``BINARY_FILE`` (a NUL byte near the start) or ``NOT_UTF8``.
    """
    try:
        info = path.stat()
    except FileNotFoundError:
        raise WorkspaceError(f"{shown} does not exist", code=WorkspaceCode.FILE_NOT_FOUND, path=shown) from None
    if not stat.S_ISREG(info.st_mode):
        raise WorkspaceError(f"{shown} is not a regular file", code=WorkspaceCode.NOT_A_FILE, path=shown)
    data = _read_at_most(path, shown, max_bytes + 1)  # never more than the limit, even if the file grows meanwhile
    if len(data) > max_bytes:
        raise WorkspaceError(f"{shown} has more than {max_bytes} bytes (the limit)", code=WorkspaceCode.FILE_TOO_LARGE,
                             path=shown)
    if b"\x00" in data[:_BINARY_PROBE]:
        raise WorkspaceError(f"{shown} is a binary file", code=WorkspaceCode.BINARY_FILE, path=shown)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WorkspaceError(f"{shown} is not UTF-8 text (byte {exc.start})", code=WorkspaceCode.NOT_UTF8,
                             path=shown) from None
    return Text(text, digest(data), len(data))


def _read_at_most(path: Path, shown: str, size: int) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read(size)
    except OSError as exc:
        raise WorkspaceError(f"cannot read {shown}: {exc.strerror}", code=WorkspaceCode.IO_ERROR, path=shown) from None


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so a reader sees the old or the new bytes, never a mix.

    A temp file in the same directory is written and fsynced, takes the old file's
    permission bits, is renamed over the target, and the directory is fsynced so
    the rename itself survives a power cut. Missing parent directories are created.

    Raises:
        WorkspaceError: ``IO_ERROR``; the target is untouched and the temp file removed.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.dsh-tmp")
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            mode = 0o644
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temp, mode)  # the umask may have narrowed the create mode
            os.replace(temp, path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except OSError as exc:
        raise WorkspaceError(f"cannot write {path.name}: {exc.strerror}", code=WorkspaceCode.IO_ERROR) from None


def short_diff(before: str, after: str, *, max_lines: int) -> str:
    """A unified diff from ``before`` (the agent's read) to ``after`` (the file now), capped."""
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), "your read", "current", lineterm="", n=1))
    if len(lines) > max_lines:
        hidden = len(lines) - max_lines
        lines = [*lines[:max_lines], f"... ({hidden} more diff lines; read the file again)"]
    return "\n".join(lines)
