"""``dsh run`` on an ``openai:`` model in real processes: a two-teammate team, SIGKILL mid-stream + resume, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import structlog

from host_spec.events import EventType
from host_spec.host.cli.main import main
from host_spec.host.resume import RESUME_NOTICE
from host_spec.host.store.jsonl import JsonlStore
from host_spec.messages import message_text
from kit_model_server import ModelServer, Slow, by_agent, calls, text
from kit_notes import KEY, KEY_ENV

pytestmark = pytest.mark.slow


def environment(tmp_path: Path, site: Path | None = None) -> dict[str, str]:
    variables = dict(os.environ)
    variables[KEY_ENV] = KEY
    variables.pop("DSH_DATA_DIR", None)
    variables.pop("OPENAI_BASE_URL", None)
    if site is not None:
        variables["PYTHONPATH"] = os.pathsep.join([str(site), variables.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return variables


def dsh(*args: str, env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def no_key_anywhere(data: Path, *outputs: str) -> None:
    for path in data.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    for output in outputs:
        assert KEY not in output


def texts(events: Any, kind: str) -> list[str]:
    return [message_text(e.value()["content"]) for e in events if e.type == kind]


def spawn(name: str, prompt: str) -> tuple[str, dict[str, Any]]:
    return "spawn_teammate", {"name": name, "description": f"{name} works", "prompt": prompt}


def test_a_two_teammate_team_runs_end_to_end(tmp_path: Path) -> None:
    data = tmp_path / "data"
    responder = by_agent({
        "[lead]": [calls(spawn("alice", "[alice] write the intro"), spawn("bob", "[bob] write the outro"), split=5),
                   text("waiting for alice and bob")],
        "[alice]": [calls(("send_message", {"target": "lead", "message": "alice reports: intro written"}), split=7),
                    text("alice done")],
        "[bob]": [calls(("send_message", {"target": "lead", "message": "bob reports: outro written"}), split=2),
                  text("bob done")],
    }, default=text("noted"))
    with ModelServer(responder) as server:
        env = environment(tmp_path)
        result = dsh("run", "--profile", "agent-teams", "--model", "openai:stub-model", "--base-url", server.base_url,
                     "--api-key-env", KEY_ENV, "--data-dir", str(data), "[lead] write a two-part text", env=env)
        assert result.returncode == 0, result.stderr
        show = dsh("team", "show", "--data-dir", str(data), env=env)
    assert show.returncode == 0, show.stderr
    store = JsonlStore(data)
    lead = next(s for s in store.list_ids() if store.read(s)[0].parent_session is None)
    received = " ".join(texts(store.read(lead)[1], EventType.USER_MESSAGE))
    assert "alice reports: intro written" in received and "bob reports: outro written" in received
    assert "[alice] assistant: alice done" in result.stdout and "[bob] assistant: bob done" in result.stdout
    members = show.stdout.split("\n\n")[1]  # the roster block (later blocks name members too)
    rows = {line.split()[0]: line for line in members.splitlines() if line.startswith("  ")}
    assert set(rows) >= {"lead", "alice", "bob"}
    for name in ("alice", "bob"):  # one tool step (20/7) and one text step (11/3) each
        assert "openai:stub-model" in rows[name] and "31/10" in rows[name], show.stdout
    assert all(h["authorization"] == f"Bearer {KEY}" for h in server.headers)
    record = json.loads(next((data / "runs").glob("*.json")).read_text())
    assert record["model"] == f"openai:stub-model?base_url={server.base_url}&api_key_env={KEY_ENV}"
    no_key_anywhere(data, result.stdout, result.stderr, show.stdout)


def test_sigkill_mid_stream_then_resume_re_resolves_the_recorded_spec(tmp_path: Path) -> None:
    data = tmp_path / "data"
    phase = {"slow": True}

    def responder(request: dict[str, Any]) -> Any:
        return Slow(every=0.05) if phase["slow"] else text("picked up after the crash")

    with ModelServer(responder) as server:
        env = environment(tmp_path)
        args = [sys.executable, "-m", "host_spec.host.cli.main", "run", "--model", "openai:stub-model",
                "--base-url", server.base_url, "--api-key-env", KEY_ENV, "--data-dir", str(data), "hello"]
        process = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120  # a safety net against a hang, not a speed assertion
            while not server.stream_started.wait(0.05):
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "the run never started streaming"
        finally:
            process.send_signal(signal.SIGKILL)
            out, err = process.communicate()
        assert process.returncode == -signal.SIGKILL
        phase["slow"] = False
        resumed = dsh("resume", "--data-dir", str(data), env=env)  # no flags: the recorded spec is resolved again
    assert resumed.returncode == 0, resumed.stderr
    store = JsonlStore(data)
    _, events = store.read(store.list_ids()[0])
    reasons = [e.value()["reason"]["kind"] for e in events if e.type == EventType.TURN_END]
    assert reasons == ["interrupted", "completed"]
    assert texts(events, EventType.USER_MESSAGE) == ["hello", RESUME_NOTICE]
    assistant = [e.value() for e in events if e.type == EventType.ASSISTANT_MESSAGE]
    assert [message_text(a["content"]) for a in assistant] == ["picked up after the crash"]
    assert assistant[0]["usage"] == {"input_tokens": 11, "output_tokens": 3}
    last = server.requests[-1]
    assert last["model"] == "stub-model" and server.headers[-1]["authorization"] == f"Bearer {KEY}"
    no_key_anywhere(data, out, err, resumed.stdout, resumed.stderr)


ECHO_PLUGIN = '''
class Echo:
    def __init__(self, argument):
        self.argument = argument

    async def complete(self, request):
        return {"text": f"echo {self.argument}", "tool_calls": [], "usage": {"input_tokens": 1, "output_tokens": 2}}


def factory(argument):
    return Echo(argument)
'''


def test_a_third_party_adapter_resolves_through_the_entry_point_group(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "echoplug.py").write_text(ECHO_PLUGIN)
    dist = site / "echoplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: echoplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[dsh.models]\necho = echoplug:factory\n")
    data = tmp_path / "data"
    result = dsh("run", "--model", "echo:hello", "--data-dir", str(data), "hi", env=environment(tmp_path, site))
    assert result.returncode == 0, result.stderr
    assert "[lead] assistant: echo hello" in result.stdout
    _, events = JsonlStore(data).read(JsonlStore(data).list_ids()[0])
    step = next(e.value() for e in events if e.type == EventType.ASSISTANT_MESSAGE)
    assert (step["model"], step["usage"]) == ("echo:hello", {"input_tokens": 1, "output_tokens": 2})


class TestBadInput:
    @pytest.fixture(autouse=True)
    def _logging(self) -> Any:
        """``main()`` configures structlog for the process; undo it for the tests that follow."""
        yield
        structlog.reset_defaults()

    def test_a_missing_key_variable_is_model_auth_and_writes_nothing(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        monkeypatch.delenv("DSH_ABSENT_KEY", raising=False)
        data = tmp_path / "data"
        code = main(["run", "--model", "openai:m", "--api-key-env", "DSH_ABSENT_KEY", "--data-dir", str(data), "x"])
        assert code == 2
        assert capsys.readouterr().err.startswith("dsh: MODEL_AUTH: environment variable DSH_ABSENT_KEY is not set")
        assert JsonlStore(data).list_ids() == [] and not (data / "runs").exists()

    def test_an_unknown_kind_lists_the_installed_ones(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["run", "--model", "gemini:x", "--data-dir", str(tmp_path), "x"]) == 2
        err = capsys.readouterr().err
        assert err.startswith('dsh: MODEL_UNKNOWN: unknown model "gemini:x"') and "openai:..." in err and "scripted:..." in err

    def test_openai_options_on_another_kind_are_a_usage_error(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["run", "--model", "scripted:x.json", "--base-url", "http://x", "--data-dir", str(tmp_path), "x"]) == 2
        assert "dsh: CLI_USAGE: --base-url and --api-key-env apply to openai: models only" in capsys.readouterr().err

    def test_a_key_in_the_spec_is_refused(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["run", "--model", f"openai:m?api_key={KEY}", "--data-dir", str(tmp_path), "x"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("dsh: MODEL_SPEC_INVALID:") and KEY not in err
