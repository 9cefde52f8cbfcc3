"""One MCP server's session, held open by one long-lived task.

The SDK runs on anyio: its ``Client`` must be entered and left by the same task,
and a transport failure cancels the task that entered it. So one *owner* task per
server enters the client, lists the tools and then only waits to be told to stop;
tool calls run in their own tasks and race the owner's end. A server that dies
(its process killed, its HTTP endpoint gone) ends the owner or closes the
connection under a call: the call fails with ``MCP_SERVER_DIED`` (its effect is
unknown: MCP calls are not idempotent, so nothing retries them), the connection
is marked dead and its tools stop being offered. There is no automatic restart:
a server that keeps dying would otherwise be re-run behind the model's back.

Everything here runs on the hub's event loop (:mod:`host_spec.host.mcp.hub`),
never on the host's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Final

import attrs
import structlog

from host_spec.host.mcp.config import ServerConfig, secrets_of
from host_spec.host.mcp.errors import McpServerError, Scrubber, describe
from host_spec.host.mcp.names import tool_name
from host_spec.host.sandbox.service import Prepared, Sandbox

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["Connection", "ServerTool", "CLOSE_TIMEOUT_S"]

log = structlog.get_logger(__name__)

#: How long a stopping server may take to close before its owner task is cancelled.
CLOSE_TIMEOUT_S: Final = 5.0
#: Lines of a stdio server's stderr quoted (scrubbed) in a failure: its last ones, and while
#: calls are in flight only those written since the earliest of them started (earlier
#: lines are about other work, and would only mislead).
STDERR_LINES: Final = 5
#: Bytes read from the end of a stdio server's stderr to find those lines.
STDERR_TAIL_BYTES: Final = 4096
#: Characters of a server's instructions passed to the model at most.
MAX_INSTRUCTIONS_CHARS: Final = 2048
_PAGES: Final = 100


@attrs.frozen
class ServerTool:
    """One tool as the server listed it, with the name the model sees."""

    name: str
    tool: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool = False


def _input_schema(raw: Any) -> dict[str, Any]:
    schema = dict(raw) if isinstance(raw, dict) else {}
    schema.setdefault("type", "object")
    schema.pop("title", None)  # developer text, paid on every step
    return schema


@contextlib.asynccontextmanager
async def _with_headers(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """Streamable HTTP with ``headers`` on every request; the HTTP client is closed with the transport."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    # The SDK's own defaults for an MCP client: 30 s to connect and write, 300 s to read a stream.
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)) as client, \
            streamable_http_client(url, http_client=client) as streams:
        yield streams


