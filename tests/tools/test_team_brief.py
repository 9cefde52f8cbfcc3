"""The Team brief: after a cold resume or a compaction a member's context ends with its current Team facts.

Real hosts on JSONL stores with the three Team plugins and the scripted model. The
oracles are the Team's own public reads (``team_task_list``, ``list_agents``) and the
log, never the brief's own builder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsh_team.api import TeamServiceAPI
from dsh_team.views.brief import MAX_TASKS, SUBJECT_MAX, team_brief
from dsh_team_tools.reminder import reminder_block
from host_spec.events import ContextCompaction, EventType
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.messages import message_text, user_message

from team_tools_host import agent_named, call, open_team

SUBJECTS = ["Write the parser", "Test the parser", "Docs"]


def lead_script() -> list[dict[str, Any]]:
    creates = [{"name": "team_task_create", "arguments": {"subject": s, "description": s}} for s in SUBJECTS]
    spawn = {"name": "spawn_teammate", "arguments": {
        "name": "alice", "description": "parser work", "prompt": "[alice] claim task-1 and task-3, finish task-3"}}
    return [{"tool_calls": creates}, {"tool_calls": [spawn]}, {"text": "lead waits"}]


def update(task: str, revision: int, action: str) -> dict[str, Any]:
    return {"name": "team_task_update", "arguments": {"task_id": task, "expected_revision": revision, "action": action}}


ALICE = [
    {"tool_calls": [update("task-1", 1, "claim"), update("task-3", 1, "claim")]},
    {"tool_calls": [update("task-3", 2, "complete"),
                    {"name": "send_message", "arguments": {"target": "lead", "message": "alice: claimed"}}]},
    {"text": "alice idle"},
    {"when": "[ping]", "text": "alice saw the ping"},
]


def brief_of(request: Any) -> str | None:
    last = request.messages[-1]
    if (last.get("source") or {}).get("kind") != "context-brief":
        return None
    return message_text(last["content"])


def expected_teammate_brief(host: Any, lead: Any, name: str, unread: int) -> str:
    """The brief as the public reads state it (task rows and the roster), built here independently."""
    tasks = [t for t in host.service(TeamServiceAPI).list_tasks(lead) if t.owner_name == name]
    open_rows = [f'{t.id} "{t.subject}" {t.status} (revision {t.revision})' for t in tasks if t.status != "completed"]
    done = sum(t.status == "completed" for t in tasks)
    return ("<system-reminder>\n"
            f'Team brief (current): you are teammate "{name}" of an Agent Team; your Team Lead is "lead".\n'
            f"Your tasks: {'; '.join(open_rows) or 'none open'}" + (f" ({done} completed)." if done else ".") + "\n"
            f"Unread Team messages: {unread}.\n</system-reminder>")


class TestBriefAfterColdResume:
    async def test_a_woken_teammate_sees_its_current_tasks_and_mail(self, tmp_path: Path) -> None:
        """A teammate cold-resumed by mail ends each request with a brief that matches the Team state."""
        model = ScriptedModel.from_mapping({"lead": lead_script(), "alice": ALICE})
        async with open_team(tmp_path / "data", model) as host:
            lead = await host.run("[lead] build a parser with a teammate", session_id="lead")
            assert all(brief_of(r) is None for r in model.requests)  # nobody was resumed or compacted yet
            assert not [a for a in host.agents.list() if a.name == "alice"]  # alice settled and sleeps on disk
            result, error = await call(host, lead, "send_message", {"target": "alice", "message": "[ping] status?"})
            assert error is None
            await host.quiesce()
            (woken,) = [r for r in model.requests if r.agent_name == "alice" and r.reply.get("text") == "alice saw the ping"]
            assert brief_of(woken) == expected_teammate_brief(host, lead, "alice", unread=1)
            assert 'task-1 "Write the parser" in_progress (revision 2) (1 completed).' in (brief_of(woken) or "")
            (row,) = [m for m in host.service(TeamServiceAPI).list_members(lead) if m.name == "alice"]
            assert row.unread == 0  # the brief was current then: the reply read the message
            assert woken.messages[0]["content"][0] == reminder_block("alice")  # the identity reminder is untouched
            events = [e for a in [host.agents.get(row.id)] if a for e in a.session.events] or list(
                (await host.sessions.inspect(row.id)).events)
            assert all("Team brief" not in e.data.decode() for e in events if hasattr(e.data, "decode"))

    async def test_a_resumed_lead_sees_its_teammates(self, tmp_path: Path) -> None:
        """After ``resume`` the Lead's requests end with a brief naming its teammates and their status."""
        data = tmp_path / "data"
        model = ScriptedModel.from_mapping({"lead": lead_script(), "alice": ALICE})
        async with open_team(data, model) as host:
            await host.run("[lead] build a parser with a teammate", session_id="lead")
        again = ScriptedModel.from_mapping({"lead": [*lead_script(), {"text": "lead resumed"}], "alice": ALICE})
        async with open_team(data, again) as host:
            lead = await host.resume("lead")
            lead.followup(user_message("[user] how is it going?"))
            await host.quiesce()
            (request,) = [r for r in again.requests if r.agent_name == "lead"]
            assert brief_of(request) == (
                "<system-reminder>\nTeam brief (current): you are the Team Lead (\"lead\") of an Agent Team.\n"
                "Teammates: alice inactive.\nYour tasks: none open.\nUnread Team messages: 0.\n</system-reminder>")
            assert request.reply["text"] == "lead resumed"


