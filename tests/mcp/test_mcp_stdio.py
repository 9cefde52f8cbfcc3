"""Members use a real MCP server started over stdio: tools, schemas, durable calls, failures.

Every test runs the real test server (official SDK) as a subprocess of the host,
through a profile's ``[mcp.servers.NAME]`` table, and drives a real agent with the
scripted model; what is checked is what the log holds.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import structlog
from mcp_kit import gone, kill, profile, results, stdio, text_of, wait_for_pid

from host_spec.host.models.adapter import tool_schema
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel

pytestmark = pytest.mark.slow

SECRET = "s3cr3t-token-value"


def calls(*steps: tuple[str, dict]) -> dict:
    return {"lead": [{"tool_calls": [{"name": name, "arguments": args}]} for name, args in steps] + [{"text": "done"}]}


class TestTools:
    async def test_a_member_calls_the_servers_tools_and_the_log_records_them(self, tmp_path: Path) -> None:
        servers = {"t": stdio(env={"DEMO_SUFFIX": "${MCP_TEST_SUFFIX:-!}"})}
        script = calls(("mcp__t__echo", {"text": "hi"}), ("mcp__t__weird_name_tool", {}))
        host = await Host.open(tmp_path / "data", profile(tmp_path, servers), ScriptedModel.from_mapping(script))
        try:
            agent = await host.run("go")
            visible = {spec.name: spec for spec in host.tools.visible(agent)}
            sent = tool_schema(visible["mcp__t__echo"])
            events = [e.type for e in agent.session.events]
        finally:
            await host.close()
        assert {"mcp__t__echo", "mcp__t__fail", "mcp__t__block", "mcp__t__weird_name_tool"} <= set(visible)
        # The model is sent the server's own schema (its root title dropped).
        assert sent == {"type": "object", "properties": {"text": {"title": "Text", "type": "string"}},
                        "required": ["text"]}
        assert visible["mcp__t__echo"].description == "Echo the text."
        done = results(agent)
        assert [text_of(r) for r in done] == [{"content": [{"type": "text", "text": "hi!"}]},
                                             {"content": [{"type": "text", "text": "ok"}]}]
        assert events.count("tool/call") == 2 and events.count("tool/result") == 2

    async def test_tool_errors_and_bad_arguments_are_error_results_naming_the_server(self, tmp_path: Path) -> None:
        servers = {"t": stdio(env={"API_TOKEN": SECRET})}
        script = calls(("mcp__t__fail", {}), ("mcp__t__echo", {"text": 3}), ("mcp__t__leak", {}),
                       ("mcp__t__refuse", {}), ("mcp__t__echo", {"text": "still fine"}))
        host = await Host.open(tmp_path / "data", profile(tmp_path, servers), ScriptedModel.from_mapping(script))
        try:
            agent = await host.run("go")
        finally:
            await host.close()
        failed, bad, leak, refused, ok = results(agent)
        assert failed["error"]["code"] == "MCP_TOOL_ERROR"
        assert 'server "t"' in failed["error"]["message"] and "broken on purpose" in failed["error"]["message"]
        assert bad["error"]["code"] == "MCP_TOOL_ERROR"
        assert SECRET not in json.dumps(leak) and "[redacted]" in leak["error"]["message"]
        assert refused["error"]["code"] == "MCP_TOOL_ERROR"
        assert refused["error"]["message"] == 'MCP server "t" refused "refuse": refused with token [redacted]'
        assert text_of(ok) == {"content": [{"type": "text", "text": "still fine"}]}


class TestFailures:
    async def test_a_server_that_fails_to_start_is_named_and_the_member_goes_on(self, tmp_path: Path) -> None:
        servers = {"broken": stdio("--fail-start", env={"API_TOKEN": SECRET}),
                   "missing": {"command": str(tmp_path / "no-such-program")},
                   "t": stdio()}
        script = calls(("mcp__t__echo", {"text": "alive"}), ("mcp__broken__echo", {"text": "x"}))
        with structlog.testing.capture_logs() as logs:
            host = await Host.open(tmp_path / "data", profile(tmp_path, servers), ScriptedModel.from_mapping(script))
            try:
                agent = await host.run("go")
                names = {spec.name for spec in host.tools.visible(agent)}
            finally:
                await host.close()
        failures = {entry["server"]: entry["reason"] for entry in logs if entry["event"] == "MCP server unavailable"}
        assert set(failures) == {"broken", "missing"}
        assert "cannot start: bad token [redacted]" in failures["broken"]
        assert "no-such-program" in failures["missing"]
        assert SECRET not in json.dumps(logs, default=str)
        assert not any(name.startswith(("mcp__broken__", "mcp__missing__")) for name in names)
        echo, unknown = results(agent)
        assert text_of(echo) == {"content": [{"type": "text", "text": "alive"}]}
        assert unknown["error"]["code"] == "UNKNOWN_TOOL"

    async def test_a_server_killed_mid_call_fails_that_call_and_its_tools_go(self, tmp_path: Path) -> None:
        marker = tmp_path / "pid"
        script = calls(("mcp__t__block", {"marker": str(marker)}), ("mcp__t__echo", {"text": "x"}))
        # Unsandboxed (the server's own ``sandbox``): the test kills the server by the pid it writes.
        host = await Host.open(tmp_path / "data", profile(tmp_path, {"t": stdio(sandbox="full")}),
                               ScriptedModel.from_mapping(script))
        try:
            run = asyncio.ensure_future(host.run("go"))
            pid = await asyncio.to_thread(wait_for_pid, marker)
            kill(pid)
            agent = await run
            names = {spec.name for spec in host.tools.visible(agent)}
        finally:
            await host.close()
        died, after = results(agent)
        assert died["error"]["code"] == "MCP_SERVER_DIED"
        assert 'MCP server "t" stopped during "block"' in died["error"]["message"]
        assert "effect is unknown" in died["error"]["message"]
        assert after["error"]["code"] == "UNKNOWN_TOOL"  # its tools are no longer offered
        assert not any(name.startswith("mcp__t__") for name in names)

    async def test_a_server_that_dies_in_a_call_quotes_only_what_it_wrote_during_that_call(self, tmp_path: Path) -> None:
        script = calls(("mcp__t__chatter", {"lines": 8}), ("mcp__t__die", {"reason": "disk full"}))
        host = await Host.open(tmp_path / "data", profile(tmp_path, {"t": stdio()}), ScriptedModel.from_mapping(script))
        try:
            agent = await host.run("go")
        finally:
            await host.close()
        chatted, died = results(agent)
        assert text_of(chatted) == {"content": [{"type": "text", "text": "chatted"}]}
        assert died["error"]["code"] == "MCP_SERVER_DIED"
        message = died["error"]["message"]
        assert "(stderr: dying: disk full)" in message, message
        assert "earlier work line" not in message  # the earlier call's output is not this failure's

    async def test_a_slow_call_times_out_with_the_servers_limit(self, tmp_path: Path) -> None:
        marker = tmp_path / "pid"
        script = calls(("mcp__t__block", {"marker": str(marker)}), ("mcp__t__echo", {"text": "next"}))
        host = await Host.open(tmp_path / "data", profile(tmp_path, {"t": stdio(tool_timeout_ms=300, sandbox="full")}),
                               ScriptedModel.from_mapping(script))
        try:
            agent = await host.run("go")
        finally:
            await host.close()
        timed_out, after = results(agent)
        assert timed_out["error"]["code"] == "MCP_TOOL_TIMEOUT"
        assert 'MCP server "t" did not answer "block" within 300 ms' in timed_out["error"]["message"]
        assert text_of(after) == {"content": [{"type": "text", "text": "next"}]}  # the server stays usable

    async def test_closing_the_host_stops_the_server_process(self, tmp_path: Path) -> None:
        marker = tmp_path / "pid"
        script = {"lead": [{"tool_calls": [{"name": "mcp__t__block", "arguments": {"marker": str(marker)}}]}]}
        host = await Host.open(tmp_path / "data", profile(tmp_path, {"t": stdio(sandbox="full")}),
                               ScriptedModel.from_mapping(script))
        run = asyncio.ensure_future(host.run("go"))
        pid = await asyncio.to_thread(wait_for_pid, marker)
        agent = host.agents.list()[0]
        from host_spec.records import CancelCause

        agent.cancel(CancelCause("user"))
        await run
        await host.close()
        assert [r["error"]["code"] for r in results(agent)] == ["ABORTED"]
        assert await asyncio.to_thread(gone, pid)



class TestSandbox:
    async def test_a_stdio_server_runs_in_the_sandbox_writable_only_in_its_cwd(self, tmp_path: Path) -> None:
        """The same ``block`` call: its marker lands in the server's ``cwd``, never beside it."""
        work = tmp_path / "work"
        work.mkdir()
        inside, outside = work / "pid", tmp_path / "pid-outside"
        script = calls(("mcp__t__block", {"marker": str(inside)}), ("mcp__t__block", {"marker": str(outside)}))
        host = await Host.open(tmp_path / "data", profile(tmp_path, {"t": stdio(cwd=str(work), tool_timeout_ms=3000)}),
                               ScriptedModel.from_mapping(script))
        try:
            agent = await host.run("go")
        finally:
            await host.close()
        first, second = results(agent)
        assert first["error"]["code"] == second["error"]["code"] == "MCP_TOOL_TIMEOUT"  # block never returns
        assert inside.exists() and int(inside.read_text()) > 0  # written where the server may write
        assert not outside.exists()  # beside it: the sandbox's private /tmp, gone with it
