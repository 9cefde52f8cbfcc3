"""Plugin ``mcp``: every member gets the tools of the profile's MCP servers, as ``mcp__SERVER__TOOL``.

A profile's ``[mcp.servers.NAME]`` tables load this plugin (a profile without
them never does, and never imports the SDK). On load the hub connects every
server; each agent, when it is created, gets the live servers' tools registered
into its own scope, with the JSON Schemas the servers wrote. Going through the
host's per-agent tool registry is the point: a call is recorded like any other
(``tool/call`` flushed before the body runs, then ``tool/result``), so a call a
crash cut short is closed as ``TOOL_OUTCOME_UNKNOWN`` on resume and never re-run,
and whatever filter the registry applies per agent (a role's tool allowlist)
covers these tools too.

A server that fails to start is logged as an error naming it and left out; one
that dies later fails the call in flight with ``MCP_SERVER_DIED`` and its tools
stop being offered. Either way the members go on without it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs
import structlog

from host_spec import hookimpl
from host_spec.events import json_encode
from host_spec.extras import require
from host_spec.records import Handle, PromptSection, ToolSpec

from host_spec.host.mcp.config import CONFIG_PATH, expand, load_config
from host_spec.host.mcp.config import effective_config as _effective_config
from host_spec.host.mcp.connection import Connection, ServerTool
from host_spec.host.mcp.errors import McpServerError, Scrubber
from host_spec.host.mcp.hub import Hub
from host_spec.host.sandbox.service import sandbox_of

if TYPE_CHECKING:
    from host_spec.protocols import Agent, Host, PluginContext
    from host_spec.records import ToolCall

__all__ = ["McpTools", "render", "effective_config", "require_sdk", "instructions_text", "SECTION_NAME"]

log = structlog.get_logger(__name__)

#: The prompt section holding the servers' instructions, after the Team policy (60).
SECTION_NAME: Final = "mcp:instructions"
SECTION_ORDER: Final = 70


def instructions_text(connections: list[Connection]) -> str:
    """The live servers' ``instructions`` as one prompt section ("" when none gave any)."""
    parts = [f"## {c.name}\n{c.instructions}" for c in connections if c.alive and c.instructions]
    if not parts:
        return ""
    return "MCP server instructions (for that server's mcp__SERVER__* tools):\n" + "\n".join(parts)


def require_sdk() -> None:
    """Fail with a clear error when the MCP SDK (the ``mcp`` extra) is missing.

    Raises:
        ExtraNotInstalledError: ``EXTRA_NOT_INSTALLED``.
    """
    require("mcp", extra="mcp", feature="[mcp.servers] in the profile")


def render(result: Any, limit: int, server: str, tool: str, scrub: Scrubber) -> dict[str, Any]:
    """A ``CallToolResult`` as the model reads it: its content blocks (or its structured content), scrubbed.

    Raises:
        McpServerError: ``MCP_TOOL_ERROR`` when the server flagged the result as an error.
    """
    blocks = scrub.deep([block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content])
    if result.is_error:
        text = " ".join(b.get("text", "") for b in blocks if b.get("type") == "text") or "(no message)"
        raise McpServerError(f'MCP tool "{tool}" of server "{server}" failed: {text[:limit]}', code="MCP_TOOL_ERROR",
                             server=server)
    value: dict[str, Any] = {"content": blocks}
    if not blocks and result.structured_content is not None:
        value = {"structuredContent": scrub.deep(result.structured_content)}
    size = len(json_encode(value))
    if size > limit:
        text = json_encode(value).decode()[:limit]
        value = {"content": [{"type": "text", "text": text}], "truncated": f"{size} bytes; the limit is {limit}"}
    return value


@attrs.define(eq=False)
class McpTools:
    """One host's MCP hub and the tools it installs into each agent's scope."""

    host: Host
    hub: Hub
    specs: list[ToolSpec] = attrs.Factory(list)
    instructions: str = ""
    installs: dict[str, tuple[Agent, list[Handle]]] = attrs.Factory(dict)

    def __attrs_post_init__(self) -> None:
        for connection in self.hub.connections.values():
            if connection.alive:
                self.specs.extend(self._spec(connection, tool) for tool in connection.tools)
                log.info("MCP server ready", server=connection.name, tools=len(connection.tools))
        self.instructions = instructions_text(list(self.hub.connections.values()))

    def _spec(self, connection: Connection, tool: ServerTool) -> ToolSpec:
        hub, limit = self.hub, connection.config.max_result_bytes

        async def execute(args: dict[str, Any], call: ToolCall) -> dict[str, Any]:
            running = asyncio.ensure_future(hub.call(connection.name, tool.tool, args))
            aborted = asyncio.ensure_future(call.signal.wait())
            try:
                await asyncio.wait({running, aborted}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                aborted.cancel()
                if not running.done():
                    running.cancel()
                    await asyncio.gather(running, return_exceptions=True)
            if running.cancelled():
                raise McpServerError(f'call to "{tool.name}" aborted; its effect is unknown', code="ABORTED")
            return render(running.result(), limit, connection.name, tool.tool, connection.scrub)

        return ToolSpec(name=tool.name, description=tool.description, args_type=dict[str, Any],
                        result_type=dict[str, Any], execute=execute, available=lambda agent: connection.alive,
                        concurrency_safe=tool.read_only, input_schema=tool.input_schema)

    @hookimpl(specname="dsh_agent_created")
    def install(self, agent: Agent) -> None:
        """Register every live server's tools (and their instructions) into ``agent.scope`` (all or nothing)."""
        installed = self.installs.get(agent.id)
        if installed is not None and installed[0] is agent:
            return
        handles: list[Handle] = []
        try:
            for spec in self.specs:
                handles.append(self.host.tools.register(spec, scope=agent.scope))
            if self.instructions:
                section = PromptSection(name=SECTION_NAME, order=SECTION_ORDER, text=self.instructions)
                handles.append(self.host.prompts.register(section, scope=agent.scope))
        except BaseException:
            _dispose_all(handles)
            raise
        self.installs[agent.id] = (agent, handles)

    @hookimpl(specname="dsh_agent_disposed")
    def uninstall(self, agent: Agent) -> None:
        installed = self.installs.get(agent.id)
        if installed is not None and installed[0] is agent:
            del self.installs[agent.id]
            _dispose_all(installed[1])

    def uninstall_all(self) -> None:
        while self.installs:
            _, (_, handles) = self.installs.popitem()
            _dispose_all(handles)

    @hookimpl
    async def dsh_plugin_teardown(self) -> None:
        """Close every session (stdio servers are stopped) before the plugin unloads."""
        await self.hub.close()


def _dispose_all(handles: list[Handle]) -> None:
    for handle in reversed(handles):
        handle.dispose()


def effective_config(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """The validated ``[mcp]`` table with defaults, env and header values masked (``dsh plugins``)."""
    return _effective_config(raw)


@hookimpl
def dsh_plugin_loaded(host: Host, ctx: PluginContext) -> None:
    config = load_config(ctx.config, CONFIG_PATH)
    servers = {name: expand(name, server) for name, server in config.servers.items() if server.enabled}
    if servers:
        require_sdk()
    hub = Hub(servers, sandbox_of(host))  # stdio servers run in the host's sandbox, like every command
    hub.start()
    ctx.own(Handle(hub.close_now, label="mcp:hub"))
    tools = McpTools(host, hub)
    ctx.register(tools)
    ctx.own(Handle(tools.uninstall_all, label="mcp:installs"))
    for agent in host.agents.list():
        tools.install(agent)
