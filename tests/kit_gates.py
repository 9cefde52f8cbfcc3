"""Gates shared by the host and Team suites: park a turn, or a session's writes, at a known point.

A test holds an agent "running" by scripting a ``block`` call; the turn waits at
that agent's gate until the test opens it (or the turn is cancelled). This is a
plugin of the test, loaded through the real plugin manager: nothing of ours is
replaced. A test holds or fails a session's *writes* through the contract's
fault-injecting storage (:func:`faulty_log`), which the host was opened with.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from host_spec import hookimpl
from host_spec.host.agents.loop import race
from host_spec.host.store.session import Session
from host_spec.records import ToolSpec
from host_spec.testing import FaultyLog

BLOCK = {"name": "block", "arguments": {}}


class BlockArgs(msgspec.Struct, forbid_unknown_fields=True):
    """Wait until the test opens this agent's gate."""


class BlockResult(msgspec.Struct):
    opened: bool


class Gates:
    """A ``block`` tool plugin: each agent name has a gate; ``parked`` tells the test the turn waits there."""

    def __init__(self) -> None:
        self.gates: dict[str, asyncio.Event] = {}
        self.entered: dict[str, asyncio.Event] = {}

    def gate(self, name: str) -> asyncio.Event:
        return self.gates.setdefault(name, asyncio.Event())

    def entry(self, name: str) -> asyncio.Event:
        return self.entered.setdefault(name, asyncio.Event())

    def open(self, name: str) -> None:
        self.gate(name).set()

    async def parked(self, name: str) -> None:
        await self.entry(name).wait()

    async def _block(self, args: BlockArgs, call: Any) -> BlockResult:
        name = call.agent.name
        self.entry(name).set()
        finished, _ = await race(self.gate(name).wait(), call.signal)
        return BlockResult(opened=finished)

    @hookimpl
    def dsh_plugin_loaded(self, host: Any, ctx: Any) -> None:
        ctx.own(host.tools.register(ToolSpec("block", "Wait for the gate.", BlockArgs, BlockResult, self._block)))


def faulty_log(
    session: Session,
    *,
    fail_at: Sequence[int] = (),
    fail_from: int | None = None,
    hold: bool = False,
    on_write: Callable[[int], Any] | None = None,
) -> FaultyLog:
    """The fault controls of ``session``'s log, armed from now on (its writes go to a thread).

    Write numbers count from this call (1 = the next write): ``fail_at`` fails
    those writes, ``fail_from`` every write from that number on; ``on_write(n)``
    runs in the writing thread before write ``n`` is decided; ``hold`` holds
    writes until ``release()``. The host must have been opened with
    ``wrap_storage=FaultyStorage`` (the suites' ``open_host`` / ``open_team`` do).
    """
    log = session.backend
    assert isinstance(log, FaultyLog), f"session {session.id} was not opened through FaultyStorage"
    log.threaded = True
    log.writes = 0
    failing = set(fail_at)
    if failing or fail_from is not None:
        log.fail_when(lambda n: n in failing or (fail_from is not None and n >= fail_from))
    if on_write is not None:
        log.before_write(on_write)
    if hold:
        log.hold()
    return log
