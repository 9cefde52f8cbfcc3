"""The nine tools against the real Team service on the reference host (ports §12.6).

A gated scripted model keeps chosen teammates busy on demand; everything else is
the real host, the real JSONL store and the real Team service.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kit_waits import until
from team_tools_host import GatedModel, agent_named, call, member_events, open_team, start_root, team_tools

from dsh_team.api import TeamServiceAPI
from dsh_team_tools.catalog import TOOL_NAMES
from dsh_team_tools.policy import POLICY_TEXT
from dsh_team_tools.reminder import identity_reminder
from dsh_team_tools.tools import QUIESCENT_MESSAGE
from host_spec.records import AbortSignal, CancelCause

FIRST = {"name": "reviewer", "description": "Reviews code", "prompt": "Review src"}


async def spawn(host: Any, lead: Any, **overrides: Any) -> dict[str, Any]:
    member, error = await call(host, lead, "spawn_teammate", {**FIRST, **overrides})
    assert error is None, error
    return member["member"]


async def settle(host: Any) -> None:
    await host.quiesce()


class TestRoster:
    async def test_rows_by_status(self, tmp_path: Path) -> None:
        """Spawn and list show target rows (no id or name) for running, inactive and failed members."""
        model = GatedModel({"busy": [{"text": "done"}]}, gated=["busy"])
        async with open_team(tmp_path, model) as host:
            lead = await start_root(host)
            row = await spawn(host, lead)
            assert set(row) == {"target", "role", "status", "description", "provider", "context", "diagnostics"}
            assert (row["target"], row["role"], row["context"], row["provider"]) == (
                "reviewer", "teammate", "fresh", "spawn")
            await settle(host)
            await spawn(host, lead, name="busy", description="Stays busy")
            await model.entered["busy"].wait()
            rows = (await call(host, lead, "list_agents"))[0]["members"]
            assert [(r["target"], r["role"], r["status"]) for r in rows] == [
                ("lead", "lead", "inactive"), ("reviewer", "teammate", "inactive"),
                ("busy", "teammate", "running")]
            assert all("id" not in r and "name" not in r for r in rows)
            model.gates["busy"].set()
            await settle(host)

    async def test_failed_member_with_configured_provider(self, tmp_path: Path) -> None:
        """Configured provider names are used; a provider that does not exist leaves a failed member."""
        config = {"fresh_provider": "team-fresh", "fork_provider": "team-fork"}
        async with open_team(tmp_path, GatedModel({}), tools_config=config) as host:
            lead = await start_root(host)
            _, error = await call(host, lead, "spawn_teammate", FIRST)
            assert error is not None and error["code"] == "NO_PROVIDER" and "team-fresh" in error["message"]
            rows = (await call(host, lead, "list_agents"))[0]["members"]
            failed = rows[1]
            assert (failed["target"], failed["status"], failed["provider"]) == ("reviewer", "failed", "team-fresh")
            assert failed["diagnostics"] and failed["diagnostics"][0]

    async def test_configured_provider_spawns(self, tmp_path: Path) -> None:
        """A teammate is created through the configured fresh provider when it exists."""
        from host_spec.host.children.providers import SpawnProvider
        async with open_team(tmp_path, GatedModel({}), tools_config={"fresh_provider": "team-fresh"}) as host:
            host.continuations.register_provider(SpawnProvider(name="team-fresh"))
            lead = await start_root(host)
            assert (await spawn(host, lead))["provider"] == "team-fresh"
            await settle(host)

    @pytest.mark.parametrize("busy", [True, False])
    async def test_interrupt_reports_previous_status(self, tmp_path: Path, busy: bool) -> None:
        """interrupt_agent returns running for a busy teammate and inactive for an idle one."""
        model = GatedModel({"reviewer": [{"text": "done"}]}, gated=["reviewer"] if busy else [])
        async with open_team(tmp_path, model) as host:
            lead = await start_root(host)
            await spawn(host, lead)
            if busy:
                await model.entered["reviewer"].wait()
            else:
                await settle(host)
            result, _ = await call(host, lead, "interrupt_agent", {"target": "reviewer"})
            assert result == {"previous_status": "running" if busy else "inactive"}
            await settle(host)
            rows = (await call(host, lead, "list_agents"))[0]["members"]
            assert rows[1]["status"] == "inactive"

    async def test_targets_drive_messages_interrupts_and_owners(self, tmp_path: Path) -> None:
        """The returned targets address send_message, interrupt_agent and task owners."""
        model = GatedModel({"reviewer": [{"text": "ready"}, {"when": "please look", "text": "looked"}]})
        async with open_team(tmp_path, model) as host:
            lead = await start_root(host)
            row = await spawn(host, lead)
            await settle(host)
            rows = (await call(host, lead, "list_agents"))[0]["members"]
            assert [r["target"] for r in rows] == ["lead", row["target"]]
            task, _ = await call(host, lead, "team_task_create", {"subject": "Review", "description": "Review it"})
            moved, _ = await call(host, lead, "team_task_update", {
                "task_id": task["id"], "expected_revision": 1, "action": "reassign", "owner": row["target"]})
            assert (moved["owner_name"], moved["status"]) == ("reviewer", "in_progress")
            owned, _ = await call(host, lead, "team_task_list", {"owner": row["target"]})
            assert [t["id"] for t in owned["tasks"]] == [task["id"]]
            sent, _ = await call(host, lead, "send_message", {"target": row["target"], "message": "please look"})
            assert sent["status"] in ("accepted", "queued") and sent["message_id"].startswith("team-message-")
            _, error = await call(host, lead, "interrupt_agent", {"target": "nobody"})
            assert error["code"] == "TEAM_MEMBER_NOT_FOUND"
            await settle(host)
            events = await member_events(host, lead, "reviewer")
            assert any("please look" in str(e.value()) for e in events if e.type == "user/message")


class TestTeammateView:
    async def test_same_tools_and_policy_for_lead_and_teammate(self, tmp_path: Path) -> None:
        """Lead and teammate see the nine tools and the same system prompt; nested spawn is refused."""
        script = {"lead": [{"tool_calls": [{"name": "spawn_teammate", "arguments": FIRST}]}, {"text": "ok"}],
                  "reviewer": [{"tool_calls": [{"name": "spawn_teammate", "arguments": {
                      "name": "nested", "description": "x", "prompt": "y"}}]}, {"text": "done"}]}
        model = GatedModel(script)
        async with open_team(tmp_path, model) as host:
            lead = await host.run("Use an agent team")
            assert team_tools(host, lead) == list(TOOL_NAMES)
            lead_request = next(r for r in model.requests if r.agent_name == "lead")
            mate_request = next(r for r in model.requests if r.agent_name == "reviewer")
            assert lead_request.system == mate_request.system
            assert POLICY_TEXT in mate_request.system and "Your Team role" not in mate_request.system
            assert [n for n in lead_request.tools if n in TOOL_NAMES] == [
                n for n in mate_request.tools if n in TOOL_NAMES]
            assert set(TOOL_NAMES) <= set(mate_request.tools)
            first = mate_request.messages[-1]["content"]
            assert first == [{"type": "text", "text": identity_reminder("reviewer")},
                             {"type": "text", "text": "Review src"}]
            refused = [e.value() for e in await member_events(host, lead, "reviewer") if e.type == "tool/result"]
            assert refused[0]["error"]["code"] == "TEAM_LEAD_REQUIRED"
            assert "only the Team Lead" in refused[0]["error"]["message"]

    @pytest.mark.parametrize("context", ["fresh", "fork"])
    async def test_identity_prefix_by_context(self, tmp_path: Path, context: str) -> None:
        """A fresh teammate starts with [reminder, prompt] only; a fork keeps the Lead's prefix before them."""
        model = GatedModel({"lead": [{"text": "earlier answer"}]})
        async with open_team(tmp_path, model) as host:
            lead = await host.run("earlier question")
            await spawn(host, lead, context=context)
            await settle(host)
            request = next(r for r in model.requests if r.agent_name == "reviewer")
            texts = [block.get("text") for message in request.messages for block in message["content"]]
            assert texts[-2:] == [identity_reminder("reviewer"), "Review src"]
            inherited = texts[:-2]
            assert inherited == (["earlier question", "earlier answer"] if context == "fork" else [])
            lead_request = next(r for r in model.requests if r.agent_name == "lead")
            assert request.system == lead_request.system

    async def test_cold_resumed_teammate_has_its_tools(self, tmp_path: Path) -> None:
        """After a restart, a cold-resumed teammate has the nine tools before its first new request."""

        async with open_team(tmp_path, GatedModel({"reviewer": [{"text": "idle now"}]})) as host:
            lead = await start_root(host)
            await spawn(host, lead)
            await settle(host)
        model = GatedModel({"reviewer": [{"when": "wake up", "text": "awake"}]})
        async with open_team(tmp_path, model) as host:  # a new process: the teammate is cold on disk
            session = await host.resume_session(lead.id)
            lead = host.start_agent(session, name="lead", source="resume")
            sent, error = await call(host, lead, "send_message", {"target": "reviewer", "message": "wake up"})
            assert error is None, error
            await settle(host)
            request = next(r for r in model.requests if r.agent_name == "reviewer")
            assert set(TOOL_NAMES) <= set(request.tools)
            reminder = {"type": "text", "text": identity_reminder("reviewer")}
            firsts = [m for m in request.messages if reminder in m["content"]]
            assert len(firsts) == 1
            assert "wake up" in str(request.messages[-2]["content"])  # the newest turn, then the Team brief
            assert request.messages[-1]["source"] == {"kind": "context-brief"}


