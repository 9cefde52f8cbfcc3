"""``dsh run --model llm:...`` in real processes: ``llm`` finds a scripted plugin model and it drives a Team.

The child's ``llm`` loads only the test plugin (``LLM_LOAD_PLUGINS``, a temp
``dist-info``) and keeps its keys and aliases under a temp ``LLM_USER_PATH``.
"""

from __future__ import annotations

import hashlib
import os
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from host_spec.events import EventType
from host_spec.host.store.jsonl import JsonlStore
from host_spec.messages import message_text
from kit_llm import KEY, child_env, logged, step

pytestmark = pytest.mark.slow


def dsh(*args: str, env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def spawn(name: str, prompt: str) -> tuple[str, dict[str, Any]]:
    return "spawn_teammate", {"name": name, "description": f"{name} works", "prompt": prompt}


def no_key_anywhere(root: Path, *outputs: str) -> None:
    """Not in the data directory, not in what the plugin logged, not in any output."""
    for path in [*(root / "data").rglob("*"), root / "llm-requests.jsonl"]:
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    for output in outputs:
        assert KEY not in output


def test_an_llm_plugin_model_drives_a_team_through_our_loop(tmp_path: Path) -> None:
    script = {
        "[lead]": [step("", spawn("alice", "[alice] write the intro"), usage=(30, 5)),
                   step("waiting for alice", usage=(12, 2))],
        "[alice]": [step("", ("send_message", {"target": "lead", "message": "alice reports: intro written"}),
                         usage=(9, 4)),
                    step("alice done", usage=(3, 1))],
    }
    env = child_env(tmp_path, script)
    data = tmp_path / "data"
    # An alias (as `llm aliases` lists it) and a model option (as `llm -o temperature 0.2`).
    result = dsh("run", "--profile", "agent-teams", "--model", "llm:dshs?o.temperature=0.2", "--data-dir", str(data),
                 "[lead] write a text with a teammate", env=env)
    assert result.returncode == 0, result.stderr
    show = dsh("team", "show", "--data-dir", str(data), env=env)
    assert show.returncode == 0, show.stderr
    store = JsonlStore(data)
    lead = next(s for s in store.list_ids() if store.read(s)[0].parent_session is None)
    events = store.read(lead)[1]
    received = " ".join(message_text(e.value()["content"]) for e in events if e.type == EventType.USER_MESSAGE)
    assert "alice reports: intro written" in received
    replies = [e.value() for e in events if e.type == EventType.ASSISTANT_MESSAGE]
    assert replies[0]["usage"] == {"input_tokens": 30, "output_tokens": 5}
    assert replies[0]["model"] == "llm:dsh-scripted"  # the model's id, not the alias typed
    assert "[alice] assistant: alice done" in result.stdout
    members = show.stdout.split("\n\n")[1]
    rows = {line.split()[0]: line for line in members.splitlines() if line.startswith("  ")}
    assert "llm:dsh-scripted" in rows["alice"] and "12/5" in rows["alice"], show.stdout
    asked = [r for r in logged(tmp_path) if "roles" in r]
    lead_tools = set(asked[0]["tools"])
    assert {"spawn_teammate", "send_message"} <= lead_tools
    assert all(r["options"] == {"temperature": 0.2} and r["stream"] for r in asked)
    record = json.loads(next((data / "runs").glob("*.json")).read_text())
    assert record["model"] == "llm:dshs?o.temperature=0.2"  # what `dsh resume` resolves again


def test_keys_come_from_llm_and_never_reach_a_log_or_an_error(tmp_path: Path) -> None:
    env = child_env(tmp_path, {"[lead]": [step("hello", usage=(1, 1))]})
    data = tmp_path / "data"
    missing = dsh("run", "--model", "llm:dsh-keyed", "--data-dir", str(data), "[lead] hi", env=env)
    assert missing.returncode == 2
    assert "MODEL_AUTH" in missing.stderr and "llm keys set dshtest" in missing.stderr
    assert "DSH_TEST_LLM_KEY" in missing.stderr
    users = Path(env["LLM_USER_PATH"])
    users.mkdir(parents=True, exist_ok=True)
    (users / "keys.json").write_text(json.dumps({"dshtest": KEY}))  # what `llm keys set dshtest` writes
    first = dsh("run", "--model", "llm:dsh-keyed", "--data-dir", str(data), "[lead] hi", env=env)
    assert first.returncode == 0, first.stderr
    sha = hashlib.sha256(KEY.encode()).hexdigest()[:12]
    assert [r["key_sha"] for r in logged(tmp_path) if "roles" in r] == [sha]
    no_key_anywhere(tmp_path, missing.stdout, missing.stderr, first.stdout, first.stderr)


def test_an_auth_failure_mid_run_is_a_typed_turn_error_without_the_key(tmp_path: Path) -> None:
    script = {"[lead]": [step(error={"status": 401, "message": f"invalid key {KEY}"})]}
    env = child_env(tmp_path, script, DSH_TEST_LLM_KEY=KEY)
    data = tmp_path / "data"
    result = dsh("run", "--model", "llm:dsh-keyed", "--data-dir", str(data), "[lead] hi", env=env)
    assert result.returncode == 1
    store = JsonlStore(data)
    events = store.read(store.list_ids()[0])[1]
    reason = [e.value()["reason"] for e in events if e.type == EventType.TURN_END][-1]
    assert reason["error"] == {"code": "MODEL_AUTH", "message": "llm model dsh-keyed refused the API key (HTTP 401)"}
    no_key_anywhere(tmp_path, result.stdout, result.stderr)


def test_an_unknown_model_fails_before_anything_is_written(tmp_path: Path) -> None:
    env = child_env(tmp_path, {})
    data = tmp_path / "data"
    result = dsh("run", "--model", "llm:no-such-model", "--data-dir", str(data), "hi", env=env)
    assert result.returncode == 2, result.stderr
    assert "dsh: MODEL_UNKNOWN:" in result.stderr and "llm models" in result.stderr
    assert not any(data.glob("*.jsonl")) if data.exists() else True


def test_a_plugin_that_fails_to_import_is_named_with_the_way_out(tmp_path: Path) -> None:
    env = child_env(tmp_path, {}, broken=True)
    result = dsh("run", "--model", "llm:dsh-scripted", "--data-dir", str(tmp_path / "data"), "hi", env=env)
    assert result.returncode == 2
    assert "MODEL_LOAD_FAILED" in result.stderr and "dsh_no_such_dependency" in result.stderr
    assert "LLM_LOAD_PLUGINS" in result.stderr


def test_a_sync_only_model_runs_in_a_thread(tmp_path: Path) -> None:
    env = child_env(tmp_path, {"[lead]": [step("from a sync model", usage=(2, 1))]})
    result = dsh("run", "--model", "llm:dsh-synconly", "--data-dir", str(tmp_path / "data"), "[lead] hi", env=env)
    assert result.returncode == 0, result.stderr
    assert "[lead] assistant: from a sync model" in result.stdout
    assert [r.get("thread") for r in logged(tmp_path)] == [True]


def test_a_third_party_plugin_that_reads_the_prompt_answers_the_real_prompt(tmp_path: Path) -> None:
    """llm-echo (from PyPI, the ``test`` extra) reads ``prompt.prompt``, ``.system`` and ``.tool_results``.

    Its reply is those fields as JSON, so the test reads what the plugin was given
    from the reply the Lead's log recorded: the typed prompt, the real system prompt
    of the profile and, on the step after its tool call, that call's recorded result.
    """
    env = dict(os.environ)
    for name in ("DSH_DATA_DIR", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        env.pop(name, None)
    env.update({"LLM_LOAD_PLUGINS": "llm-echo", "LLM_USER_PATH": str(tmp_path / "llm-user")})
    data = tmp_path / "data"
    # llm-echo's own convention: a JSON prompt names the tool calls its reply makes.
    prompt = json.dumps({"prompt": "list the board for the release", "tool_calls": [
        {"name": "team_task_list", "arguments": {}}]})
    result = dsh("run", "--profile", "agent-teams", "--model", "llm:echo", "--data-dir", str(data), prompt, env=env)
    assert result.returncode == 0, result.stderr
    store = JsonlStore(data)
    events = store.read(store.list_ids()[0])[1]
    replies = [json.loads(message_text(e.value()["content"])) for e in events
               if e.type == EventType.ASSISTANT_MESSAGE]
    assert replies[0]["prompt"] == "list the board for the release"
    assert replies[0]["system"].startswith("# Agent Team") and "task board" in replies[0]["system"]
    recorded = next(e.value() for e in events if e.type == EventType.TOOL_RESULT)
    assert replies[1]["tool_results"] == [{"name": "team_task_list", "output": message_text(recorded["content"]),
                                           "tool_call_id": recorded["call_id"]}]
    assert json.loads(replies[1]["tool_results"][0]["output"])["tasks"] == []


def test_a_model_without_tool_support_ends_the_run_with_the_way_out_not_a_resume(tmp_path: Path) -> None:
    """``dsh resume`` would offer the same tools to the same model: the closing line says to choose another."""
    env = child_env(tmp_path, {"[lead]": [step("never")]})
    result = dsh("run", "--profile", "agent-teams", "--model", "llm:dsh-notools", "--data-dir", str(tmp_path / "data"),
                 "[lead] hi", env=env)
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("dsh: the run failed (MODEL_TOOLS_UNSUPPORTED: llm model dsh-notools does not support tools")
    assert "choose a model with tool support" in last and "dsh resume" not in last
