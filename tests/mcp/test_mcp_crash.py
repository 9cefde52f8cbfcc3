"""An MCP call in flight when the host is SIGKILLed resumes as ``TOOL_OUTCOME_UNKNOWN``, never re-run.

Real ``dsh run`` / ``dsh resume`` processes: the run's member calls the real test
server's ``block`` tool (over stdio, a child of the host); the test kills the host
while the call is running; the orphaned server exits by itself when its stdin
closes. The resume starts the server again, closes the cut
call as ``TOOL_OUTCOME_UNKNOWN`` (MCP calls are not idempotent: it may have acted)
and the member's next MCP call goes through.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_kit import gone, kill, profile, stdio, wait_for_pid

from host_spec.host.store.jsonl import JsonlStore

pytestmark = pytest.mark.slow

TIMEOUT_S = 120


def dsh(*args: str) -> list[str]:
    return [sys.executable, "-m", "host_spec.host.cli.main", *args]


def test_a_call_cut_by_a_host_crash_is_outcome_unknown_after_resume(tmp_path: Path) -> None:
    marker = tmp_path / "pid"
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"lead": [
        {"tool_calls": [{"name": "mcp__t__block", "arguments": {"marker": str(marker)}}]},
        {"tool_calls": [{"name": "mcp__t__echo", "arguments": {"text": "after the crash"}}]},
        {"text": "done"},
    ]}))
    # Unsandboxed (the server's own ``sandbox``): the test follows the server by the pid it writes.
    prof, data = profile(tmp_path, {"t": stdio(sandbox="full")}), tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if k != "DSH_DATA_DIR"}
    run = subprocess.Popen(dsh("run", "--profile", str(prof), "--model", f"scripted:{script}", "--data-dir",
                               str(data), "go"), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        server_pid = wait_for_pid(marker, TIMEOUT_S)
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait(TIMEOUT_S)
    try:  # the killed host could not stop its server: it exits by itself once its stdin closes
        assert gone(server_pid), "the orphaned stdio server kept running"
    finally:
        kill(server_pid)
    resumed = subprocess.run(dsh("resume", "--data-dir", str(data)), env=env, capture_output=True, text=True,
                             timeout=TIMEOUT_S)
    assert resumed.returncode == 0, resumed.stderr
    (root,) = JsonlStore(data).list_ids()
    _, events = JsonlStore(data).read(root)
    results = [event.value() for event in events if event.type == "tool/result"]
    cut, after = results
    assert cut["name"] == "mcp__t__block" and cut["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert json.loads(after["content"][0]["text"]) == {"content": [{"type": "text", "text": "after the crash"}]}
    calls = [event.value()["name"] for event in events if event.type == "tool/call"]
    assert calls == ["mcp__t__block", "mcp__t__echo"]  # the cut call was never sent again
