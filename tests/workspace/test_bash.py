"""bash: cwd, exit codes, capped output, clean environment, and process-group kills (checked by pid).

The pid checks run under the ``full`` policy (no sandbox): inside the sandbox a
command sees its own pid namespace, so a pid it prints means nothing outside.
What the sandbox leaves behind is checked in ``tests/sandbox`` by command line.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from kit_waits import until
from workspace_kit import agent_in, call, open_host, sandboxed

from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.messages import user_message
from host_spec.records import AbortSignal, CancelCause
from host_spec.host.sandbox.service import host_environment
from host_spec.host.workspace.shell import Capture


def shell_of(host):
    """The host's workspace shell tool (the plugin's per-host object, registered as ``workspace/Tools``)."""
    return host.plugins.pm.get_plugin("workspace/Tools").shell


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers signal 0; it is dead for our purpose
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def wait_gone(pid: int, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


FULL = {"policy": "full"}


async def bash(tmp_path, ws, *requests, config=None, sandbox=None):
    host = await open_host(tmp_path / "data", config, sandbox=sandbox)
    try:
        agent = await agent_in(host, ws)
        return [await call(host, agent, "bash", **arguments) for arguments in requests]
    finally:
        await host.close()


async def test_runs_in_the_workspace_and_reports_exit_code(tmp_path, ws) -> None:
    ok, failed = await bash(tmp_path, ws, {"command": "pwd; echo err >&2"}, {"command": "exit 7"})
    assert ok.value == {"exit_code": 0, "output": f"{ws.resolve()}\nerr\n", "output_bytes": len(f"{ws}\nerr\n")}
    assert failed.value["exit_code"] == 7


async def test_output_is_capped_keeping_head_and_tail(tmp_path, ws) -> None:
    (result,) = await bash(tmp_path, ws, {"command": "echo START; head -c 100000 /dev/zero | tr '\\0' x; echo; echo END"},
                     config={"bash_output_bytes": 1000})
    value = result.value
    assert value["truncated"] is True and value["output_bytes"] == 6 + 100000 + 1 + 4
    assert value["output"].startswith("START\n") and value["output"].endswith("END\n")
    assert f"[... {value['output_bytes'] - 1000} bytes of output omitted ...]" in value["output"]


def test_capture_counts_exactly() -> None:
    capture = Capture(10)
    for chunk in (b"abc", b"defgh", b"ijklmnop"):
        capture.feed(chunk)
    assert capture.total == 16 and bytes(capture.head) == b"abcde" and bytes(capture.tail) == b"lmnop"
    assert capture.text() == "abcde\n[... 6 bytes of output omitted ...]\nlmnop"


@pytest.mark.parametrize("sandbox", [FULL, None, {"env": ["HARMLESS_SETTING"]}], ids=["full", "default", "listed"])
async def test_environment_has_no_model_api_keys(tmp_path, ws, monkeypatch, sandbox) -> None:
    """Unsandboxed: the host's environment minus credentials. Sandboxed: an allowlist (plus the listed names)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("ANTHROPIC_AUTH", "also-secret")
    monkeypatch.setenv("DSH_MODEL_TOKEN", "tok")
    monkeypatch.setenv("HARMLESS_SETTING", "visible")
    (result,) = await bash(tmp_path, ws, {"command": "env"}, sandbox=sandbox)
    output = result.value["output"]
    assert "sk-should-not-leak" not in output and "also-secret" not in output and "tok\n" not in output
    assert ("HARMLESS_SETTING=visible" in output) == (sandbox is not None)
    assert "PATH=" in output
    assert host_environment({"MY_SECRET": "1", "PATH": "/bin"}) == {"PATH": "/bin"}


async def test_timeout_kills_the_whole_group(tmp_path, ws) -> None:
    pidfile = ws / "child.pid"
    command = f"sleep 300 & echo $! > {pidfile}; wait"
    (result,) = await bash(tmp_path, ws, {"command": command, "timeout_ms": 1500}, sandbox=FULL)
    assert result.code == "BASH_TIMEOUT" and "1500 ms" in result.message
    assert wait_gone(int(pidfile.read_text()))