class TestWaiting:
    async def test_quiescent_when_alone(self, tmp_path: Path) -> None:
        """A Lead alone gets one quiescence record and ``reason: quiescent``; waiting again reuses it."""
        async with open_team(tmp_path, GatedModel({})) as host:
            lead = await start_root(host)
            result, _ = await call(host, lead, "wait_agent")
            quiet = [e.seq for e in lead.session.events if e.type == "team/quiescent"]
            assert result == {"timed_out": False, "position": quiet[-1], "changes": {"since": 0}, "reason": "quiescent",
                              "stalled": {"in_progress": [], "ready": [], "failed": []},
                              "message": QUIESCENT_MESSAGE}
            again, _ = await call(host, lead, "wait_agent")
            assert {**again, "changes": None} == {**result, "changes": None}  # no change: the same answer at once
            assert [e.seq for e in lead.session.events if e.type == "team/quiescent"] == quiet

    @pytest.mark.parametrize("timeout", [9_999, 3_600_001, 2**53])
    async def test_invalid_timeouts(self, tmp_path: Path, timeout: int) -> None:
        """Out-of-range timeouts surface the service's TEAM_INVALID_TIMEOUT."""
        async with open_team(tmp_path, GatedModel({})) as host:
            lead = await start_root(host)
            _, error = await call(host, lead, "wait_agent", {"timeout_ms": timeout})
            assert error["code"] == "TEAM_INVALID_TIMEOUT"
            assert "10000" in error["message"] and "3600000" in error["message"]

    async def test_abort_is_a_structured_error(self, tmp_path: Path) -> None:
        """Cancelling a wait renders "wait_agent aborted: <reason>" as an error result."""
        model = GatedModel({"reviewer": [{"text": "done"}]}, gated=["reviewer"])
        async with open_team(tmp_path, model) as host:
            lead = await start_root(host)
            await spawn(host, lead)
            await model.entered["reviewer"].wait()
            signal = AbortSignal()
            asyncio.get_running_loop().call_later(0.01, signal.abort, CancelCause("user"))
            _, error = await call(host, lead, "wait_agent", {"timeout_ms": 10_000}, signal=signal)
            assert error["code"] == "TEAM_WAIT_ABORTED"
            assert error["message"].startswith("wait_agent aborted: ")
            model.gates["reviewer"].set()
            await settle(host)

    async def test_default_wait_wakes_on_task_creation(self, tmp_path: Path) -> None:
        """With a busy teammate the default wait blocks and wakes on the next Team change."""
        model = GatedModel({"reviewer": [{"text": "done"}]}, gated=["reviewer"])
        async with open_team(tmp_path, model) as host:
            lead = await start_root(host)
            await spawn(host, lead)
            await model.entered["reviewer"].wait()
            waiting = asyncio.ensure_future(call(host, lead, "wait_agent"))
            activity = host.service(TeamServiceAPI).activity  # type: ignore[attr-defined]
            await until(lambda: activity.waiting(lead.id) == 1, what="the wait_agent call to park")
            assert not waiting.done()
            await call(host, lead, "team_task_create", {"subject": "s", "description": "d"})
            result, _ = await waiting
            assert result["timed_out"] is False and result["position"] > 0 and "reason" not in result
            model.gates["reviewer"].set()
            await settle(host)


    async def test_since_returns_at_once_for_a_change_between_two_waits(self, tmp_path: Path) -> None:
        """A change after the last wait's position ends a ``since`` wait at once; a bad since is typed."""
        model = GatedModel({"reviewer": [{"text": "done"}]}, gated=["reviewer"])
        async with open_team(tmp_path, model) as host:
            lead = await start_root(host)
            await spawn(host, lead)
            await model.entered["reviewer"].wait()
            waiting = asyncio.ensure_future(call(host, lead, "wait_agent"))
            await asyncio.sleep(0)
            await call(host, lead, "team_task_create", {"subject": "s", "description": "d"})
            first, _ = await waiting
            await call(host, lead, "team_task_create", {"subject": "t", "description": "d"})  # between the waits
            second, error = await call(host, lead, "wait_agent", {"since": first["position"]})
            assert error is None and second["timed_out"] is False and second["position"] > first["position"]
            _, bad = await call(host, lead, "wait_agent", {"since": -1})
            assert bad["code"] == "TEAM_INVALID_ARGUMENT" and "since" in bad["message"]
            model.gates["reviewer"].set()
            await settle(host)

    async def test_every_read_names_its_position_and_a_cursor_wait_returns_the_changes(self, tmp_path: Path) -> None:
        """list_agents, task results and send_message carry positions; wait_agent(since) lists what changed after one."""
        model = GatedModel({"reviewer": [{"text": "done"}]}, gated=["reviewer"])
        async with open_team(tmp_path, model) as host:
            lead = await start_root(host)
            await spawn(host, lead)
            await model.entered["reviewer"].wait()
            listed, _ = await call(host, lead, "list_agents")
            created, _ = await call(host, lead, "team_task_create", {"subject": "s", "description": "d"})
            assert created["position"] > listed["position"]
            board, _ = await call(host, lead, "team_task_list")
            got, _ = await call(host, lead, "team_task_get", {"task_id": "task-1"})
            assert board["position"] == got["position"] == created["position"]
            assert "position" not in board["tasks"][0]  # a listed row: the list carries it
            sent, _ = await call(host, lead, "send_message", {"target": "reviewer", "message": "look"})
            assert sent["position"] > created["position"]
            result, _ = await call(host, lead, "wait_agent", {"since": listed["position"]})
            changes = result["changes"]
            assert changes["since"] == listed["position"]
            assert changes["tasks"] == [{"id": "task-1", "status": "pending", "revision": 1}]
            assert changes["sent"] == [{"message_id": sent["message_id"], "sender": "lead", "target": "reviewer",
                                        "status": "delivered"}]
            assert changes["mail"] == [{"target": "reviewer", "queued": 0, "unread": 1, "read": 0}]
            model.gates["reviewer"].set()
            await settle(host)


