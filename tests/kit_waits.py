"""Waiting in tests: a bounded poll of a stated condition, never a bare sleep.

A sleep that "gives something time" is a guess: too short on a loaded machine
(flaky), too long everywhere else (slow), and it never says what it waits for.
Tests instead wait for the condition they need, by name:

* ``await until(predicate, what=...)`` polls on the event loop (threads, such as
  the storage worker, run meanwhile);
* ``until_sync(predicate, what=...)`` does the same from plain code (subprocesses,
  threads);
* ``await ready_work_ran()`` lets every callback that is already due run, before
  asserting that something did *not* happen (there is no event to wait for).

The bound is generous on purpose: it only turns a hang into a failure that
names the condition; it is not a speed claim (speed lives in ``benchmarks/``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

BOUND_S = 30.0
"""How long a condition may take before the test fails naming it."""

EAGER_TURNS = 2000
"""Loop turns during which :func:`until` checks after every turn before it backs off."""


async def until(predicate: Callable[[], object], *, what: str, timeout_s: float = BOUND_S) -> None:
    """Return once ``predicate()`` is truthy; fail naming ``what`` after ``timeout_s``.

    The predicate is checked after every loop turn at first, so a short-lived
    state between two awaits of the code under test is seen; after
    ``EAGER_TURNS`` turns it is checked every millisecond, which leaves the CPU
    to threads (the storage worker) and subprocesses.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    turns = 0
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")
        turns += 1
        await asyncio.sleep(0 if turns < EAGER_TURNS else 0.001)


def until_sync(predicate: Callable[[], object], *, what: str, timeout_s: float = BOUND_S) -> None:
    """:func:`until` for code outside the event loop (a subprocess, another thread)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(0.005)


async def ready_work_ran(turns: int = 20) -> None:
    """Run the loop ``turns`` times so every callback already due (and what it schedules) has run.

    Use it only before asserting that something did **not** happen; to wait for
    something that should happen, use :func:`until`.
    """
    for _ in range(turns):
        await asyncio.sleep(0)
