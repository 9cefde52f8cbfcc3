"""The nine tool adapters map model calls to the Team service and views to model rows.

These are mapping unit tests against a FAKE service; behaviour with the real
service is covered by the integration tests.
"""

from __future__ import annotations

from types import SimpleNamespace

import msgspec
import pytest
from msgspec import UNSET
from team_tools_fakes import FakeService, StubAgent, member, task, tool_call

from dsh_team import MemberCost, Spend, StalledTask, TeamStalled
from dsh_team_tools import schemas as s
from dsh_team_tools.catalog import CATALOG, TOOL_NAMES
from dsh_team_tools.config import ToolsConfig
from dsh_team_tools.reminder import identity_reminder
from dsh_team_tools.tools import QUIESCENT_MESSAGE, build_tools, member_row, task_row
from host_spec.errors import DshError, ToolError
from host_spec.records import AbortSignal
from host_spec.schema import compact_json


def tools(service: FakeService, config: ToolsConfig | None = None) -> dict[str, object]:
    return {spec.name: spec for spec in build_tools(lambda: service, config or ToolsConfig())}


async def call(
    service: FakeService, agent: object, name: str, args: object, config: ToolsConfig | None = None,
    *, signal: AbortSignal | None = None,
) -> object:
    spec = tools(service, config)[name]
    return await spec.execute(args, tool_call(name, agent, signal))


class TestBuildTools:
    def test_nine_specs_in_catalogue_order(self, service: FakeService) -> None:
        """build_tools returns the nine catalogue tools with their declared types."""
        specs = build_tools(lambda: service, ToolsConfig())
        assert [spec.name for spec in specs] == list(TOOL_NAMES)
        assert len(specs) == 9
        for spec, entry in zip(specs, CATALOG, strict=True):
            assert (spec.description, spec.args_type, spec.result_type) == (
                entry.description,
                entry.args_type,
                entry.result_type,
            )
            assert spec.available is None

    def test_availability_predicate_is_shared(self, service: FakeService) -> None:
        """An availability predicate given to build_tools is set on every tool."""

        def predicate(agent: object) -> bool:
            return False

        assert {spec.available for spec in build_tools(lambda: service, ToolsConfig(), available=predicate)} == {predicate}

    def test_read_only_tools_are_concurrency_safe(self, service: FakeService) -> None:
        """Only the pure reads may run in parallel with other calls of a step."""
        safe = {spec.name for spec in build_tools(lambda: service, ToolsConfig()) if spec.concurrency_safe}
        assert safe == {"list_agents", "team_task_list", "team_task_get"}

    async def test_missing_caller_is_an_unknown_tool(self, service: FakeService) -> None:
        """A call without a calling agent fails as "unknown tool" and reaches no service method."""
        with pytest.raises(ToolError) as info:
            await call(service, None, "list_agents", s.ListAgentsArgs())
        assert info.value.code == "UNKNOWN_TOOL"
        assert str(info.value) == 'unknown tool "list_agents"'
        assert service.calls == []


class TestRows:
    def test_member_row_exposes_target_not_id(self) -> None:
        """A member row names the member by target and carries no session id."""
        row = member_row(member("reviewer", status="provisioning", description="d", provider="spawn",
                                context="fresh", model="m"))
        encoded = msgspec.json.decode(compact_json(row))
        assert encoded == {"target": "reviewer", "role": "teammate", "status": "provisioning", "description": "d",
                           "provider": "spawn", "context": "fresh", "model": "m", "diagnostics": []}

    def test_member_row_omits_absent_fields(self) -> None:
        """Optional view fields that are None (or missing) are absent from the row."""
        view = member("lead", role="lead", status="running", model=None)
        assert compact_json(member_row(view)) == '{"target":"lead","role":"lead","status":"running","diagnostics":[]}'

    def test_member_row_shows_undelivered_mail_only_when_there_is_some(self) -> None:
        """``pending`` tells a sender its message is still queued; zero is omitted (no surface cost)."""
        assert msgspec.json.decode(compact_json(member_row(member("w", pending=2))))["pending"] == 2
        assert "pending" not in msgspec.json.decode(compact_json(member_row(member("w", pending=0))))

    def test_task_row_drops_owner_id(self) -> None:
        """A task row shows the owner by name and never the owner's session id."""
        row = task_row(task("task-2", owner_id="sess-9", owner_name="reviewer", status="in_progress", ready=False,
                            blocked_by=["task-1"], write_scopes=["src"], write_scope_warnings=["w"]))
        encoded = msgspec.json.decode(compact_json(row))
        assert "owner_id" not in encoded
        assert encoded["owner_name"] == "reviewer"
        assert list(encoded) == ["id", "revision", "subject", "description", "status", "owner_name", "blocked_by",
                                 "write_scopes", "ready", "write_scope_warnings"]

    def test_unowned_task_row_has_no_owner_name(self) -> None:
        """An unowned task omits owner_name."""
        assert task_row(task("task-1")).owner_name is UNSET


