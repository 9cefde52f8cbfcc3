"""AgentRegistry: creation and veto, identity, disposal, crash repair and cold resume."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from _agent_kit import echo_tool, find, gate_tool, make_kit, memory_session, types
from host_spec.errors import DshError
from host_spec.events import EventType, StepMark, ToolCallRecord, TurnStart
from host_spec.host.agents.agent import AgentDisposedError
from host_spec.host.agents.registry import AgentExistsError
from host_spec.host.agents.repair import NOT_STARTED_TEXT, OUTCOME_UNKNOWN_TEXT, append_closers, fold_tail
from host_spec.messages import AssistantMessage, user_message


class TestCreate:
    def test_created_then_session_start_and_registered(self) -> None:
        """Publication order: created (veto window) then session_start; get() is identity-exact."""
        kit = make_kit()
        agent = kit.registry.create(memory_session("a"), name="lead", model="m1")
        assert kit.hooks.calls == [("created", "a"), ("session_start", "a", "startup")]
        assert kit.registry.get("a") is agent and kit.registry.list() == [agent]
        assert (agent.name, agent.model, agent.status, agent.parent_id, agent.disposed) == ("lead", "m1", "idle", None, False)
        assert repr(agent) == "<Agent a 'lead' idle>"

    def test_veto_rolls_the_creation_back(self) -> None:
        """A raising created hook unregisters the agent and unwinds what it installed."""
        kit = make_kit()
        kit.hooks.veto = True
        session = memory_session("a")
        with pytest.raises(DshError) as info:
            kit.registry.create(session, name="x")
        assert info.value.code == "TEST_VETO"
        assert kit.registry.get("a") is None
        assert ("session_start", "a", "startup") not in kit.hooks.calls
        kit.hooks.veto = False
        agent = kit.registry.create(session, name="x")  # the session can be driven again
        assert kit.registry.get("a") is agent

    def test_veto_disposes_scoped_registrations(self) -> None:
        """Tools a plugin put in the scope before the veto are gone afterwards."""
        kit = make_kit()
        installed: list[Any] = []

        def created(agent: Any) -> None:
            installed.append(kit.tools.register(echo_tool(), scope=agent.scope))
            raise DshError("no", code="VETO")

        kit.hooks.on_created = created
        with pytest.raises(DshError):
            kit.registry.create(memory_session("a"), name="x")
        assert installed[0].disposed and kit.tools.scoped_count() == 0

    def test_one_live_agent_per_session(self) -> None:
        """A second agent for a live session id is refused."""
        kit = make_kit()
        session = memory_session("a")
        kit.registry.create(session, name="x")
        with pytest.raises(AgentExistsError) as info:
            kit.registry.create(session, name="y")
        assert info.value.code == "AGENT_EXISTS"

    def test_roots_are_agents_without_a_parent(self) -> None:
        """A child session's agent is not a root."""
        kit = make_kit()
        root = kit.registry.create(memory_session("r"), name="lead")
        child = kit.registry.create(memory_session("c", parent_session="r"), name="worker")
        assert kit.registry.roots() == [root]
        assert child.parent_id == "r"


class TestDispose:
    async def test_dispose_order_and_identity(self) -> None:
        """cancel -> idle -> scope unwound -> disposed hook -> unregistered; sends then fail."""
        kit = make_kit()
        agent = kit.registry.create(memory_session("a"), name="x")
        agent.scope.on_dispose(lambda: kit.hooks.calls.append(("scope-unwound", agent.id)))
        await agent.dispose()
        await kit.registry.dispose(agent)  # idempotent
        assert kit.hooks.calls[-2:] == [("scope-unwound", "a"), ("disposed", "a")]
        assert kit.registry.get("a") is None and agent.disposed and agent.scope.disposed
        with pytest.raises(AgentDisposedError) as info:
            agent.steer(user_message("late"))
        assert info.value.code == "AGENT_DISPOSED"

    async def test_observer_hook_failures_are_contained(self) -> None:
        """Raising session_start / disposed observers neither block creation nor disposal."""
        kit = make_kit()
        kit.hooks.fail = {"session_start", "disposed"}
        agent = kit.registry.create(memory_session("a"), name="x")
        assert kit.registry.get("a") is agent
        await agent.dispose()
        assert agent.disposed and kit.registry.get("a") is None

    async def test_disposing_a_running_agent_aborts_its_turn_and_keeps_the_inbox(self) -> None:
        """Disposal cancels with cause ``disposed``; pending work stays durable and never latches."""
        gate, started = asyncio.Event(), asyncio.Event()
        kit = make_kit({"x": [{"tool_calls": [{"name": "wait"}]}]})
        kit.tools.register(gate_tool("wait", gate, started=started))
        agent = kit.registry.create(memory_session("a"), name="x")
        agent.followup(user_message("go"))
        await started.wait()
        agent.followup(user_message("pending", id="p"))
        disposal = asyncio.ensure_future(kit.registry.dispose(agent))
        await asyncio.sleep(0)  # disposal starts synchronously inside dispose()
        assert agent.disposing and not agent.disposed
        agent.steer(user_message("during disposal", id="d"))  # recorded, no wake, no latch
        await disposal
        reason = find(agent.session, EventType.TURN_END)[-1]["reason"]
        assert reason == {"kind": "aborted", "reason": {"kind": "disposed"}}
        assert [m.id for m in agent.inbox.pending()] == ["p", "d"]
        assert len(find(agent.session, EventType.TURN_START)) == 1
        assert kit.hooks.statuses("a") == ["running", "idle"]


