"""Members use a real MCP server over streamable HTTP on 127.0.0.1 (a free port), and survive its death."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import structlog
from mcp_kit import free_port, http_server, profile, results, text_of, wait_for_pid

from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel

pytestmark = pytest.mark.slow

SECRET = "Bearer http-s3cr3t"


def calls(*steps: tuple[str, dict]) -> dict:
    return {"lead": [{"tool_calls": [{"name": name, "arguments": args}]} for name, args in steps] + [{"text": "done"}]}


async def test_a_member_calls_an_http_server_and_survives_its_death(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MCP_TEST_AUTH", SECRET)
    marker = tmp_path / "pid"
    script = calls(("mcp__web__echo", {"text": "over http"}), ("mcp__web__auth", {}),
                   ("mcp__web__block", {"marker": str(marker)}),
                   ("mcp__web__echo", {"text": "gone"}))
    with http_server() as (url, process):
        servers = {"web": {"url": url, "headers": {"Authorization": "${MCP_TEST_AUTH}"}}}
        host = await Host.open(tmp_path / "data", profile(tmp_path, servers), ScriptedModel.from_mapping(script))
        try:
            with structlog.testing.capture_logs() as logs:
                run = asyncio.ensure_future(host.run("go"))
                await asyncio.to_thread(wait_for_pid, marker)
                process.kill()
                agent = await run
        finally:
            await host.close()
    echo, auth, died, after = results(agent)
    assert text_of(echo) == {"content": [{"type": "text", "text": "over http"}]}
    # The expanded header reached the server; the server quoting it back is scrubbed like any secret.
    assert text_of(auth) == {"content": [{"type": "text", "text": "[redacted]"}]}
    assert died["error"]["code"] == "MCP_SERVER_DIED"
    assert 'MCP server "web" stopped during "block"' in died["error"]["message"]
    assert after["error"]["code"] == "UNKNOWN_TOOL"
    assert [entry["server"] for entry in logs if entry["event"] == "MCP server unavailable"] == ["web"]
    assert "http-s3cr3t" not in json.dumps(logs, default=str) + json.dumps(results(agent))


async def test_a_member_calls_a_server_over_the_older_sse_transport(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MCP_TEST_AUTH", SECRET)
    script = calls(("mcp__old__echo", {"text": "over sse"}), ("mcp__old__auth", {}))
    with http_server("sse") as (url, _):
        servers = {"old": {"type": "sse", "url": url, "headers": {"Authorization": "${MCP_TEST_AUTH}"}}}
        host = await Host.open(tmp_path / "data", profile(tmp_path, servers), ScriptedModel.from_mapping(script))
        try:
            agent = await host.run("go")
        finally:
            await host.close()
    echo, auth = results(agent)
    assert text_of(echo) == {"content": [{"type": "text", "text": "over sse"}]}
    assert text_of(auth) == {"content": [{"type": "text", "text": "[redacted]"}]}


async def test_an_http_server_that_is_not_there_is_named_and_left_out(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with structlog.testing.capture_logs() as logs:
        host = await Host.open(tmp_path / "data", profile(tmp_path, {"down": {"url": url, "startup_timeout_ms": 5000}}),
                               ScriptedModel.from_mapping({"lead": [{"text": "fine without it"}]}))
        try:
            agent = await host.run("go")
            names = {spec.name for spec in host.tools.visible(agent)}
        finally:
            await host.close()
    failures = [entry for entry in logs if entry["event"] == "MCP server unavailable"]
    assert [entry["server"] for entry in failures] == ["down"]
    assert "ConnectError" in failures[0]["reason"]
    assert not any(name.startswith("mcp__") for name in names)
    assert [e.value()["content"][0]["text"] for e in agent.session.events if e.type == "assistant/message"] == [
        "fine without it"]