class Connection:
    """The session with one server (see the module docstring)."""

    def __init__(self, name: str, config: ServerConfig, sandbox: Sandbox | None = None) -> None:
        self.name = name
        self.config = config
        self.sandbox = sandbox if sandbox is not None else Sandbox()
        self._prepared: Prepared | None = None
        self.scrub = Scrubber(secrets_of(config))
        self.tools: list[ServerTool] = []
        #: What the server asks its clients to tell the model (``instructions``), scrubbed and bounded.
        self.instructions = ""
        #: Why the server is not usable (``None`` while it is); already scrubbed.
        self.failure: str | None = None
        self._client: Client | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._ended = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        #: Where the stderr file ended when each call in flight started (call number -> offset).
        self._call_marks: dict[int, int] = {}
        self._calls = 0

    @property
    def alive(self) -> bool:
        return self._client is not None and self.failure is None

    def _target(self) -> Any:
        from mcp import StdioServerParameters

        config = self.config
        if config.transport == "stdio":
            assert config.command is not None
            policy = self.sandbox.policy_for(None)  # a server is the profile's, not one member's
            policy = attrs.evolve(policy, name=config.sandbox or policy.name,
                                  network=policy.network if config.network is None else config.network)
            cwd = config.cwd or os.getcwd()
            # The files the server's own command line names (its script), wherever they are: a
            # checkout under /tmp or the home would otherwise be out of the sandbox's sight.
            named = [os.path.join(cwd, arg) for arg in (config.command, *config.args)]
            self._prepared = prepared = self.sandbox.prepare(policy, cwd, [config.command, *config.args],
                                                             env=config.env, shown=named)
            return StdioServerParameters(command=prepared.argv[0], args=prepared.argv[1:], env=prepared.env, cwd=cwd)
        assert config.url is not None
        if config.transport == "sse":
            from mcp.client.sse import sse_client

            return sse_client(config.url, headers=dict(config.headers) or None)
        if not config.headers:
            return config.url
        return _with_headers(config.url, dict(config.headers))

    def _stderr_end(self) -> int:
        """The stderr file's current end (0 when it cannot be read)."""
        try:
            self._stderr.flush()
            return self._stderr.seek(0, 2)
        except (OSError, ValueError):
            return 0

    def _stderr_tail(self) -> str:
        since = min(self._call_marks.values(), default=0)
        try:
            size = self._stderr_end()
            self._stderr.seek(max(since, size - STDERR_TAIL_BYTES))  # a chatty server's file may be long
            lines = [line.rstrip() for line in self._stderr.read().splitlines() if line.strip()]
        except (OSError, ValueError):
            return ""
        tail = " | ".join(lines[-STDERR_LINES:])
        return f" (stderr: {self.scrub(tail)})" if tail else ""

    def _fail(self, why: str) -> str:
        if self.failure is None:
            self.failure = self.scrub(why) + (self._stderr_tail() if self.config.transport == "stdio" else "")
            log.error("MCP server unavailable", server=self.name, reason=self.failure)
        self._client = None
        return self.failure

    async def start(self) -> None:
        """Connect and list the tools, within ``startup_timeout_ms``; a failure is kept in ``failure``."""
        self._task = asyncio.create_task(self._own(), name=f"mcp:{self.name}")
        timeout = self.config.startup_timeout_ms / 1000
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except TimeoutError:
            self._fail(f"did not start within {self.config.startup_timeout_ms} ms")
            await self.close()

    async def _own(self) -> None:
        from mcp import Client

        try:
            target = self._target()
            if self.config.transport == "stdio":
                from mcp.client.stdio import stdio_client

                target = stdio_client(target, errlog=self._stderr)
            async with Client(target) as client:
                self.tools = await self._list(client)
                self.instructions = self.scrub((client.instructions or "").strip())[:MAX_INSTRUCTIONS_CHARS]
                self._client = client
                self._ready.set()
                await self._stop.wait()
        except asyncio.CancelledError:
            if not self._stop.is_set():
                self._fail("the connection was lost")
        except Exception as exc:
            self._fail(describe(exc) if not self._ready.is_set() else f"the connection was lost: {describe(exc)}")
        finally:
            self._client = None
            if self._prepared is not None:
                await self._prepared.release()
            self._ready.set()
            self._ended.set()
            self._stderr.close()

    async def _list(self, client: Client) -> list[ServerTool]:
        tools: list[ServerTool] = []
        seen: set[str] = set()
        cursor: str | None = None
        for _ in range(_PAGES):
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:
                name = tool_name(self.name, tool.name)
                if name in seen:
                    log.warning("MCP tool name taken after sanitising; skipped", server=self.name, tool=tool.name)
                    continue
                seen.add(name)
                read_only = tool.annotations is not None and tool.annotations.read_only_hint is True
                tools.append(ServerTool(name, tool.name, tool.description or tool.title or tool.name,
                                        _input_schema(tool.input_schema), read_only))
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """Call ``tool``; the SDK's ``CallToolResult``.

        Raises:
            McpServerError: ``MCP_SERVER_UNAVAILABLE``, ``MCP_SERVER_DIED``, ``MCP_TOOL_TIMEOUT``
                or ``MCP_TOOL_ERROR`` (a JSON-RPC error answer), naming the server.
        """
        client = self._client
        if client is None or self.failure is not None:
            raise McpServerError(f'MCP server "{self.name}" is not running: {self.failure}',
                                 code="MCP_SERVER_UNAVAILABLE", server=self.name)
        self._calls += 1
        number = self._calls
        self._call_marks[number] = self._stderr_end()
        try:
            return await self._call(client, tool, arguments)
        finally:
            del self._call_marks[number]

    async def _call(self, client: Client, tool: str, arguments: dict[str, Any]) -> Any:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED
        from pydantic import ValidationError

        call = asyncio.ensure_future(client.call_tool(tool, arguments))
        ended = asyncio.ensure_future(self._ended.wait())
        limit = self.config.tool_timeout_ms
        try:
            done, _ = await asyncio.wait({call, ended}, timeout=limit / 1000, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ended.cancel()
            if not call.done():
                call.cancel()
                await asyncio.gather(call, return_exceptions=True)
        if call in done and not call.cancelled():
            exc = call.exception()
            if exc is None:
                return call.result()
            if isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED:
                raise McpServerError(f'MCP server "{self.name}" refused "{tool}": {self.scrub(exc.message)}',
                                     code="MCP_TOOL_ERROR", server=self.name)
            if isinstance(exc, ValidationError):  # the server is there; its answer breaks the protocol
                raise McpServerError(f'MCP server "{self.name}" answered "{tool}" with an invalid result: '
                                     f"{self.scrub(describe(exc))}", code="MCP_TOOL_ERROR", server=self.name)
            self._fail(f"the connection was lost: {describe(exc)}")
        elif not done:
            raise McpServerError(f'MCP server "{self.name}" did not answer "{tool}" within {limit} ms; '
                                 "its effect is unknown", code="MCP_TOOL_TIMEOUT", server=self.name)
        else:
            self._fail("the connection was lost")
        raise McpServerError(f'MCP server "{self.name}" stopped during "{tool}" ({self.failure}); the call\'s '
                             "effect is unknown and the server's tools are gone", code="MCP_SERVER_DIED",
                             server=self.name)

    async def close(self) -> None:
        """Stop the owner task (bounded by :data:`CLOSE_TIMEOUT_S`); the SDK ends the process or session."""
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        if self._client is None:  # still connecting: nothing to close gracefully
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), CLOSE_TIMEOUT_S)
        except TimeoutError:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