class TestTaskBoard:
    async def test_filters_pages_and_mutations(self, tmp_path: Path) -> None:
        """Filters, paging, edit, set_dependencies and a blocked reassign behave as documented."""
        async with open_team(tmp_path, GatedModel({})) as host:
            lead = await start_root(host)
            for n in range(1, 4):
                await call(host, lead, "team_task_create", {"subject": f"s{n}", "description": f"d{n}"})
            await call(host, lead, "team_task_update", {"task_id": "task-1", "expected_revision": 1,
                                                        "action": "claim"})
            mine, _ = await call(host, lead, "team_task_list", {"status": "in_progress", "owner": "lead"})
            assert [t["id"] for t in mine["tasks"]] == ["task-1"]
            free, _ = await call(host, lead, "team_task_list", {"owner": "unowned", "ready": True})
            assert [t["id"] for t in free["tasks"]] == ["task-2", "task-3"]
            page, _ = await call(host, lead, "team_task_list", {"limit": 2})
            assert ([t["id"] for t in page["tasks"]], page["next_cursor"]) == (["task-1", "task-2"], 2)
            rest, _ = await call(host, lead, "team_task_list", {"cursor": 2, "limit": 2})
            assert [t["id"] for t in rest["tasks"]] == ["task-3"] and "next_cursor" not in rest
            for args, message in (({"cursor": -1}, "cursor must be a non-negative safe integer"),
                                  ({"limit": 101}, "limit must be an integer from 1 through 100")):
                _, error = await call(host, lead, "team_task_list", args)
                assert error == {"code": "INVALID_ARGS", "message": message}
            edited, _ = await call(host, lead, "team_task_update", {
                "task_id": "task-2", "expected_revision": 1, "action": "edit", "subject": "new",
                "write_scopes": ["src/a"]})
            assert (edited["subject"], edited["write_scopes"], edited["revision"]) == ("new", ["src/a"], 2)
            blocked, _ = await call(host, lead, "team_task_update", {
                "task_id": "task-3", "expected_revision": 1, "action": "set_dependencies",
                "blocked_by": ["task-1"]})
            assert (blocked["blocked_by"], blocked["ready"]) == (["task-1"], False)
            _, error = await call(host, lead, "team_task_update", {
                "task_id": "task-3", "expected_revision": 2, "action": "reassign", "owner": "lead"})
            assert error["code"] == "TEAM_TASK_BLOCKED"
            gone, _ = await call(host, lead, "team_task_update", {
                "task_id": "task-2", "expected_revision": 2, "action": "delete"})
            assert gone["status"] == "deleted"
            tomb, _ = await call(host, lead, "team_task_get", {"task_id": "task-2"})
            assert tomb["status"] == "deleted"
            listed, _ = await call(host, lead, "team_task_list")
            assert [t["id"] for t in listed["tasks"]] == ["task-1", "task-3"]


class TestHotReload:
    async def test_reload_keeps_a_running_teammate(self, tmp_path: Path) -> None:
        """Reloading the tools while a teammate runs keeps it running and its tools work afterwards."""
        from team_tools_host import restored_modules
        script = {"reviewer": [{"tool_calls": [{"name": "team_task_list", "arguments": {}}]}, {"text": "done"}]}
        model = GatedModel(script, gated=["reviewer"])
        async with open_team(tmp_path, model) as host:
            lead = await start_root(host)
            await spawn(host, lead)
            await model.entered["reviewer"].wait()
            reviewer = agent_named(host, "reviewer")
            with restored_modules("dsh_team_tools"):
                await host.plugins.reload("dsh-team-tools")
            assert reviewer.status == "running" and host.agents.get(reviewer.id) is reviewer
            names = [spec.name for spec in host.tools.visible(reviewer)]
            assert len(names) == len(set(names)) and team_tools(host, reviewer) == list(TOOL_NAMES)
            model.gates["reviewer"].set()
            await settle(host)
            results = [e.value() for e in await member_events(host, lead, "reviewer") if e.type == "tool/result"]
            assert results[0]["name"] == "team_task_list" and not results[0].get("is_error")
