"""Start writing a byte range of a file out to the disk, without waiting for it.

A durable append is ``pwrite`` then ``fdatasync``; ``fdatasync`` both sends the
dirty page to the device and waits for it, so everything the host does between
the two (running observers, folding the Team) is added to the disk's latency.
Linux's ``sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE)`` only
*starts* the write-out of the range's dirty pages: the later ``fdatasync`` waits
for what is left and flushes the device cache, so durability is exactly what it
was. It is no durability primitive on its own (it neither waits nor flushes),
and it is only a hint: where the call is missing (macOS, a libc without it) or
fails, :func:`start_writeback` does nothing.

The standard library has no binding for it, so it is called through ``ctypes``
(looked up once at import).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

__all__ = ["available", "start_writeback"]

#: ``SYNC_FILE_RANGE_WRITE`` from ``<fcntl.h>``: start write-out of dirty pages not already being written.
_WRITE = 2


def _lookup() -> Callable[[int, int, int, int], int] | None:
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (AttributeError, OSError):  # pragma: no cover - not Linux/glibc
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint)
    function.restype = ctypes.c_int
    return function


_sync_file_range = _lookup()


def available() -> bool:
    """Whether this platform can start a write-out (otherwise :func:`start_writeback` is a no-op)."""
    return _sync_file_range is not None


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to start writing ``length`` bytes at ``offset`` of ``fd`` to the disk.

    Returns at once; errors are ignored (the sync that follows reports any real
    failure of the medium).
    """
    if _sync_file_range is not None and length > 0:
        _sync_file_range(fd, offset, length, _WRITE)