class TestSpawnTeammate:
    async def test_fresh_spawn_prefixes_the_identity_reminder(self, service: FakeService, lead: StubAgent) -> None:
        """A fresh spawn sends [reminder, prompt] blocks through the fresh provider."""
        signal = AbortSignal()
        result = await call(service, lead, "spawn_teammate",
                            s.SpawnTeammateArgs(name="reviewer", description="Reviews", prompt="Review src"), signal=signal)
        (name, caller, kwargs), = service.calls
        assert (name, caller) == ("spawn_teammate", lead)
        assert kwargs["prompt"] == [{"type": "text", "text": identity_reminder("reviewer")},
                                    {"type": "text", "text": "Review src"}]
        assert (kwargs["context"], kwargs["provider"]) == ("fresh", "spawn")
        assert (kwargs["name"], kwargs["description"]) == ("reviewer", "Reviews")
        assert kwargs["signal"] is signal  # the call's own signal, so aborting the call aborts the spawn
        assert isinstance(result, s.SpawnTeammateResult)
        assert result.member.target == "reviewer"

    async def test_plan_approval_is_forwarded_only_when_sent(self, service: FakeService, lead: StubAgent) -> None:
        await call(service, lead, "spawn_teammate",
                   s.SpawnTeammateArgs(name="a", description="d", prompt="p", plan_approval=True))
        await call(service, lead, "spawn_teammate", s.SpawnTeammateArgs(name="b", description="d", prompt="p"))
        assert service.calls[0][2]["plan_approval"] is True and "plan_approval" not in service.calls[1][2]

    async def test_fork_uses_the_fork_provider(self, service: FakeService, lead: StubAgent) -> None:
        """context fork selects the configured fork provider."""
        config = ToolsConfig(fresh_provider="team-fresh", fork_provider="team-fork")
        await call(service, lead, "spawn_teammate",
             s.SpawnTeammateArgs(name="a", description="d", prompt="p", context="fork"), config)
        await call(service, lead, "spawn_teammate", s.SpawnTeammateArgs(name="b", description="d", prompt="p"), config)
        assert [c[2]["provider"] for c in service.calls] == ["team-fork", "team-fresh"]


class TestMessagingAndRoster:
    async def test_send_message_is_one_text_block(self, service: FakeService, lead: StubAgent) -> None:
        """send_message sends one text block to the named target, under the call's signal, and returns id and status."""
        signal = AbortSignal()
        result = await call(service, lead, "send_message", s.SendMessageArgs(target="reviewer", message="hi"), signal=signal)
        (_, _, kwargs), = service.calls
        assert kwargs["target"] == "reviewer" and kwargs["signal"] is signal
        assert kwargs["content"] == [{"type": "text", "text": "hi"}]
        assert compact_json(result) == '{"message_id":"team-message-1","status":"accepted"}'

    async def test_send_message_with_a_plan_is_a_plan_step(self, service: FakeService, lead: StubAgent) -> None:
        """plan=submit/approve/reject goes to plan_step with the message as its text; the notice's send result comes back."""
        signal = AbortSignal()
        result = await call(service, lead, "send_message",
                            s.SendMessageArgs(target="builder", message="ok", plan="approve"), signal=signal)
        assert service.calls == [("plan_step", lead, {"plan": "approve", "target": "builder", "text": "ok",
                                                      "signal": signal})]
        assert compact_json(result) == '{"message_id":"team-message-2","status":"queued","position":7}'

    async def test_list_agents_maps_every_row(self, service: FakeService, lead: StubAgent) -> None:
        """list_agents returns the roster rows in service order, Lead first."""
        service.members.append(member("reviewer", status="failed", diagnostics=["boom"]))
        result = await call(service, lead, "list_agents", s.ListAgentsArgs())
        assert [(row.target, row.status, row.diagnostics) for row in result.members] == [
            ("lead", "running", []), ("reviewer", "failed", ["boom"])]
        assert result.position == 7  # the service's position, read in the same synchronous span

    async def test_list_agents_shows_spend_and_a_refusing_budget(self, service: FakeService, lead: StubAgent) -> None:
        """A member's tokens (input + output) and ``over_budget`` appear only when there is something to say."""
        service.members.append(member("reviewer", id="r-1", status="inactive"))
        service.members.append(member("idle", id="i-1", status="inactive"))
        service.costs = {
            "lead-session": MemberCost(Spend(2, 100, 7), exceeded=False),
            "r-1": MemberCost(Spend(1, 40, 2), exceeded=True),
            "i-1": MemberCost(),
        }
        rows = (await call(service, lead, "list_agents", s.ListAgentsArgs())).members
        shown = [msgspec.json.decode(compact_json(row)) for row in rows]
        assert [(row.get("tokens"), row.get("over_budget")) for row in shown] == [(107, None), (42, True), (None, None)]

    async def test_interrupt_agent(self, service: FakeService, lead: StubAgent) -> None:
        """interrupt_agent forwards the target and returns the previous status."""
        result = await call(service, lead, "interrupt_agent", s.InterruptAgentArgs(target="reviewer"))
        assert service.calls == [("interrupt", lead, {"target": "reviewer"})]
        assert compact_json(result) == '{"previous_status":"running"}'


