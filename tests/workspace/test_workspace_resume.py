"""The stale guard across a crash: read, SIGKILL the ``dsh`` process, resume, and the edit is still guarded.

Real ``dsh run`` / ``dsh resume`` subprocesses on a real workspace. The read is
durable in the Lead's log before the crash (the next tool call's checkpoint
flushed it); after the restart the ledger is folded back from that log:

* the file unchanged -> the edit goes through (the read was remembered: without
  it the edit would be ``FILE_NOT_READ``);
* the file changed while the host was down -> ``FILE_STALE``, nothing written.

The ``bash`` call the crash cut short is reported as ``TOOL_OUTCOME_UNKNOWN``,
never silently re-run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from host_spec.host.store.jsonl import JsonlStore

pytestmark = pytest.mark.slow

TIMEOUT_S = 120


def script(tmp: Path) -> Path:
    steps = {"lead": [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "greet.py"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo $$ > bash.started; exec sleep 300"}}]},
        {"tool_calls": [{"name": "edit_file", "arguments": {
            "path": "greet.py", "old_string": "Hello", "new_string": "Hi"}}]},
        {"text": "done"},
    ]}
    path = tmp / "script.json"
    path.write_text(json.dumps(steps))
    return path


def dsh(*args: str) -> list[str]:
    return [sys.executable, "-m", "host_spec.host.cli.main", *args]


def env() -> dict[str, str]:
    variables = dict(os.environ)
    variables.pop("DSH_DATA_DIR", None)
    return variables


def crash_during_bash(tmp: Path) -> tuple[Path, Path, Path]:
    ws, data = tmp / "ws", tmp / "data"
    ws.mkdir()
    (ws / "greet.py").write_text("print('Hello')\n")
    model = f"scripted:{script(tmp)}"
    run = subprocess.Popen(dsh("run", "--model", model, "--data-dir", str(data), "--workspace", str(ws), "go"),
                           env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    pidfile = ws / "bash.started"  # in the workspace: the sandbox lets the command write nowhere else
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while not (pidfile.exists() and pidfile.read_text().strip()):
            assert run.poll() is None, run.stderr.read() if run.stderr else ""
            assert time.monotonic() < deadline, "bash never started"
            time.sleep(0.05)
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait(TIMEOUT_S)
        if run.stderr:
            run.stderr.close()
    # Nothing to clean up: the sandbox dies with its parent (bubblewrap's --die-with-parent).
    return ws, data, tmp / "script.json"


def resume(data: Path, model: Path) -> list:
    result = subprocess.run(dsh("resume", "--data-dir", str(data)), env=env(), capture_output=True, text=True,
                            timeout=TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    store = JsonlStore(data)
    (root,) = store.list_ids()
    header, events = store.read(root)
    assert header.cwd == str((data.parent / "ws").resolve())  # the workspace came back from the log
    return [event.value() for event in events if event.type == "tool/result"]


def test_unchanged_file_edit_goes_through_after_crash_and_resume(tmp_path: Path) -> None:
    ws, data, model = crash_during_bash(tmp_path)
    results = resume(data, model)
    by_name = {r["name"]: r for r in results}
    assert by_name["bash"]["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert not by_name["edit_file"].get("is_error")
    assert (ws / "greet.py").read_text() == "print('Hi')\n"


def test_file_changed_while_down_is_stale_after_resume(tmp_path: Path) -> None:
    ws, data, model = crash_during_bash(tmp_path)
    (ws / "greet.py").write_text("print('Hello, world')\n")  # someone edits while the host is down
    results = resume(data, model)
    edit = next(r for r in results if r["name"] == "edit_file")
    assert edit["error"]["code"] == "FILE_STALE"
    assert "+print('Hello, world')" in edit["error"]["message"]
    assert (ws / "greet.py").read_text() == "print('Hello, world')\n"
