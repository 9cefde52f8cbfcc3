"""Continuable children across real processes: ``dsh run`` end to end, and SIGKILL + ``dsh resume``."""

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

from host_spec.events import EventType, InboxSplice, SubagentDescriptor
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.store.jsonl import JsonlStore
from host_spec.messages import message_text, text_block

BLOCK_PLUGIN = '''
import asyncio
import msgspec
from host_spec import hookimpl
from host_spec.records import ToolSpec

class BlockArgs(msgspec.Struct, forbid_unknown_fields=True):
    """Wait forever (until the turn is cancelled)."""

class BlockResult(msgspec.Struct):
    done: bool

async def _block(args, call):
    await call.signal.wait()
    return BlockResult(done=False)

@hookimpl
def dsh_plugin_loaded(host, ctx):
    ctx.own(host.tools.register(ToolSpec("block", "Wait forever.", BlockArgs, BlockResult, _block)))
'''


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


DONE_WHEN_SCRIPT = {
    "lead": [
        {"tool_calls": [call("subagent", description="researcher", prompt="find the answer"),
                        call("subagent_fork", description="forker", prompt="summarize it")]},
        {"when": "forker one", "tool_calls": [call("send_message", agent_id="forker", message="one more thing")]},
        {"when": "forker two", "text": "final: researcher says 42 / forker one / forker two"},
    ],
    "researcher": [{"text": "researcher says 42"}],
    "forker": [{"text": "forker one"}, {"when": "one more thing", "text": "forker two"}],
}