async def test_finished_command_leaves_no_background_process(tmp_path, ws) -> None:
    pidfile = ws / "bg.pid"
    (result,) = await bash(tmp_path, ws, {"command": f"(sleep 300 >/dev/null 2>&1 &) ; sleep 300 >/dev/null & "
                                               f"echo $! > {pidfile}; echo started"}, sandbox=FULL)
    assert result.ok and result.value["output"] == "started\n"
    assert wait_gone(int(pidfile.read_text()))


async def test_timeout_above_the_maximum_is_invalid(tmp_path, ws) -> None:
    too_long, empty = await bash(tmp_path, ws, {"command": "true", "timeout_ms": 600_001}, {"command": "  "})
    assert too_long.code == empty.code == "INVALID_ARGUMENT"


async def test_interrupt_and_cancel_kill_the_group(tmp_path, ws) -> None:
    host = await open_host(tmp_path / "data", sandbox=FULL)
    try:
        agent = await agent_in(host, ws)
        results = {}
        for how in ("interrupt", "cancel"):
            pidfile = ws / f"{how}.pid"
            signal = AbortSignal()
            task = asyncio.ensure_future(call(host, agent, "bash", signal=signal,
                                              command=f"sleep 300 & echo $! > {pidfile}; wait"))
            await until(lambda: pidfile.exists() and pidfile.read_text().strip(), what=f"the {how} command to start")
            running = set(shell_of(host).running)
            if how == "interrupt":
                signal.abort("interrupted")
                results[how] = (await task, running)
            else:
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                results[how] = (None, running)
        still = shell_of(host).running
    finally:
        await host.close()
    interrupted, groups = results["interrupt"]
    assert interrupted.code == "BASH_INTERRUPTED" and len(groups) == 1 and not still
    for how in ("interrupt", "cancel"):
        assert wait_gone(int((ws / f"{how}.pid").read_text()))
        assert all(wait_gone(pgid) for pgid in results[how][1])


async def test_a_process_that_leaves_the_group_does_not_hang_the_tool(tmp_path, ws) -> None:
    """``setsid`` escapes the group kill and keeps the pipe open; the reader gives up after a short grace."""
    pidfile = ws / "escaped.pid"
    try:
        (result,) = await bash(tmp_path, ws, {"command": f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 60' & "
                                                   f"sleep 0.5; echo done"}, sandbox=FULL)
        assert result.ok and result.value["output"].endswith("done\n")
    finally:
        if pidfile.exists():
            try:
                os.kill(int(pidfile.read_text()), 9)
            except ProcessLookupError:
                pass


async def test_cancelling_the_turn_kills_the_running_command(tmp_path, ws) -> None:
    """A real turn runs ``bash``; cancelling the turn (what an interrupt does) kills the group and ends the call."""
    pidfile = ws / "turn.pid"
    script = {"lead": [{"tool_calls": [{"name": "bash", "arguments": {
        "command": f"sleep 300 & echo $! > {pidfile}; wait"}}]}]}
    host = await Host.open(tmp_path / "data", sandboxed(FULL), ScriptedModel.from_mapping(script))
    try:
        host.plugins.load("workspace", {})
        agent = await agent_in(host, ws)
        agent.followup(user_message("go"))
        while not pidfile.exists() or not pidfile.read_text().strip():
            await asyncio.sleep(0.02)
        agent.cancel(CancelCause("user"))
        await agent.when_idle()
        results = [e.value() for e in agent.session.events if e.type == "tool/result"]
    finally:
        await host.close()
    assert [r["error"]["code"] for r in results] == ["BASH_INTERRUPTED"]
    assert wait_gone(int(pidfile.read_text()))


async def test_a_released_session_leaves_no_ledger(tmp_path, ws) -> None:
    (ws / "f.txt").write_text("v\n")
    host = await open_host(tmp_path / "data")
    try:
        agent = await agent_in(host, ws)
        await call(host, agent, "read_file", path="f.txt")
        assert (await call(host, agent, "edit_file", path="f.txt", old_string="v", new_string="w")).ok
        tools = host.plugins.pm.get_plugin("workspace/Tools")
        assert agent.session.id in tools.ledgers.by_session
        await host.dispose_agent(agent)
        assert not tools.ledgers.by_session
    finally:
        await host.close()
