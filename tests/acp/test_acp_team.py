"""``dsh acp`` driven by the SDK's client side through the scripted demo Team (host_spec/host/demo/team_demo.json).

One prompt starts the run: the Lead's turn ends (``end_turn``) once it has put two
tasks on the board and spawned the builder, and the Team goes on between prompts,
its updates streaming until the Lead's summary. What the editor must have seen:
the Lead's text as message chunks, every member's tool calls titled with the
member's name and moving pending -> in_progress -> completed, members' activity,
and the board as a plan whose entries follow the tasks to ``completed``. The
oracle for the board is the run's own record, read independently with
``dsh team show --json`` after the agent exited.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from acp import RequestError
from kit_acp import DEMO, Editor, agent, initialized, prompt, until

pytestmark = pytest.mark.slow

TASK = "Use an Agent Team: write a greeting module and review it."


@pytest.mark.timeout_s(120)
async def test_a_team_run_streams_to_the_editor(tmp_path: Path) -> None:
    data, workspace = tmp_path / "data", tmp_path / "workspace"
    workspace.mkdir()
    editor = Editor()
    async with agent(editor, data, "--model", f"scripted:{DEMO}", log=tmp_path / "agent.log") as (conn, _):
        init = await initialized(conn)
        caps = init.agent_capabilities
        assert init.agent_info.name == "dsh"
        assert caps.load_session and caps.mcp_capabilities.http and caps.mcp_capabilities.sse

        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        answer = await prompt(conn, session.session_id, TASK)
        assert answer.stop_reason == "end_turn"
        first_turn = editor.message_text()
        assert "I will put the work on the Team board first" in first_turn
        assert "Summary:" not in first_turn  # the Team is still working: the rest comes between prompts

        await until(editor, lambda: "Summary: builder wrote src/greet.py" in editor.message_text(), "the summary")
        await until(editor, lambda: editor.plans() and all(s == "completed" for _, s in editor.plans()[-1]),
                    "a plan with every task completed")

        # One process per run: a second agent cannot load the session while this one holds it.
        async with agent(Editor(), data, log=tmp_path / "other.log") as (other, _):
            await initialized(other)
            with pytest.raises(RequestError) as locked:
                await other.load_session(cwd=str(workspace), session_id=session.session_id, mcp_servers=[])
            assert locked.value.data == {"code": "SESSION_LOCKED"}

    calls = editor.tool_calls()
    titles = [call["title"] for call in calls.values()]
    assert "builder: write_file src/greet.py" in titles
    assert "reviewer: write_file docs/review.md" in titles
    assert "lead: spawn_teammate builder" in titles
    write = next(call for call in calls.values() if call["title"] == "builder: write_file src/greet.py")
    assert write["statuses"] == ["pending", "in_progress", "completed"] and write["kind"] == "edit"
    stale = [c for c in calls.values() if c["title"] == "builder: edit_file src/greet.py" and "failed" in c["statuses"]]
    assert stale and "FILE_STALE" in stale[0]["text"]  # the demo's refused stale edit shows as failed
    assert all(call["statuses"][-1] in ("completed", "failed") for call in calls.values())

    thoughts = editor.thought_text()
    assert "[builder] assistant: Writing src/greet.py." in thoughts
    assert "[reviewer] working" in thoughts
    assert (workspace / "src" / "greet.py").is_file()  # the client's cwd is the workspace

    # The plan is the board: the same tasks and statuses the run recorded.
    show = subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", "team", "show", "--json",
                           "--data-dir", str(data), session.session_id], capture_output=True, text=True, check=True)
    board = json.loads(show.stdout)["tasks"]
    plans = editor.plans()
    assert plans[-1] == [(f"{t['id']} {t['subject']} ({t['owner_name']})", t["status"]) for t in board]
    seen = {(content.split()[0], status) for plan in plans for content, status in plan}
    assert {("task-1", "pending"), ("task-1", "in_progress"), ("task-1", "completed")} <= seen
    assert all(a != b for a, b in zip(plans, plans[1:]))  # a plan is sent only when it changed

    # Loaded again: every log replayed, the board as it stands; a member's session is no run to load.
    member = next(call_id.split(":")[0] for call_id, call in calls.items() if call["title"].startswith("builder:"))
    loaded = Editor()
    async with agent(loaded, data, log=tmp_path / "agent.log") as (conn, _):
        await initialized(conn)
        await conn.load_session(cwd=str(workspace), session_id=session.session_id, mcp_servers=[])
        assert loaded.plans()[-1] == plans[-1]
        replayed = {call["title"]: call["statuses"] for call in loaded.tool_calls().values()}
        assert replayed["builder: write_file src/greet.py"] == ["pending", "completed"]  # members' logs too
        assert sorted(loaded.tool_calls()) == sorted(calls)  # every call of every member, by its id
        assert "[reviewer] assistant: Reviewed src/greet.py and wrote docs/review.md." in loaded.thought_text()
        assert "Summary: builder wrote src/greet.py" in loaded.message_text()
        assert TASK in "".join(u.content.text for u in loaded.of("user_message_chunk"))
        with pytest.raises(RequestError) as not_root:
            await conn.load_session(cwd=str(workspace), session_id=member, mcp_servers=[])
        assert not_root.value.data == {"code": "SESSION_NOT_FOUND"} and "member's session" in str(not_root.value)