CRASH_SCRIPT = {
    "lead": [
        {"tool_calls": [call("subagent", description="helper", prompt="say hi")]},
        {"tool_calls": [call("subagent", description="worker", prompt="first job")]},
        {"tool_calls": [call("send_message", agent_id="worker", message="second job")]},
        {"tool_calls": [call("send_message", agent_id="worker", message="third job M1")]},
        {"tool_calls": [call("send_message", agent_id="helper", message="ping"), call("block")]},
        {"when": "pong", "tool_calls": [call("send_message", agent_id="worker", message="fourth job M2")]},
        {"when": "did M2", "text": "all done"},
    ],
    "helper": [{"text": "hi there"}, {"when": "ping", "text": "pong"}],
    "worker": [
        {"text": "job one done"},
        {"tool_calls": [call("block")]},
        {"when": "third job M1", "text": "did M1"},
        {"when": "fourth job M2", "text": "did M2"},
    ],
}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, Any]:
    """A tmp site with a ``block-plug`` plugin, a profile = headless + block, and a data dir."""
    site = tmp_path / "site"
    (site / "blockplug").mkdir(parents=True)
    (site / "blockplug" / "__init__.py").write_text(BLOCK_PLUGIN)
    dist = site / "blockplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: blockplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[dsh]\nblock-plug = blockplug\n")
    profile = tmp_path / "block.toml"
    profile.write_text('extends = "headless"\n[plugins.block-plug]\n')
    variables = dict(os.environ)
    variables["PYTHONPATH"] = os.pathsep.join([str(site), variables.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    variables.pop("DSH_DATA_DIR", None)
    return {"profile": profile, "data": tmp_path / "data", "env": variables, "tmp": tmp_path}


def dsh_args(env: dict[str, Any], command: str, script: dict[str, Any], *rest: str) -> list[str]:
    path = env["tmp"] / f"{command}-script.json"
    path.write_text(json.dumps(script))
    return [sys.executable, "-m", "host_spec.host.cli.main", "-v", command, "--profile", str(env["profile"]),
            "--model", f"scripted:{path}", "--data-dir", str(env["data"]), *rest]


def child_by_label(store: JsonlStore, label: str) -> str:
    for session_id in store.list_ids():
        _, events = store.read(session_id)
        for event in events:
            if event.type == EventType.SUBAGENT_DESCRIPTOR and event.decode(SubagentDescriptor).label == label:
                return session_id
    raise LookupError(label)


def user_texts(events: Any) -> list[str]:
    return [message_text(e.value()["content"]) for e in events if e.type == EventType.USER_MESSAGE]


def pending(events: Any) -> list[dict[str, Any]]:
    """Pending inbox items (whole messages) replayed from the splices."""
    items: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.type == EventType.INBOX_SPLICED:
            splice = event.decode(InboxSplice)
            for item in splice.inserted:
                items[item["id"]] = item
            for removed in splice.removed_ids:
                items.pop(removed, None)
    return list(items.values())


@pytest.mark.slow
class TestDoneWhen:
    def test_dsh_run_delegates_to_fresh_and_fork_and_messages_the_sleeping_fork(self, env: dict[str, Any]) -> None:
        """Through ``dsh run``: a fresh and a forked child answer, the fork is woken from disk by
        send_message, and the root receives every answer."""
        result = subprocess.run(dsh_args(env, "run", DONE_WHEN_SCRIPT, "go"), env=env["env"],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        assert "[lead] assistant: final: researcher says 42 / forker one / forker two" in result.stdout
        store = JsonlStore(env["data"])
        forker, researcher = child_by_label(store, "forker"), child_by_label(store, "researcher")
        header, events = store.read(forker)
        assert header.parent_session == "session-1" and header.origin == "subagent"
        assert events[header.seed_length].decode(SubagentDescriptor).provider == "fork"
        assert user_texts(events) == ["summarize it", "one more thing"]
        assert store.read(researcher)[0].seed_length == 0
        # The fork went to disk after its first answer and was cold-resumed by the message.
        lines = [line for line in result.stderr.splitlines() if forker in line]
        released = next(i for i, line in enumerate(lines) if "subagent.released" in line)
        resumed = next(i for i, line in enumerate(lines) if "subagent.resumed" in line)
        assert released < resumed


@pytest.mark.slow
class TestCrashRecovery:
    def test_pending_child_mail_survives_sigkill_and_is_delivered_once_on_resume(self, env: dict[str, Any]) -> None:
        """SIGKILL while a busy child holds queued mail: ``dsh resume`` wakes the lead, which messages
        the sleeping child; every message arrives exactly once."""
        store, worker = _run_until_killed(env)
        result = subprocess.run(dsh_args(env, "resume", CRASH_SCRIPT, "session-1"), env=env["env"],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        _, lead_events = store.read("session-1")
        _, worker_events = store.read(worker)
        assert user_texts(worker_events) == ["first job", "second job", "third job M1", "fourth job M2"]
        assert not pending(worker_events)
        codes = [(e.value().get("error") or {}).get("code") for e in worker_events if e.type == EventType.TOOL_RESULT]
        assert "TOOL_OUTCOME_UNKNOWN" in codes
        notices = [t for t in user_texts(lead_events) if t.startswith("Background subagent")]
        assert len([t for t in notices if "pong" in t]) == 1 and len([t for t in notices if "did M2" in t]) == 1
        assert [e.value()["content"][0]["text"] for e in lead_events if e.type == EventType.ASSISTANT_MESSAGE
                and e.value()["content"] and e.value()["content"][0].get("type") == "text"][-1] == "all done"


    @pytest.mark.timeout_s(120)  # includes the killed ``dsh run`` subprocess
    async def test_a_message_steered_to_the_unloaded_child_after_restart_arrives_once(self, env: dict[str, Any]) -> None:
        """After SIGKILL, a new process steers the sleeping child (host-only deliver): it is cold-resumed once,
        its crashed turn is closed, and the queued and the steered message each appear exactly once."""
        store, worker = _run_until_killed(env)
        script = {"lead": [], "worker": CRASH_SCRIPT["worker"]}
        host = await Host.open(env["data"], None, ScriptedModel.from_mapping(script))
        try:
            lead = host.start_agent(await host.resume_session("session-1"), name="lead", source="resume")
            await host.quiesce()  # the lead answers the helper's notice (its script is exhausted)
            message_id = await host.continuations.deliver(
                lead, worker, [text_block("fourth job M2 (steered)")], source={"kind": "user"}, mode="steer"
            )
            assert host.agents.get(worker) is not None
            await host.quiesce()
        finally:
            await host.close()
        events = store.read(worker)[1]
        steered = [e for e in events if e.type == EventType.USER_MESSAGE and e.value()["id"] == message_id]
        assert len(steered) == 1
        # A steer is claimed at the first step boundary, together with (and ahead of) the queued prompt.
        assert user_texts(events) == ["first job", "second job", "fourth job M2 (steered)", "third job M1"]
        assert not pending(events)
        assert [r.reply["text"] for r in host.model.requests if r.agent_id == worker] == ["did M1"]


def _run_until_killed(env: dict[str, Any]) -> tuple[JsonlStore, str]:
    """Run the crash script under ``dsh run`` and SIGKILL it at the crash point."""
    process = subprocess.Popen(dsh_args(env, "run", CRASH_SCRIPT, "go"), env=env["env"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    store = JsonlStore(env["data"])
    try:
        deadline = time.monotonic() + 60  # a safety net against a hang, not a speed assertion
        while not _ready_to_kill(store):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the run never reached the crash point"
            time.sleep(0.02)
    finally:
        process.send_signal(signal.SIGKILL)
        process.communicate()
    assert process.returncode == -signal.SIGKILL
    worker = child_by_label(store, "worker")
    assert "third job M1" in [message_text(m["content"]) for m in pending(store.read(worker)[1])]
    return store, worker


def _ready_to_kill(store: JsonlStore) -> bool:
    """The crash point: the lead is parked in ``block`` with the helper's notice durably pending,
    and the worker is parked in ``block`` with "third job M1" durably queued."""
    try:
        worker = child_by_label(store, "worker")
        _, lead = store.read("session-1")
        _, work = store.read(worker)
    except Exception:
        return False
    lead_blocked = any(e.type == EventType.TOOL_CALL and e.value()["name"] == "block" for e in lead)
    notice_pending = any(m["source"].get("kind") == "subagent-settled" for m in pending(lead))
    worker_blocked = any(e.type == EventType.TOOL_CALL and e.value()["name"] == "block" for e in work)
    mail_pending = any(message_text(m["content"]) == "third job M1" for m in pending(work))
    return lead_blocked and notice_pending and worker_blocked and mail_pending
