"""The MCP sessions of one host, on an event loop of their own thread.

Why a thread: a member's first model call must already offer the servers'
tools, and the host registers tools from synchronous hooks. So the hub connects
every server while the plugin loads (in parallel, each within its own startup
timeout) and the load waits for the outcome; a server that failed is left out
with its reason. Keeping the SDK's anyio tasks on a loop of their own also keeps
their cancel scopes away from the host's tasks: a transport failure can never
cancel a host task. Tool calls are handed over with
``run_coroutine_threadsafe``; cancelling the host-side await (an interrupted
turn) cancels the call on the hub.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any, Final

import structlog

from host_spec.host.mcp.config import ServerConfig
from host_spec.host.mcp.connection import CLOSE_TIMEOUT_S, Connection
from host_spec.host.mcp.errors import McpServerError
from host_spec.host.sandbox.service import Sandbox

__all__ = ["Hub"]

log = structlog.get_logger(__name__)

#: Slack on top of the slowest server's startup timeout before the load stops waiting.
_START_SLACK_S: Final = 5.0


class Hub:
    """One host's connections: started once, called from the host's loop, closed on unload."""

    def __init__(self, servers: Mapping[str, ServerConfig], sandbox: Sandbox | None = None) -> None:
        self.connections = {name: Connection(name, config, sandbox) for name, config in servers.items()}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="dsh-mcp", daemon=True)
        self._closed = False

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    def start(self) -> None:
        """Connect every server (blocking, bounded); afterwards each is ``alive`` or has a ``failure``."""
        self._thread.start()
        if not self.connections:
            return
        bound = max(c.config.startup_timeout_ms for c in self.connections.values()) / 1000
        future = asyncio.run_coroutine_threadsafe(self._start_all(), self._loop)
        try:
            future.result(bound + CLOSE_TIMEOUT_S + _START_SLACK_S)
        except TimeoutError:  # every start is bounded; this only guards a hang in the SDK
            future.cancel()
            for connection in self.connections.values():
                if not connection.alive and connection.failure is None:
                    connection.failure = "did not start in time"

    async def _start_all(self) -> None:
        await asyncio.gather(*(c.start() for c in self.connections.values()))

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> Any:
        """Run one call on the hub's loop; awaited on the host's loop (cancellation crosses over).

        Raises:
            McpServerError: ``MCP_SERVER_UNAVAILABLE`` once the hub is closed, or the call's own failure.
        """
        if self._closed:
            raise McpServerError(f'MCP server "{server}" is not running: the host is shutting down',
                                 code="MCP_SERVER_UNAVAILABLE", server=server)
        future = asyncio.run_coroutine_threadsafe(self.connections[server].call(tool, arguments), self._loop)
        return await asyncio.wrap_future(future)

    async def close(self) -> None:
        """Close every session (each bounded) and stop the thread, without blocking the host's loop."""
        if self._closed:
            return
        self._closed = True
        if self._thread.is_alive():
            future = asyncio.run_coroutine_threadsafe(self._close_all(), self._loop)
            await asyncio.wrap_future(future)
            self._loop.call_soon_threadsafe(self._loop.stop)
            await asyncio.to_thread(self._thread.join, CLOSE_TIMEOUT_S)

    def close_now(self) -> None:
        """The blocking close, for an unload that never ran the async teardown."""
        if self._closed:
            return
        self._closed = True
        if self._thread.is_alive():
            future = asyncio.run_coroutine_threadsafe(self._close_all(), self._loop)
            try:
                future.result(CLOSE_TIMEOUT_S * 2)
            except Exception:
                log.exception("MCP sessions did not close cleanly")
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(CLOSE_TIMEOUT_S)

    async def _close_all(self) -> None:
        await asyncio.gather(*(c.close() for c in self.connections.values()), return_exceptions=True)
