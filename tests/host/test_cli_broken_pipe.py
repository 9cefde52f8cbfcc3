"""``dsh ... | head``: a reader that leaves ends the output quietly, as ``SIGPIPE`` ends a Unix tool.

Real ``dsh`` subprocesses whose stdout is a pipe with its read end closed before
they start (so every write fails with ``EPIPE``, deterministically, as after
``head`` has exited): no ``IO_ERROR``, no ``Exception ignored``, the status of a
tool the signal ended (141) for one-shot commands, and a run that still runs to its
end with its log complete.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from host_spec.host.demo import SCRIPT as DEMO

pytestmark = pytest.mark.slow


def _dsh(*args: str, cwd: Path, reader_gone: bool) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "DSH_DATA_DIR"}
    read, write = os.pipe()
    if reader_gone:
        os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", *args], cwd=cwd, env=env,
                              stdout=write if reader_gone else subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=180, check=False)
    finally:
        os.close(write)
        if not reader_gone:
            os.close(read)


def test_a_reader_that_leaves_ends_every_command_quietly(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    data = str(tmp_path / "data")
    run = _dsh("run", "--profile", "agent-teams", "--model", f"scripted:{DEMO}", "--data-dir", data, "--workspace",
               str(tmp_path / "ws"), "Use an agent team", cwd=tmp_path, reader_gone=True)
    # The run goes on to its end without its screen: its log, not the transcript, must be complete.
    assert run.returncode == 0, run.stderr
    *announced, last = run.stderr.strip().splitlines()
    assert last == "dsh: session session-1" and all(line.startswith("dsh: sandbox: ") for line in announced), run.stderr
    assert "Broken pipe" not in run.stderr and "Traceback" not in run.stderr and "IO_ERROR" not in run.stderr
    for command in (["team", "show"], ["team", "show", "--json"], ["log", "session-1"], ["log", "--json", "session-1"]):
        ended = _dsh(*command, "--data-dir", data, cwd=tmp_path, reader_gone=True)
        assert (ended.returncode, ended.stderr) == (141, ""), (command, ended.stderr)
    read = _dsh("team", "show", "--json", "--data-dir", data, cwd=tmp_path, reader_gone=False)
    assert read.returncode == 0, read.stderr
    assert [t["status"] for t in json.loads(read.stdout)["tasks"]] == ["completed", "completed"]
