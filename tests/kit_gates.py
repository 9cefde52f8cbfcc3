"""The ``block`` tool shared by the host and Team suites: park a turn at a known point.

A test holds an agent "running" by scripting a ``block`` call; the turn waits at
that agent's gate until the test opens it (or the turn is cancelled). This is a
plugin of the test, loaded through the real plugin manager: nothing of ours is
replaced.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from host_spec import hookimpl
from host_spec.host.agents.loop import race
from host_spec.records import ToolSpec

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
