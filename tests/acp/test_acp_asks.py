"""Permission asks of a ``dsh acp`` run reach the editor as ``session/request_permission``; its answer is recorded once.

The SDK's own client side drives ``dsh acp`` in a real subprocess. The profile
puts ``bash(echo *)`` under ``ask``; the scripted Lead runs ``echo line >> out.txt``,
so "the command ran" is a line count in the workspace. The oracle is the Lead log
on disk, read with the store: its ``permission/requested`` and ``permission/answered``
records (who answered, and exactly once) and the tool result the model got.

* the editor allows: the command runs once, one answer by ``user``; it denies:
  nothing runs, the model gets ``PERMISSION_DENIED``; it allows always: the same
  command later runs without asking (one session, four prompts);
* the editor cancels: nothing is answered, the ask stays open until its deadline
  denies it; an editor answering after the deadline is refused harmlessly
  (``PERMISSION_ALREADY_ANSWERED`` in the agent, which goes on answering prompts);
* an ask open across a SIGKILL of the agent is asked again after ``session/load``
  and answered once; the command runs once.
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import pytest
from acp.schema import RequestPermissionResponse
from kit_acp import Editor, agent, initialized, prompt, until

from host_spec.events import EventType
from host_spec.host.acp.asks import ALLOW_ALWAYS
from host_spec.host.acp.permission import ALLOW_ONCE, REJECT_ONCE
from host_spec.host.store.jsonl import JsonlStore
from host_spec.messages import message_text

pytestmark = pytest.mark.slow

ASKED = "echo line >> out.txt"
CALL = {"name": "bash", "arguments": {"command": ASKED}}


def _setup(tmp: Path, steps: list[dict[str, Any]], timeout_ms: int) -> tuple[Path, Path, list[str]]:
    (tmp / "p.toml").write_text('extends = "agent-teams"\n[permissions]\ndefault = "allow"\n'
                                f'ask = ["bash(echo *)"]\nask_timeout_ms = {timeout_ms}\n')
    (tmp / "s.json").write_text(json.dumps({"lead": steps}))
    workspace = tmp / "workspace"
    workspace.mkdir()
    return tmp / "data", workspace, ["--profile", str(tmp / "p.toml"), "--model", f"scripted:{tmp / 's.json'}"]


def _records(data: Path, session_id: str, kind: str) -> list[dict[str, Any]]:
    _, events = JsonlStore(data).read(session_id)
    return [e.value() for e in events if e.type == kind]


def _results(data: Path, session_id: str) -> list[dict[str, Any]]:
    return _records(data, session_id, EventType.TOOL_RESULT)


def _lines(workspace: Path) -> int:
    out = workspace / "out.txt"
    return len(out.read_text().splitlines()) if out.exists() else 0


def _bash(editor: Editor) -> list[dict[str, Any]]:
    return [c for c in editor.tool_calls().values() if c["title"] == f"lead: bash {ASKED}"]


@pytest.mark.timeout_s(150)
async def test_the_editor_allows_denies_and_allows_always(tmp_path: Path) -> None:
    always = {"name": "bash", "arguments": {"command": "echo always"}}
    steps = [{"text": "first", "tool_calls": [CALL]}, {"text": "allowed."},
             {"text": "second", "tool_calls": [CALL]}, {"text": "denied."},
             {"text": "third", "tool_calls": [always]}, {"text": "allowed always."},
             {"text": "fourth", "tool_calls": [always]}, {"text": "allowed by the session rule."}]
    data, workspace, flags = _setup(tmp_path, steps, 3_600_000)
    editor = Editor(answer=ALLOW_ONCE)
    async with agent(editor, data, *flags, log=tmp_path / "agent.log") as (conn, _):
        await initialized(conn)
        session_id = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        assert (await prompt(conn, session_id, "go")).stop_reason == "end_turn"
        assert _lines(workspace) == 1
        [(asked_in, tool_call, options)] = editor.asks
        assert asked_in == session_id
        assert tool_call.title == f'lead: bash {ASKED} (rule "bash(echo *)")'
        assert tool_call.raw_input == {"command": ASKED}
        assert [o.kind for o in options] == ["allow_once", "allow_always", "reject_once"]
        [call] = _bash(editor)
        assert tool_call.tool_call_id in editor.tool_calls()  # the ask names the call the editor shows
        assert call["statuses"] == ["pending", "pending", "in_progress", "completed"]
        assert 'waiting for permission (rule "bash(echo *)")' in call["text"]

        editor.answer = REJECT_ONCE
        assert (await prompt(conn, session_id, "again")).stop_reason == "end_turn"
        assert len(editor.asks) == 2 and _lines(workspace) == 1  # denied: nothing ran
        assert _bash(editor)[-1]["statuses"][-1] == "failed"

        editor.answer = ALLOW_ALWAYS
        assert (await prompt(conn, session_id, "always")).stop_reason == "end_turn"
        assert (await prompt(conn, session_id, "once more")).stop_reason == "end_turn"
        assert len(editor.asks) == 3  # the fourth call was allowed by the session rule, not asked
    answered = _records(data, session_id, "permission/answered")
    assert [(a["ask_id"], a["decision"], a["by"], a["reason"], a.get("always", False)) for a in answered] == [
        ("ask-1", "allow", "user", "answered in the editor", False),
        ("ask-2", "deny", "user", "answered in the editor", False),
        ("ask-3", "allow", "user", "answered in the editor", True)]
    assert len(_records(data, session_id, "permission/requested")) == 3
    results = _results(data, session_id)
    assert [json.loads(message_text(r["content"]))["output"] for r in results[2:]] == ["always\n", "always\n"]
    denied = results[1]
    assert denied["is_error"] and denied["error"]["code"] == "PERMISSION_DENIED"


class LateEditor(Editor):
    """Cancels the first ask; answers the second only after its call failed (the deadline denied it)."""

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any],
                                 **kwargs: Any) -> RequestPermissionResponse:
        if self.asks:  # the second ask: answer once the deadline has answered it
            await until(self, lambda: self.tool_calls()[tool_call.tool_call_id]["statuses"][-1] == "failed",
                        "the deadline denying the ask")
            self.answer = ALLOW_ONCE
        try:
            return await super().request_permission(session_id, tool_call, options, **kwargs)
        finally:
            self.changed.set()


@pytest.mark.timeout_s(150)
async def test_a_cancel_answers_nothing_and_a_late_answer_is_refused(tmp_path: Path) -> None:
    steps = [{"text": "first", "tool_calls": [CALL]}, {"text": "timed out."},
             {"text": "second", "tool_calls": [CALL]}, {"text": "timed out again."}, {"text": "still here."}]
    data, workspace, flags = _setup(tmp_path, steps, 4_000)
    editor = LateEditor(answer=None)
    async with agent(editor, data, *flags, log=tmp_path / "agent.log") as (conn, _):
        await initialized(conn)
        session_id = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        assert (await prompt(conn, session_id, "go")).stop_reason == "end_turn"
        assert (await prompt(conn, session_id, "again")).stop_reason == "end_turn"
        await until(editor, lambda: editor.answer == ALLOW_ONCE and len(editor.asks) == 2, "the late answer")
        assert (await prompt(conn, session_id, "alive?")).stop_reason == "end_turn"
        assert "still here." in editor.message_text()
    answered = _records(data, session_id, "permission/answered")
    assert [(a["ask_id"], a["decision"], a["by"]) for a in answered] == [
        ("ask-1", "deny", "deadline"), ("ask-2", "deny", "deadline")]
    assert _lines(workspace) == 0  # the late "allow" was refused: nothing ran, the agent went on


class SilentEditor(Editor):
    """Records the ask and never answers it (the user has not looked yet)."""

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any],
                                 **kwargs: Any) -> RequestPermissionResponse:
        self.asks.append((session_id, tool_call, options))
        self.changed.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


@pytest.mark.timeout_s(150)
async def test_an_ask_open_across_a_sigkill_is_asked_again_after_load(tmp_path: Path) -> None:
    steps = [{"text": "first", "tool_calls": [CALL]}, {"text": "allowed after the crash."}]
    data, workspace, flags = _setup(tmp_path, steps, 3_600_000)
    editor = SilentEditor()
    async with agent(editor, data, *flags, log=tmp_path / "agent.log") as (conn, process):
        await initialized(conn)
        session_id = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        running = asyncio.ensure_future(prompt(conn, session_id, "go"))
        await until(editor, lambda: editor.asks, "the ask")
        process.send_signal(signal.SIGKILL)
        assert await process.wait() == -signal.SIGKILL
        with pytest.raises(ConnectionError):
            await running
    assert len(_records(data, session_id, "permission/requested")) == 1
    assert _records(data, session_id, "permission/answered") == [] and _lines(workspace) == 0

    loaded = Editor(answer=ALLOW_ONCE)
    async with agent(loaded, data, log=tmp_path / "agent.log") as (conn, _):
        await initialized(conn)
        await conn.load_session(cwd=str(workspace), session_id=session_id, mcp_servers=[])
        await until(loaded, lambda: "allowed after the crash." in loaded.message_text(), "the Lead carrying on")
        [(_, tool_call, _)] = loaded.asks
        assert tool_call.title == f'lead: bash {ASKED} (rule "bash(echo *)")'
        [call] = _bash(loaded)
        assert call["statuses"][-1] == "completed" and "waiting for permission" in call["text"]
    answered = _records(data, session_id, "permission/answered")
    assert [(a["ask_id"], a["decision"], a["by"]) for a in answered] == [("ask-1", "allow", "user")]
    assert _lines(workspace) == 1
