"""How ``dsh run`` / ``dsh resume`` end: a run whose root's last turn failed says so, with the code and the resume command.

The run is a real ``dsh`` subprocess against a real closed port on 127.0.0.1 (nothing
listens there, so the ``openai:`` adapter fails with ``MODEL_UNAVAILABLE``); the resume
command its last line names is then run verbatim.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from host_spec.host.resume import RETRY_NOTICE
from host_spec.host.cli.run_commands import ending


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again when the block ends: nothing listens there


def _dsh(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "DSH_DATA_DIR"}
    return subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def _events(cwd: Path, data: str) -> list[dict[str, object]]:
    done = _dsh("log", "--json", "--data-dir", data, "session-1", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.slow
class TestFailedRun:
    def test_the_last_line_names_the_code_and_the_resume_command_that_retries(self, tmp_path: Path) -> None:
        port = _closed_port()
        run = _dsh("run", "--model", "openai:tiny?retries=0", "--base-url", f"http://127.0.0.1:{port}/v1",
                   "--api-key-env", "", "--data-dir", "runs data", "--workspace", ".", "say hi", cwd=tmp_path)
        assert run.returncode == 1
        last = run.stderr.strip().splitlines()[-1]
        prefix, hint = last.split("; resume it with: ")
        assert prefix.startswith(f"dsh: the run failed (MODEL_UNAVAILABLE: model server http://127.0.0.1:{port}/v1")
        assert hint == "dsh resume --data-dir 'runs data' session-1"
        assert run.stderr.strip().splitlines()[-2] == "dsh: session session-1"

        again = _dsh(*shlex.split(hint)[1:], cwd=tmp_path)  # the recorded model: the server is still down
        assert again.returncode == 1
        assert again.stderr.strip().splitlines()[-1] == last
        retries = [event for event in _events(tmp_path, "runs data") if event.get("type") == "user/message"
                   and RETRY_NOTICE in json.dumps(event["data"])]
        assert len(retries) == 1

    def test_a_resume_that_completes_ends_on_the_session_line(self, tmp_path: Path) -> None:
        port = _closed_port()
        _dsh("run", "--model", "openai:tiny?retries=0", "--base-url", f"http://127.0.0.1:{port}/v1",
             "--api-key-env", "", "--data-dir", "d", "--workspace", ".", "say hi", cwd=tmp_path)
        (tmp_path / "script.json").write_text(json.dumps({"lead": [{"text": "hi, at last"}]}))
        done = _dsh("resume", "--data-dir", "d", "--model", "scripted:script.json", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[-2:] == [f"[lead] user (resume): {RETRY_NOTICE}", "[lead] assistant: hi, at last"]
        assert done.stderr.strip().splitlines()[-1] == "dsh: session session-1"


class TestEnding:
    def test_a_completed_turn_or_no_turn_adds_nothing(self) -> None:
        assert ending({"kind": "completed"}, "session-1", Path("d")) is None
        assert ending(None, "session-1", Path("d")) is None

    def test_an_error_is_named_with_its_code_and_a_one_line_message(self) -> None:
        line = ending({"kind": "error", "error": {"code": "MODEL_AUTH", "message": "refused\n  the key"}},
                      "session-2", Path("/tmp/x y"))
        assert line == "dsh: the run failed (MODEL_AUTH: refused the key); resume it with: " \
                       "dsh resume --data-dir '/tmp/x y' session-2"

    def test_an_error_a_resume_would_repeat_names_the_way_out_not_dsh_resume(self) -> None:
        line = ending({"kind": "error", "error": {"code": "MODEL_TOOLS_UNSUPPORTED", "message": "llm model m does "
                                                  "not support tools"}}, "s", Path("d"))
        assert line is not None and line.startswith("dsh: the run failed (MODEL_TOOLS_UNSUPPORTED: llm model m")
        assert "dsh resume" not in line and "choose a model with tool support" in line

    def test_a_long_message_is_cut_and_a_missing_one_leaves_the_code(self) -> None:
        long = ending({"kind": "error", "error": {"code": "X", "message": "m" * 1000}}, "s", Path("d"))
        assert long is not None and f"(X: {'m' * 297}...)" in long
        assert ending({"kind": "error", "error": {"code": "X"}}, "s", Path("d")) == \
            "dsh: the run failed (X); resume it with: dsh resume --data-dir d s"
        assert ending({"kind": "error", "error": {}}, "s", Path("d")) == \
            "dsh: the run failed (UNKNOWN); resume it with: dsh resume --data-dir d s"

    def test_other_endings_say_how_the_turn_ended(self) -> None:
        assert ending({"kind": "aborted", "reason": "x"}, "s", Path("d")) == \
            "dsh: the run failed (the turn was aborted); resume it with: dsh resume --data-dir d s"
        assert ending({}, "s", Path("d")) == \
            "dsh: the run failed (the turn was unknown); resume it with: dsh resume --data-dir d s"