class TestWaitAgent:
    async def test_the_wait_always_goes_to_the_service(self, service: FakeService, lead: StubAgent) -> None:
        """No roster shortcut in the adapter: quiescence is the service's to decide, so even a lone Lead waits there."""
        service.members.append(member("reviewer", status="inactive"))
        signal = AbortSignal()
        result = await call(service, lead, "wait_agent", s.WaitAgentArgs(), signal=signal)
        name, caller, kwargs = service.calls[-1]
        assert [c[0] for c in service.calls] == ["wait_for_change"]
        assert (name, caller, kwargs["timeout_ms"]) == ("wait_for_change", lead, 30_000)
        assert kwargs["signal"] is signal  # an interrupt of the call ends the wait
        assert compact_json(result) == '{"timed_out":false,"position":7}'

    async def test_quiescent_names_the_stalled_work(self, service: FakeService, lead: StubAgent) -> None:
        """A quiescent answer carries the stalled work with member names (ids only when off the roster)."""
        service.members.append(member("reviewer", status="inactive"))
        service.members.append(member("broken", status="failed"))
        stalled = TeamStalled(
            in_progress=(StalledTask("task-1", "sess-reviewer"), StalledTask("task-2", "gone")),
            ready=("task-3",),
            failed=("sess-broken",),
        )
        service.wait_result = SimpleNamespace(timed_out=False, position=9, reason="quiescent", stalled=stalled)
        result = await call(service, lead, "wait_agent", s.WaitAgentArgs())
        assert msgspec.json.decode(compact_json(result)) == {
            "timed_out": False,
            "position": 9,
            "reason": "quiescent",
            "stalled": {
                "in_progress": [{"task": "task-1", "owner": "reviewer"}, {"task": "task-2", "owner": "gone"}],
                "ready": ["task-3"],
                "failed": ["broken"],
            },
            "message": QUIESCENT_MESSAGE,
        }

    async def test_timed_out_without_position(self, service: FakeService, lead: StubAgent) -> None:
        """A service result without a position renders timed_out alone."""
        service.wait_result = type("R", (), {"timed_out": True})()
        assert compact_json((await call(service, lead, "wait_agent", s.WaitAgentArgs(timeout_ms=10_000)))) == (
            '{"timed_out":true}')

    @pytest.mark.parametrize("timeout", [9_999, 3_600_001, 2**53])
    async def test_out_of_range_timeout_reaches_the_service(self, service: FakeService, lead: StubAgent,
                                                      timeout: int) -> None:
        """An out-of-range timeout is reported by the service's TEAM_INVALID_TIMEOUT."""
        with pytest.raises(DshError) as info:
            await call(service, lead, "wait_agent", s.WaitAgentArgs(timeout_ms=timeout))
        assert info.value.code == "TEAM_INVALID_TIMEOUT"
        assert [c[0] for c in service.calls] == ["wait_for_change"]


