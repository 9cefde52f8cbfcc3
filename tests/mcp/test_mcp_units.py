"""The MCP client's parts on their own: rendering results, the hub's lifecycle, scoped installs."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from mcp_kit import profile, stdio
from mcp_types import CallToolResult, ImageContent, TextContent

from host_spec.host.app import Host
from host_spec.host.mcp.config import load_config
from host_spec.host.mcp.errors import McpServerError, Scrubber
from host_spec.host.mcp.hub import Hub
from host_spec.host.mcp.plugin import render
from host_spec.host.models.scripted import ScriptedModel

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mcp_server.py"
NO_SECRETS = Scrubber(())


class TestRender:
    def test_blocks_are_passed_on_and_structured_content_only_without_blocks(self) -> None:
        both = CallToolResult(content=[TextContent(type="text", text="3")], structured_content={"result": 3})
        assert render(both, 1000, "s", "t", NO_SECRETS) == {"content": [{"type": "text", "text": "3"}]}
        only = CallToolResult(content=[], structured_content={"rows": [1, "tok-123"]})
        assert render(only, 1000, "s", "t", Scrubber(("tok-123",))) == {"structuredContent": {"rows": [1, "[redacted]"]}}
        image = CallToolResult(content=[ImageContent(type="image", data="aGk=", mime_type="image/png")])
        assert render(image, 1000, "s", "t", NO_SECRETS) == {"content": [{"type": "image", "data": "aGk=",
                                                                          "mimeType": "image/png"}]}

    def test_a_large_result_is_cut_and_says_so(self) -> None:
        big = CallToolResult(content=[TextContent(type="text", text="x" * 500)])
        value = render(big, 100, "s", "t", NO_SECRETS)
        assert len(value["content"][0]["text"]) == 100 and value["truncated"].endswith("the limit is 100")

    def test_an_error_result_names_server_and_tool(self) -> None:
        with pytest.raises(McpServerError) as caught:
            render(CallToolResult(content=[], is_error=True), 100, "srv", "tool", NO_SECRETS)
        assert caught.value.code == "MCP_TOOL_ERROR"
        assert caught.value.message == 'MCP tool "tool" of server "srv" failed: (no message)'


class TestHub:
    async def test_read_only_tools_are_marked_and_the_blocking_close_stops_the_server(self) -> None:
        config = load_config({"servers": {"g": {"command": sys.executable, "args": [str(EXAMPLE)]}}})
        hub = Hub(config.servers)
        await asyncio.to_thread(hub.start)
        connection = hub.connections["g"]
        try:
            assert connection.alive
            assert {(t.name, t.read_only) for t in connection.tools} == {
                ("mcp__g__define", True), ("mcp__g__count_words", True)}
            result = await hub.call("g", "count_words", {"text": "one two three"})
            assert result.structured_content == {"result": 3}
        finally:
            await asyncio.to_thread(hub.close_now)
        await asyncio.to_thread(hub.close_now)  # a second close is a no-op
        await hub.close()
        assert not connection.alive
        with pytest.raises(McpServerError) as caught:
            await connection.call("define", {"term": "lease"})
        assert caught.value.code == "MCP_SERVER_UNAVAILABLE"
        with pytest.raises(McpServerError) as caught:
            await hub.call("g", "define", {"term": "lease"})
        assert caught.value.code == "MCP_SERVER_UNAVAILABLE" and "shutting down" in caught.value.message

    async def test_a_server_that_never_answers_fails_at_its_startup_timeout(self) -> None:
        config = load_config({"servers": {"mute": {"command": "sleep", "args": ["30"], "startup_timeout_ms": 300}}})
        hub = Hub(config.servers)
        await asyncio.to_thread(hub.start)
        try:
            assert hub.connections["mute"].failure == "did not start within 300 ms"
        finally:
            await hub.close()

    async def test_no_enabled_server_starts_nothing(self, tmp_path: Path) -> None:
        prof = profile(tmp_path, {"off": stdio(enabled=False)})
        host = await Host.open(tmp_path / "data", prof, ScriptedModel.from_mapping({"lead": [{"text": "ok"}]}))
        try:
            agent = await host.run("go")
            assert not any(spec.name.startswith("mcp__") for spec in host.tools.visible(agent))
        finally:
            await host.close()


async def test_each_agent_gets_its_own_registrations_and_disposal_removes_them(tmp_path: Path) -> None:
    host = await Host.open(tmp_path / "data", profile(tmp_path, {"t": stdio(env={"API_TOKEN": "tok-98765"})}),
                           ScriptedModel.from_mapping({"lead": [{"text": "ok"}]}))
    try:
        agent = await host.run("go")
        prompt = host.prompts.render(agent)
        assert "MCP server instructions (for that server's mcp__SERVER__* tools):\n## t\nCall echo to echo; " \
               "token [redacted]." in prompt and "tok-98765" not in prompt
        assert host.tools.get(None, "mcp__t__echo") is None  # nothing global: per agent only
        assert host.tools.get(agent, "mcp__t__echo") is not None
        tools = host.plugins.pm.get_plugin("mcp/McpTools")
        tools.install(agent)  # a replayed creation installs nothing twice
        assert len(set(tools.specs)) == len(tools.specs) == 10  # specs carrying a schema dict stay hashable
        assert host.tools.scoped_count() == 1
        await host.dispose_agent(agent)
        assert host.tools.scoped_count() == 0 and not tools.installs
        assert "MCP server instructions" not in host.prompts.render(None)
    finally:
        await host.close()
