"""``dsh acp`` sessions over their whole life, driven by the SDK's client side in real subprocesses.

The Lead is scripted (:data:`SCRIPT`): its first turn runs a long ``bash`` command,
the later ones answer one line each. Through the protocol only:

* ``session/cancel`` interrupts the running turn (``stopReason`` ``cancelled``,
  the shell command's call ``failed``) and the next prompt is answered;
* a session whose agent exited is ``session/load``-ed by a new agent process:
  the stored run is replayed as updates (the user's lines too), then a new prompt
  continues the same run (the Lead's next scripted step, same session id);
* a SIGKILL of the agent mid-turn, then ``session/load`` in a new process:
  the cut call is closed ``TOOL_OUTCOME_UNKNOWN`` in the replay, the Lead carries
  on by itself as ``dsh resume`` makes it, and the next prompt continues the run.

The oracle for "continued, not restarted" is the Lead's own log on disk, read
with the store after the agents exited.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit_acp import Editor, agent, initialized, prompt, until

from host_spec.events import EventType
from host_spec.host.store.jsonl import JsonlStore
from host_spec.messages import message_text

pytestmark = pytest.mark.slow

LONG = "Running the long check."
SCRIPT = {"lead": [
    {"text": LONG, "tool_calls": [{"name": "bash", "arguments": {"command": "echo $$ > bash.pid; exec sleep 30"}}]},
    {"text": "Back after the interruption."},
    {"text": "Second prompt answered."},
    {"text": "Third prompt answered."},
]}


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Path, Path, list[str]]]:
    script = tmp_path / "lead.json"
    script.write_text(json.dumps(SCRIPT))
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    yield tmp_path / "data", workspace, ["--model", f"scripted:{script}"]
    pid_file = workspace / "bash.pid"  # a shell a SIGKILLed agent left behind: stop it
    if pid_file.exists():
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError, PermissionError):
            pass


def _bash_running(editor: Editor) -> bool:
    return any(c["title"].startswith("lead: bash") and "in_progress" in c["statuses"]
               for c in editor.tool_calls().values())


def _lead_texts(data: Path, session_id: str) -> list[str]:
    _, events = JsonlStore(data).read(session_id)
    return [message_text(e.value()["content"]) for e in events if e.type == EventType.ASSISTANT_MESSAGE]


async def _first_turn(conn: Any, editor: Editor, workspace: Path) -> tuple[str, Any]:
    """A new session whose prompt is left running in the long shell call; returns its id and the prompt task."""
    await initialized(conn)
    session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
    task = asyncio.ensure_future(prompt(conn, session.session_id, "check everything"))
    await until(editor, lambda: _bash_running(editor), "the shell call running")
    return session.session_id, task


@pytest.mark.timeout_s(120)
async def test_cancel_then_load_in_a_new_agent_continues_the_run(setup: tuple[Path, Path, list[str]],
                                                                  tmp_path: Path) -> None:
    data, workspace, flags = setup
    editor = Editor()
    async with agent(editor, data, *flags, log=tmp_path / "agent.log") as (conn, _):
        session_id, running = await _first_turn(conn, editor, workspace)
        await conn.cancel(session_id=session_id)
        assert (await running).stop_reason == "cancelled"
        bash = next(c for c in editor.tool_calls().values() if c["title"].startswith("lead: bash"))
        assert bash["statuses"][-1] == "failed"
        answer = await prompt(conn, session_id, "are you back?")
        assert answer.stop_reason == "end_turn"
        assert "Back after the interruption." in editor.message_text()

    loaded = Editor()
    async with agent(loaded, data, log=tmp_path / "agent.log") as (conn, _):  # no --model: the recorded one
        await initialized(conn)
        await conn.load_session(cwd=str(workspace), session_id=session_id, mcp_servers=[])
        replayed = list(loaded.updates)
        users = "".join(u.content.text for u in replayed if u.session_update == "user_message_chunk")
        assert "check everything" in users and "are you back?" in users
        assert LONG in loaded.message_text() and "Back after the interruption." in loaded.message_text()
        assert any(c["title"].startswith("lead: bash") for c in loaded.tool_calls().values())
        answer = await prompt(conn, session_id, "and now?")
        assert answer.stop_reason == "end_turn"
        assert loaded.message_text().endswith("Second prompt answered.\n\n")
    assert _lead_texts(data, session_id) == [LONG, "Back after the interruption.", "Second prompt answered."]


@pytest.mark.timeout_s(120)
async def test_sigkill_mid_turn_then_load_recovers_the_run(setup: tuple[Path, Path, list[str]],
                                                           tmp_path: Path) -> None:
    data, workspace, flags = setup
    editor = Editor()
    async with agent(editor, data, *flags, log=tmp_path / "agent.log") as (conn, process):
        session_id, running = await _first_turn(conn, editor, workspace)
        process.send_signal(signal.SIGKILL)
        assert await process.wait() == -signal.SIGKILL
        with pytest.raises(ConnectionError):
            await running  # the connection died under the prompt
    loaded = Editor()
    async with agent(loaded, data, log=tmp_path / "agent.log") as (conn, _):
        await initialized(conn)
        await conn.load_session(cwd=str(workspace), session_id=session_id, mcp_servers=[])
        bash = next(c for c in loaded.tool_calls().values() if c["title"].startswith("lead: bash"))
        assert bash["statuses"][-1] == "failed" and "TOOL_OUTCOME_UNKNOWN" in bash["text"]
        # continued as dsh resume continues: the Lead carries on by itself
        await until(loaded, lambda: "Back after the interruption." in loaded.message_text(), "the Lead carrying on")
        answer = await prompt(conn, session_id, "status?")
        assert answer.stop_reason == "end_turn"
        assert "Second prompt answered." in loaded.message_text()
    assert _lead_texts(data, session_id) == [LONG, "Back after the interruption.", "Second prompt answered."]


@pytest.mark.timeout_s(120)
async def test_sigterm_closes_the_run_cleanly_for_a_later_load(setup: tuple[Path, Path, list[str]],
                                                               tmp_path: Path) -> None:
    data, workspace, flags = setup
    editor = Editor()
    async with agent(editor, data, *flags, log=tmp_path / "agent.log") as (conn, process):
        session_id, running = await _first_turn(conn, editor, workspace)
        process.send_signal(signal.SIGTERM)  # how an editor stops its agent
        assert await process.wait() == 0
        with pytest.raises(ConnectionError):
            await running
    _, events = JsonlStore(data).read(session_id)
    assert [e.value()["reason"]["kind"] for e in events if e.type == EventType.TURN_END] == ["aborted"]
    loaded = Editor()
    async with agent(loaded, data, log=tmp_path / "agent.log") as (conn, _):
        await initialized(conn)
        await conn.load_session(cwd=str(workspace), session_id=session_id, mcp_servers=[])
        answer = await prompt(conn, session_id, "still there?")
        assert answer.stop_reason == "end_turn" and "Back after the interruption." in loaded.message_text()
