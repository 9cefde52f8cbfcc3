"""Give the C allocator's free memory back to the system after a one-off burst.

Resuming a long log is the one moment a live host allocates in proportion to its
history: the log is decoded whole (every fold needs every event), each fold's
first pass slices the whole history, and then the session forgets all but its
recent events. Python frees all of that, but glibc's ``malloc`` keeps freed heap
memory for reuse, and it only shrinks the heap from its top. The big blocks freed
during the resume also raise glibc's dynamic mmap threshold, so later blocks of
several MB come from the heap too; whether one small live block lands above them
is a matter of timing, so the same resume left a process at 42 MB one time and 57
MB the next (measured: one resume in four). ``malloc_trim(0)`` returns every free
page of the heap, wherever it lies, so what stays resident is what is held.

It is called once per such burst (a forget of at least :data:`BURST_EVENTS`
events), never on the hot path: a live session forgets 4,096 events at a time.
Where the call is missing (not glibc) :func:`release_free_memory` does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable
from typing import Final

__all__ = ["BURST_EVENTS", "available", "release_free_memory"]

#: A forget at least this large follows a resume of a long log (a live session forgets 4,096 at a time).
BURST_EVENTS: Final = 1 << 16


def _lookup() -> Callable[[int], int] | None:
    try:
        function = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):  # pragma: no cover - not glibc
        return None
    function.argtypes = (ctypes.c_size_t,)
    function.restype = ctypes.c_int
    return function


_malloc_trim = _lookup()


def available() -> bool:
    """Whether this platform's allocator can give free memory back (otherwise a no-op)."""
    return _malloc_trim is not None


def release_free_memory() -> None:
    """Return the C heap's free pages to the system (glibc ``malloc_trim(0)``; elsewhere nothing)."""
    if _malloc_trim is not None:  # pragma: no branch - the test machines run glibc
        _malloc_trim(0)
