"""One group-commit batch: the write it stands for and the flushers it wakes.

A batch is the unit :mod:`.commit` writes: a session's events up to ``end``,
appended to the log at its written tail (the append's compare-and-set) and then
synced, and the futures of every flusher waiting for that write. Flushers may
wait on different event loops and a write may finish in a worker thread, so the
two loop primitives a batch is formed and delivered by live here too: which
loop, if any, runs in this thread, and one pass of the loop that lets the tasks
already scheduled join a forming batch.

:class:`~.commit.GroupCommit` holds the policy (when a batch forms, where it is
written, who is told and when); these pieces know nothing of a session's state.
They are plain module functions, so the commit reaches each with one global
lookup.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Generator, Sequence

from host_spec.events import Event
from host_spec.storage import SessionLog

__all__ = ["Batch", "BatchWrite", "loop_pass", "running_loop", "wake", "write_batch"]


BatchWrite = tuple[SessionLog, int, Sequence[Event]]


def write_batch(job: BatchWrite) -> None:
    """One batch ``(log, tail, events)``: appended at the durable tail, then synced."""
    target, tail, events = job
    target.append(events, expected_seq=tail)
    target.sync()


@types.coroutine
def loop_pass() -> Generator[None, None, None]:
    """One pass of the event loop (what ``asyncio.sleep(0)`` does, without its call)."""
    yield


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, if any (``None`` in a worker thread)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Batch:
    """One write: the events up to ``end`` and the flushers waiting for it."""

    __slots__ = ("end", "foreign", "loop", "waiters")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.end = 0  # set on submission
        self.loop = loop  # where the flushed notification goes
        self.waiters: list[asyncio.Future[None]] = []
        self.foreign = False  # a waiter from another loop joined


def wake(waiters: list[asyncio.Future[None]], error: BaseException | None) -> None:
    """Resolve each waiter still pending with the write's outcome (on the waiters' loop)."""
    for waiter in waiters:
        if not waiter.done():
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)
