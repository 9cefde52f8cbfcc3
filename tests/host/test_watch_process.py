"""``dsh run --watch`` in a real subprocess: a plugin edited while a team runs.

The ``probe`` plugin (a temporary distribution on ``PYTHONPATH``) offers one tool whose
result and description name its version. The ``gate`` plugin (not edited) holds the
Lead inside one tool call until the test says go, so the edits land while the run is
live and a teammate is parked on disk. What must hold: a broken save keeps the old
version serving and names file and line; a burst of saves causes one reload; the
next call runs the new code; the parked teammate still receives and answers mail.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

PROBE = '''
import msgspec
from host_spec import hookimpl
from host_spec.records import Handle, ToolSpec

VERSION = "{version}"


class Args(msgspec.Struct, forbid_unknown_fields=True):
    pass


class Result(msgspec.Struct):
    version: str


async def probe(args, call):
    return Result(version=VERSION)


@hookimpl
def dsh_plugin_loaded(host, ctx):
    ctx.own(host.tools.register(ToolSpec(name="probe", description=f"probe {{VERSION}}", args_type=Args,
                                         result_type=Result, execute=probe)))
'''

GATE = '''
import asyncio
from pathlib import Path
import msgspec
from host_spec import hookimpl
from host_spec.records import ToolSpec


class Args(msgspec.Struct, forbid_unknown_fields=True):
    pass


class Result(msgspec.Struct):
    opened: bool


@hookimpl
def dsh_plugin_loaded(host, ctx):
    entered, go = Path(ctx.config["entered"]), Path(ctx.config["go"])

    async def gate(args, call):
        entered.write_text("in")
        for _ in range(1200):
            if go.exists():
                return Result(opened=True)
            await asyncio.sleep(0.1)
        return Result(opened=False)

    ctx.own(host.tools.register(ToolSpec(name="gate", description="wait for the test", args_type=Args,
                                         result_type=Result, execute=gate)))
'''

SCRIPT = {
    "lead": [
        {"text": "spawn", "tool_calls": [{"name": "spawn_teammate", "arguments": {
            "name": "helper", "description": "answers pings", "context": "fresh",
            "prompt": "Wait for the Lead's ping, then answer it."}}]},
        {"text": "first probe", "tool_calls": [{"name": "probe", "arguments": {}}]},
        {"text": "hold", "tool_calls": [{"name": "gate", "arguments": {}}]},
        {"text": "second probe", "tool_calls": [{"name": "probe", "arguments": {}}]},
        {"text": "ping", "tool_calls": [{"name": "send_message", "arguments": {"target": "helper", "message": "ping"}}]},
        {"when": "pong", "text": "done"},
    ],
    "helper": [
        {"when": "ping", "text": "answer", "tool_calls": [
            {"name": "send_message", "arguments": {"target": "lead", "message": "pong"}}]},
        {"text": "answered"},
    ],
}


def _dist(site: Path, package: str, entry: str, source: str) -> Path:
    (site / package).mkdir(parents=True)
    (site / package / "__init__.py").write_text("")
    (site / package / "plugin.py").write_text(source)
    dist = site / f"{package}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[dsh]\n{entry} = {package}.plugin\n")
    return site / package / "plugin.py"


class Output:
    """Collects a subprocess's stdout lines on a thread; waits for a line with a bound."""

    def __init__(self, stream: Any) -> None:
        self.lines: list[str] = []
        self._seen = threading.Condition()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: Any) -> None:
        for line in stream:
            with self._seen:
                self.lines.append(line.rstrip("\n"))
                self._seen.notify_all()

    def wait_for(self, text: str, *, count: int = 1, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        with self._seen:
            while sum(text in line for line in self.lines) < count:
                left = deadline - time.monotonic()
                assert left > 0, f"no {text!r} in output:\n" + "\n".join(self.lines)
                self._seen.wait(left)

    def matching(self, text: str) -> list[str]:
        with self._seen:
            return [line for line in self.lines if text in line]


def _wait_file(path: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_watch_reloads_an_edited_plugin_while_the_team_runs(tmp_path: Path) -> None:
    site = tmp_path / "site"
    probe = _dist(site, "dsh_probe", "probe", PROBE.format(version="v1"))
    _dist(site, "dsh_gate", "gate", GATE)
    entered, go = tmp_path / "entered", tmp_path / "go"
    profile = tmp_path / "watch.toml"
    profile.write_text(f'extends = "agent-teams"\n[plugins.probe]\n[plugins.gate]\nentered = "{entered}"\ngo = "{go}"\n')
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
           "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("DSH_DATA_DIR", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "host_spec.host.cli.main", "run", "--watch", "--profile", str(profile),
         "--model", f"scripted:{script}", "--data-dir", str(tmp_path / "data"), "--workspace", str(workspace), "go"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = Output(process.stdout)
    try:
        out.wait_for("[dsh] watching")
        _wait_file(entered)  # the Lead is inside gate: probe v1 has answered, helper is parked
        assert '"version":"v1"' in "".join(out.matching("tool result probe"))

        probe.write_text(PROBE.format(version="v2").replace("class Result", "class Result(:"))  # a broken save
        out.wait_for('[dsh] reload of plugin "probe" failed')
        failure = out.matching('[dsh] reload of plugin "probe" failed')[0]
        assert "the loaded version is kept" in failure and f"{probe}, line" in failure

        for _ in range(3):  # one burst of saves: one reload
            probe.write_text(PROBE.format(version="v2"))
            time.sleep(0.02)
        out.wait_for("[dsh] reloaded probe")
        go.write_text("go")
        out.wait_for("[dsh] the team is quiescent")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0, process.stderr.read() if process.stderr else ""
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    reloads = out.matching("[dsh] reloaded")
    assert len(reloads) == 1 and "dsh_probe/plugin.py" in reloads[0], reloads
    results = out.matching("tool result probe")
    assert ['"version":"v1"' in results[0], '"version":"v2"' in results[1]] == [True, True], results
    assert out.matching("[helper] (resumed from disk)"), "the parked teammate was woken by mail"
    assert any("pong" in line for line in out.matching("[lead] user (team-message)"))