def _open_turn_log(session: Any) -> None:
    """Simulate a crash mid-step: c1's tool/call was recorded, c2's was not."""
    session.append(EventType.TURN_START, TurnStart(turn=1))
    session.append(EventType.STEP_START, StepMark(turn=1, step=1))
    session.append(EventType.USER_MESSAGE, user_message("go", id="u1"))
    calls = [{"type": "tool-call", "id": c, "name": "echo", "arguments": "{}"} for c in ("c1", "c2")]
    session.append(EventType.ASSISTANT_MESSAGE, AssistantMessage(turn=1, step=1, content=calls))
    session.append(EventType.TOOL_CALL, ToolCallRecord(turn=1, step=1, call_id="c1", name="echo", arguments="{}"))


class TestRepair:
    def test_balanced_log_needs_no_closers(self) -> None:
        """A closed last turn yields its number and nothing to append."""
        session = memory_session()
        session.append(EventType.TURN_START, TurnStart(turn=4))
        session.append(EventType.TURN_END, {"turn": 4, "reason": {"kind": "completed"}})
        session.append("team/member", {"x": 1})
        state = fold_tail(session.events)
        assert (state.last_turn, state.open_turn) == (4, None)
        assert append_closers(session, state, agent_id="a") == 0

    def test_empty_log(self) -> None:
        """No turns yet: turn numbering starts at 1."""
        assert fold_tail(memory_session().events).last_turn == 0

    def test_open_turn_without_step_gets_only_turn_end(self) -> None:
        """A turn that crashed before its first step is closed interrupted."""
        session = memory_session()
        session.append(EventType.TURN_START, TurnStart(turn=2))
        assert append_closers(session, fold_tail(session.events), agent_id="a") == 1
        assert session.events[-1].value() == {"turn": 2, "reason": {"kind": "interrupted"}}

    def test_answered_calls_and_closed_steps_are_not_closed_again(self) -> None:
        """Only unanswered calls get closers; a closed step gets no second step/end."""
        session = memory_session()
        _open_turn_log(session)
        session.append(EventType.TOOL_RESULT, {"turn": 1, "step": 1, "call_id": "c1", "name": "echo", "content": []})
        session.append(EventType.TOOL_RESULT, {"turn": 1, "step": 1, "call_id": "c2", "name": "echo", "content": []})
        session.append(EventType.STEP_END, StepMark(turn=1, step=1))
        before = session.last_seq
        append_closers(session, fold_tail(session.events), agent_id="a")
        assert types(session, before) == ["turn/end"]

    async def test_resume_after_an_open_turn_appends_closers(self, tmp_path: Path) -> None:
        """Before anything else the resumed agent closes the crashed turn, durably; numbering continues."""
        from host_spec.host.store.sessions import SessionStore
        from host_spec.host.store.jsonl import JsonlStore
        crashed = SessionStore(JsonlStore(tmp_path), None)
        session = crashed.create("a")
        _open_turn_log(session)
        await crashed.dispose(session)  # the process "dies" with the turn open

        store = SessionStore(JsonlStore(tmp_path), None)
        session = store.resume("a")
        before = session.last_seq
        kit = make_kit({"x": [{"text": "resumed"}]})
        agent = kit.registry.create(session, name="x", source="resume")
        assert agent.repaired == 4
        assert types(session, before) == ["tool/result", "tool/result", "step/end", "turn/end"]
        c1, c2 = find(session, EventType.TOOL_RESULT)
        assert c1["error"] == {"code": "TOOL_OUTCOME_UNKNOWN", "message": OUTCOME_UNKNOWN_TEXT}
        assert c2["error"] == {"code": "TOOL_NOT_STARTED", "message": NOT_STARTED_TEXT}
        assert find(session, EventType.TURN_END)[-1] == {"turn": 1, "reason": {"kind": "interrupted"}}
        assert all(e.cause.agent_id == "a" for e in session.events[before:])
        assert ("session_start", "a", "resume") in kit.hooks.calls
        assert agent.status == "idle"
        agent.followup(user_message("continue"))
        await agent.when_idle()
        assert [v["turn"] for v in find(session, EventType.TURN_START)] == [1, 2]
        roles = [m["role"] for m in kit.model.requests[0].messages]
        assert roles == ["user", "assistant", "tool", "tool", "user"]
        await kit.registry.dispose(agent)
        await store.dispose(session)
        _, events = JsonlStore(tmp_path).read("a")
        assert [e.type for e in events[5:9]] == ["tool/result", "tool/result", "step/end", "turn/end"]