class TestTaskTools:
    async def test_create_forwards_only_sent_lists(self, service: FakeService, lead: StubAgent) -> None:
        """Omitted blocked_by/write_scopes are not sent; given ones are."""
        await call(service, lead, "team_task_create", s.TeamTaskCreateArgs(subject="s", description="d"))
        await call(service, lead, "team_task_create",
             s.TeamTaskCreateArgs(subject="s", description="d", blocked_by=["task-1"], write_scopes=[]))
        assert service.calls[0][2] == {"subject": "s", "description": "d"}
        assert service.calls[1][2] == {"subject": "s", "description": "d", "blocked_by": ["task-1"],
                                       "write_scopes": []}

    async def test_get_includes_tombstones(self, service: FakeService, lead: StubAgent) -> None:
        """team_task_get returns whatever the service returns, deleted tasks included."""
        row = await call(service, lead, "team_task_get", s.TeamTaskGetArgs(task_id="task-3"))
        assert (row.id, row.status) == ("task-3", "deleted")
        assert service.calls == [("get_task", lead, {"task_id": "task-3"})]

    async def test_update_forwards_only_sent_fields(self, service: FakeService, lead: StubAgent) -> None:
        """Only the fields the model sent reach update_task; an omitted owner means unassign."""
        row = await call(service, lead, "team_task_update",
                   s.TeamTaskUpdateArgs(task_id="task-1", expected_revision=2, action="reassign"))
        sent = service.calls[0][2]
        assert isinstance(sent.pop("signal"), AbortSignal)  # the call's own signal: an interrupt stops its checks
        assert sent == {"task_id": "task-1", "expected_revision": 2, "action": "reassign"}
        assert row.revision == 3
        await call(service, lead, "team_task_update",
             s.TeamTaskUpdateArgs(task_id="task-1", expected_revision=3, action="edit", subject="x",
                                  description="y", blocked_by=["task-2"], write_scopes=["src"], owner="reviewer"))
        assert service.calls[1][2].pop("signal") is not None
        assert service.calls[1][2] == {"task_id": "task-1", "expected_revision": 3, "action": "edit", "subject": "x",
                                       "description": "y", "blocked_by": ["task-2"], "write_scopes": ["src"],
                                       "owner": "reviewer"}


class TestTaskList:
    @pytest.fixture
    def board(self, service: FakeService) -> FakeService:
        service.tasks = [
            task("task-1", status="completed", owner_name="lead", ready=False),
            task("task-2", status="in_progress", owner_name="reviewer", ready=False),
            task("task-3", status="pending", ready=True),
            task("task-4", status="pending", ready=False, blocked_by=["task-2"]),
        ]
        return service

    async def listing(self, service: FakeService, lead: StubAgent, **kwargs: object) -> s.TaskListResult:
        return await call(service, lead, "team_task_list", s.TeamTaskListArgs(**kwargs))

    async def test_default_lists_everything(self, board: FakeService, lead: StubAgent) -> None:
        """No filter lists every task in board order without a next cursor."""
        result = await self.listing(board, lead)
        assert [t.id for t in result.tasks] == ["task-1", "task-2", "task-3", "task-4"]
        assert result.next_cursor is UNSET

    async def test_filters(self, board: FakeService, lead: StubAgent) -> None:
        """status, owner (exact name or unowned) and ready filter the board."""
        assert [t.id for t in (await self.listing(board, lead, status="pending")).tasks] == ["task-3", "task-4"]
        assert [t.id for t in (await self.listing(board, lead, owner="reviewer")).tasks] == ["task-2"]
        assert [t.id for t in (await self.listing(board, lead, owner="unowned")).tasks] == ["task-3", "task-4"]
        assert [t.id for t in (await self.listing(board, lead, owner="Reviewer")).tasks] == []
        assert [t.id for t in (await self.listing(board, lead, ready=True)).tasks] == ["task-3"]
        assert [t.id for t in (await self.listing(board, lead, ready=False)).tasks] == ["task-1", "task-2", "task-4"]
        assert [t.id for t in (await self.listing(board, lead, status="pending", owner="unowned", ready=False)).tasks] == [
            "task-4"]

    async def test_paging(self, board: FakeService, lead: StubAgent) -> None:
        """next_cursor is cursor+limit only while more rows remain."""
        first = await self.listing(board, lead, limit=3)
        assert ([t.id for t in first.tasks], first.next_cursor) == (["task-1", "task-2", "task-3"], 3)
        second = await self.listing(board, lead, cursor=3, limit=3)
        assert ([t.id for t in second.tasks], second.next_cursor) == (["task-4"], UNSET)
        exact = await self.listing(board, lead, cursor=2, limit=2)
        assert exact.next_cursor is UNSET
        assert (await self.listing(board, lead, cursor=10)).tasks == []

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"cursor": -1}, "cursor must be a non-negative safe integer"),
            ({"cursor": 2**53}, "cursor must be a non-negative safe integer"),
            ({"limit": 0}, "limit must be an integer from 1 through 100"),
            ({"limit": 101}, "limit must be an integer from 1 through 100"),
        ],
    )
    async def test_bad_window(self, board: FakeService, lead: StubAgent, kwargs: dict[str, int], message: str) -> None:
        """An invalid cursor or limit is a plain INVALID_ARGS error with the exact message."""
        with pytest.raises(ToolError) as info:
            await self.listing(board, lead, **kwargs)
        assert (info.value.code, str(info.value)) == ("INVALID_ARGS", message)