class TestBriefAfterCompaction:
    async def test_a_compacted_teammate_keeps_its_reminder_and_gets_the_brief(self, tmp_path: Path) -> None:
        """The request after a teammate's compaction is exactly first message + summary + recent turns + brief."""
        report = [{"tool_calls": [{"name": "send_message", "arguments": {
            "target": "lead", "message": f"[r{i}] " + "progress " * 50}}]} for i in range(10)]
        alice = [ALICE[0], *report, {"text": "alice done"}]
        model = ScriptedModel.from_mapping({"lead": lead_script(), "alice": alice}, context_window=3200)
        async with open_team(tmp_path / "data", model) as host:
            lead = await host.run("[lead] build a parser with a teammate", session_id="lead")
            (row,) = [m for m in host.service(TeamServiceAPI).list_members(lead) if m.name == "alice"]
            events = list((await host.sessions.inspect(row.id)).events)
            compacted = [e for e in events if e.type == EventType.CONTEXT_COMPACTED]
            assert compacted, "alice's long session compacted"
            event = compacted[0]
            record = event.decode(ContextCompaction)
            alice_requests = [r for r in model.requests if r.agent_name == "alice"]
            index = next(i for i, r in enumerate(alice_requests) if r.purpose == "compaction")
            after = alice_requests[index + 1]
            first = next(e.value() for e in events if e.seq == record.first_seq)
            kept = [e for e in events if record.kept_from_seq <= e.seq < event.seq
                    and e.type in (EventType.USER_MESSAGE, EventType.ASSISTANT_MESSAGE, EventType.TOOL_RESULT)]
            assert after.messages[0] == first and first["content"][0] == reminder_block("alice")
            assert after.messages[1]["source"] == {"kind": "compaction", "seq": event.seq}
            assert record.summary in message_text(after.messages[1]["content"])
            assert [m.get("id") or m.get("call_id") for m in after.messages[2:-1]] == [
                e.value().get("id") or e.value().get("call_id") or None for e in kept if e.value().get("content")]
            assert brief_of(after) is not None and 'you are teammate "alice"' in (brief_of(after) or "")
            assert '"id":"task-1"' in record.summary  # the oldest results were summarised


class TestBriefText:
    async def test_many_long_and_blocked_tasks_stay_small(self, tmp_path: Path) -> None:
        """Open tasks beyond the cap are counted, subjects are cut, a blocked pending task says so."""
        async with open_team(tmp_path / "data", ScriptedModel.from_mapping({})) as host:
            session = await host.create_session("lead")
            lead = host.start_agent(session, name="lead")
            team = host.service(TeamServiceAPI)
            for index in range(MAX_TASKS + 2):
                await team.create_task(lead, subject=f"task number {index} " + "s" * SUBJECT_MAX, description="d")
            await team.update_task(lead, task_id="task-2", expected_revision=1, action="reassign", owner="lead")
            await team.update_task(lead, task_id="task-2", expected_revision=2, action="set_dependencies",
                                   blocked_by=["task-1"])
            for task in team.list_tasks(lead):
                if task.id != "task-2":
                    await team.update_task(lead, task_id=task.id, expected_revision=task.revision, action="claim")
            await team.update_task(lead, task_id="task-10", expected_revision=2, action="complete")
            text = team_brief(team.journals.get(session).state, lead.id, "lead", [])  # type: ignore[attr-defined]
            lines = text.splitlines()
            assert lines[1] == "Teammates: none."
            rows = lines[2].removeprefix("Your tasks: ").split("; ")
            assert len(rows) == MAX_TASKS + 1 and rows[-1].startswith("1 more (team_task_list) (1 completed)")
            assert rows[0].startswith('task-1 "task number 0 ') and '..." in_progress' in rows[0]
            assert rows[1].endswith('..." in_progress, blocked by task-1 (revision 3)')
            assert all(len(r.split('"')[1]) == SUBJECT_MAX for r in rows[:-1])
            assert len(text.encode()) < 1200

    async def test_no_brief_for_a_non_member_mode_off_or_a_failed_stream(self, tmp_path: Path) -> None:
        """The hook answers nothing where a brief could not be true."""
        async with open_team(tmp_path / "data", ScriptedModel.from_mapping({})) as host:
            team = host.service(TeamServiceAPI)
            session = await host.create_session("lead")
            lead = host.start_agent(session, name="lead")
            assert team.context_brief(lead) is not None  # type: ignore[attr-defined]
            await team.set_enabled(lead, False)
            assert team.context_brief(lead) is None  # type: ignore[attr-defined]
            await team.set_enabled(lead, True)
            other = host.start_agent(await host.create_session("other"), name="lead")
            await host.dispose_agent(other)
            assert team.context_brief(other) is None  # type: ignore[attr-defined]  # a stale agent is no member

    async def test_no_brief_from_a_failed_stream(self, tmp_path: Path) -> None:
        """A Lead log whose Team stream failed to fold yields no brief (without the veto that prevents it)."""
        host = await Host.open(tmp_path / "data", None, ScriptedModel.from_mapping({}))
        try:
            host.plugins.load("dsh-team", {})
            team = host.service(TeamServiceAPI)
            session = await host.create_session("lead")
            lead = host.start_agent(session, name="lead")
            session.append("team/task", {"version": 1, "team_id": "lead", "task": {"bad": True}})
            assert team.context_brief(lead) is None  # type: ignore[attr-defined]
        finally:
            await host.close()
