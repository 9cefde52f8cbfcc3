"""The turn loop: steps, steering, follow-ups, cancellation and tool execution."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from _agent_kit import EchoArgs, EchoOut, NoArgs, echo_tool, find, gate_tool, make_kit, memory_session, types
from host_spec.errors import DshError, InvariantError, ModelError
from host_spec.events import Cause, EventType, SessionHeader
from host_spec.host.agents.inbox import NEXT_TURN, Inbox
from host_spec.host.store.session import Session
from host_spec.host.store.sessions import SessionStore
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.agents.tool_step import batches
from host_spec.host.models.adapter import ModelToolCall
from host_spec.messages import message_text, user_message
from host_spec.records import CancelCause, PromptSection, ToolSpec
from host_spec.testing import FaultyStorage, MemoryStorage


def _texts(session: Any) -> list[str]:
    return [message_text(m["content"]) for m in find(session, EventType.USER_MESSAGE)]


class GatedModel:
    """Wraps a model: the first ``n`` calls wait for ``gate`` before answering."""

    def __init__(self, inner: Any, gate: asyncio.Event, n: int = 1) -> None:
        self.inner, self.gate, self.remaining, self.entered = inner, gate, n, asyncio.Event()

    async def complete(self, request: Any) -> Any:
        if self.remaining:
            self.remaining -= 1
            self.entered.set()
            await self.gate.wait()
        return await self.inner.complete(request)


class TestRefusal:
    async def test_a_refused_turn_writes_nothing_and_keeps_the_inbox(self) -> None:
        """Refused before its first step, a turn never starts: the prompt stays pending, the agent idles."""
        kit = make_kit({"lead": [{"text": "never"}]})
        kit.hooks.refuse = lambda turn, step: DshError("no budget", code="TEST_BUDGET")
        agent = kit.registry.create(memory_session("a"), name="lead")
        message_id = agent.followup(user_message("go"))
        await agent.when_idle()
        assert types(agent.session) == ["agent/inbox/spliced"] and kit.model.requests == []
        assert [item.id for item in agent.inbox.pending()] == [message_id]
        assert kit.hooks.statuses("a") == ["running", "idle"] and kit.hooks.turn_ends("a") == []
        kit.hooks.refuse = None
        agent.steer(user_message("again"))  # a later wake is asked again, and now allowed
        await agent.when_idle()
        assert sorted(_texts(agent.session)) == ["again", "go"] and len(kit.model.requests) == 1

    async def test_a_refused_step_ends_the_running_turn_with_its_code(self) -> None:
        """Refused before step 2, the turn closes as an error naming the refusal; the step's items wait."""
        kit = make_kit({"lead": [{"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}, {"text": "done"}]})
        kit.tools.register(echo_tool())
        kit.hooks.refuse = lambda turn, step: DshError("spent", code="TEST_BUDGET") if step > 1 else None
        agent = kit.registry.create(memory_session("a"), name="lead")
        agent.followup(user_message("go"))
        await agent.when_idle()
        assert types(agent.session, 1)[-3:] == ["tool/result", "step/end", "turn/end"]
        assert kit.hooks.turn_ends("a") == [(1, {"kind": "error", "error": {"message": "spent", "code": "TEST_BUDGET"}})]
        assert len(kit.model.requests) == 1

    async def test_a_refusal_that_is_no_dsh_error_is_unknown(self) -> None:
        """A plugin bug refuses too (a veto hook's exception propagates), coded ``UNKNOWN``."""
        kit = make_kit({"lead": [{"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}]})
        kit.tools.register(echo_tool())
        kit.hooks.refuse = lambda turn, step: RuntimeError("bug") if step > 1 else None  # type: ignore[return-value]
        agent = kit.registry.create(memory_session("a"), name="lead")
        agent.followup(user_message("go"))
        await agent.when_idle()
        assert kit.hooks.turn_ends("a")[0][1]["error"]["code"] == "UNKNOWN"


class TestTurns:
    async def test_followup_on_idle_runs_a_turn_with_a_tool_call(self) -> None:
        """A prompt runs model -> tool -> model and closes the turn completed."""
        kit = make_kit({"lead": [{"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}, {"text": "done"}]})
        kit.tools.register(echo_tool())
        agent = kit.registry.create(memory_session("a"), name="lead")
        agent.followup(user_message("go"))
        assert agent.status == "running"
        await agent.when_idle()
        assert types(agent.session, 1) == [
            "turn/start", "agent/inbox/spliced", "step/start", "user/message", "assistant/message",
            "tool/call", "tool/result", "step/end",
            "step/start", "assistant/message", "step/end", "turn/end",
        ]
        (result,) = find(agent.session, EventType.TOOL_RESULT)
        assert result["content"][0]["text"] == '{"echoed":"hi"}'
        assert kit.hooks.statuses("a") == ["running", "idle"]
        assert kit.hooks.turn_ends("a") == [(1, {"kind": "completed"})]
        assert all(e.cause == Cause(agent_id="a") for e in agent.session.events[1:])
        second = kit.model.requests[1]
        assert [m["role"] for m in second.messages] == ["user", "assistant", "tool"]

    async def test_queued_followups_run_as_successive_turns(self) -> None:
        """next-turn is a FIFO: one prompt per turn, numbers continue."""
        kit = make_kit()
        agent = kit.registry.create(memory_session("a"), name="x")
        agent.followup(user_message("one"))
        agent.followup(user_message("two"))
        await agent.when_idle()
        assert [v["turn"] for v in find(agent.session, EventType.TURN_START)] == [1, 2]
        assert _texts(agent.session) == ["one", "two"]
        assert kit.hooks.statuses("a") == ["running", "idle"]

    async def test_empty_assistant_message_is_not_sent_back_to_the_model(self) -> None:
        """An assistant step with no content stays in the log but not in the conversation."""
        kit = make_kit({"x": [{}, {"text": "two"}]})
        agent = kit.registry.create(memory_session("a"), name="x")
        agent.followup(user_message("one"))
        await agent.when_idle()
        agent.followup(user_message("again"))
        await agent.when_idle()
        assert [m["role"] for m in kit.model.requests[1].messages] == ["user", "user"]

    async def test_when_idle_on_an_idle_agent_returns(self) -> None:
        """Nothing running: when_idle does not wait."""
        kit = make_kit()
        agent = kit.registry.create(memory_session("a"), name="x")
        await agent.when_idle()
        assert agent.status == "idle" and kit.hooks.statuses("a") == []


class TestSteer:
    async def test_steer_into_running_agent_lands_at_next_step_boundary(self) -> None:
        """Steering during a tool call is claimed by the next step of the same turn."""
        gate, started = asyncio.Event(), asyncio.Event()
        kit = make_kit({"lead": [{"tool_calls": [{"name": "wait"}]}, {"text": "ack"}]})
        kit.tools.register(gate_tool("wait", gate, started=started))
        agent = kit.registry.create(memory_session("a"), name="lead")
        agent.followup(user_message("go"))
        await started.wait()
        agent.steer(user_message("change of plan"))
        assert [m.id for m in agent.inbox.next_step] and agent.status == "running"
        gate.set()
        await agent.when_idle()
        events = agent.session.events
        assert len(find(agent.session, EventType.TURN_START)) == 1
        tail = [e.type for e in events if e.type.startswith(("step/", "user/", "tool/result"))]
        assert tail == ["step/start", "user/message", "tool/result", "step/end", "step/start", "user/message", "step/end"]
        assert _texts(agent.session) == ["go", "change of plan"]
        assert message_text(kit.model.requests[1].messages[-1]["content"]) == "change of plan"

    async def test_steer_during_a_final_answer_extends_the_turn(self) -> None:
        """A text-only answer does not end the turn while steering is pending."""
        gate = asyncio.Event()
        kit = make_kit({"lead": [{"text": "first"}, {"text": "second"}]})
        model = GatedModel(kit.model, gate)
        kit.registry.runtime.model = model
        agent = kit.registry.create(memory_session("a"), name="lead")
        agent.followup(user_message("go"))
        await model.entered.wait()
        agent.steer(user_message("also this"))
        gate.set()
        await agent.when_idle()
        assert [v["step"] for v in find(agent.session, EventType.STEP_START)] == [1, 2]
        assert len(find(agent.session, EventType.TURN_START)) == 1
        assert [message_text(m["content"]) for m in find(agent.session, EventType.ASSISTANT_MESSAGE)] == ["first", "second"]

    async def test_steer_into_idle_agent_starts_a_turn(self) -> None:
        """An idle agent wakes synchronously on steer and answers it."""
        kit = make_kit({"x": [{"text": "on it"}]})
        agent = kit.registry.create(memory_session("a"), name="x")
        message_id = agent.steer(user_message("do it", id="m-1"))
        assert message_id == "m-1" and agent.status == "running"
        await agent.when_idle()
        assert _texts(agent.session) == ["do it"]
        assert find(agent.session, EventType.TURN_END)[-1]["reason"] == {"kind": "completed"}

    async def test_followup_while_running_waits_for_the_next_turn(self) -> None:
        """A follow-up is not steering: it becomes the next turn's prompt."""
        gate, started = asyncio.Event(), asyncio.Event()
        kit = make_kit({"lead": [{"tool_calls": [{"name": "wait"}]}, {"text": "done"}, {"text": "later done"}]})
        kit.tools.register(gate_tool("wait", gate, started=started))
        agent = kit.registry.create(memory_session("a"), name="lead")
        agent.followup(user_message("go"))
        await started.wait()
        agent.followup(user_message("later"))
        gate.set()
        await agent.when_idle()
        assert [v["turn"] for v in find(agent.session, EventType.TURN_START)] == [1, 2]
        starts = [i for i, e in enumerate(agent.session.events) if e.type == EventType.TURN_START]
        later = [i for i, e in enumerate(agent.session.events) if e.type == EventType.USER_MESSAGE][1]
        assert later > starts[1]


class TestCancel:
    def _blocked(self, script: dict, *tools: ToolSpec) -> Any:
        kit = make_kit(script)
        for tool in tools:
            kit.tools.register(tool)
        return kit

    async def test_cancel_keeps_the_inbox_without_waking(self) -> None:
        """Cancelled turn ends aborted; kept items wait for the next waking send."""
        gate, started = asyncio.Event(), asyncio.Event()
        kit = self._blocked({"lead": [{"tool_calls": [{"name": "wait"}]}]}, gate_tool("wait", gate, started=started))
        agent = kit.registry.create(memory_session("a"), name="lead")
        agent.followup(user_message("go"))
        await started.wait()
        agent.followup(user_message("queued", id="q"))
        agent.cancel(CancelCause("user"))
        await agent.when_idle()
        (result,) = find(agent.session, EventType.TOOL_RESULT)
        assert result["content"][0]["text"] == '{"released":false,"aborted":true}'
        assert find(agent.session, EventType.TURN_END)[-1]["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}
        assert [m.id for m in agent.inbox.pending()] == ["q"]
        assert agent.status == "idle" and len(find(agent.session, EventType.TURN_START)) == 1
        await asyncio.sleep(0)
        assert agent.status == "idle"
        agent.steer(user_message("resume"))
        await agent.when_idle()
        assert _texts(agent.session) == ["go", "resume", "queued"]
        assert kit.hooks.statuses("a") == ["running", "idle", "running", "idle"]

    async def test_cancel_without_keep_inbox_discards_pending_items(self) -> None:
        """keep_inbox=False writes canceled splices for everything pending."""
        gate, started = asyncio.Event(), asyncio.Event()
        kit = self._blocked({"lead": [{"tool_calls": [{"name": "wait"}]}]}, gate_tool("wait", gate, started=started))
        agent = kit.registry.create(memory_session("a"), name="lead")
        agent.followup(user_message("go"))
        await started.wait()
        agent.followup(user_message("queued", id="q"))
        agent.cancel(CancelCause("hook", "policy"), keep_inbox=False)
        await agent.when_idle()
        canceled = [v for v in find(agent.session, EventType.INBOX_SPLICED) if v.get("outcome") == "canceled"]
        assert canceled == [{"target": "next-turn", "removed_ids": ["q"], "outcome": "canceled"}]
        assert agent.inbox.pending() == ()
        reason = find(agent.session, EventType.TURN_END)[-1]["reason"]
        assert reason == {"kind": "aborted", "reason": {"kind": "hook", "detail": "policy"}}

    async def test_unstarted_tool_calls_get_aborted_before_dispatch(self) -> None:
        """Calls after a cancel get a synthetic tool/call + error result; started ones drain."""
        gate, started = asyncio.Event(), asyncio.Event()
        script = {"lead": [{"tool_calls": [{"name": "wait"}, {"name": "echo", "arguments": {"text": "x"}}]}]}
        kit = self._blocked(script, gate_tool("wait", gate, started=started), echo_tool())
        agent = kit.registry.create(memory_session("a"), name="lead")
        agent.followup(user_message("go"))
        await started.wait()
        agent.cancel(CancelCause("user"))
        await agent.when_idle()
        calls = find(agent.session, EventType.TOOL_CALL)
        results = find(agent.session, EventType.TOOL_RESULT)
        assert [c["name"] for c in calls] == ["wait", "echo"]
        assert results[1]["error"] == {"code": "ABORTED_BEFORE_DISPATCH", "message": "tool call aborted before dispatch"}
        assert results[1]["content"][0]["text"] == "Error: tool call aborted before dispatch"
        assert len(find(agent.session, EventType.ASSISTANT_MESSAGE)) == 1
        assert types(agent.session)[-2:] == ["step/end", "turn/end"]

    async def test_cancel_on_idle_is_a_no_op(self) -> None:
        """Nothing to cancel: no events, no status change, nothing armed."""
        kit = make_kit({"x": [{"text": "fine"}]})
        agent = kit.registry.create(memory_session("a"), name="x")
        agent.cancel(CancelCause("user"), keep_inbox=False)
        assert agent.session.last_seq == 0 and kit.hooks.statuses("a") == []
        agent.followup(user_message("hi"))
        await agent.when_idle()
        assert find(agent.session, EventType.TURN_END)[-1]["reason"] == {"kind": "completed"}

    async def test_waking_send_after_cancel_is_latched_into_a_new_turn(self) -> None:
        """A send while the cancel drains goes to next-turn and starts a fresh turn afterwards."""
        gate, started = asyncio.Event(), asyncio.Event()
        kit = self._blocked({"lead": [{"tool_calls": [{"name": "wait"}]}, {"text": "fresh"}]}, gate_tool("wait", gate, started=started))
        agent = kit.registry.create(memory_session("a"), name="lead")
        agent.followup(user_message("go"))
        await started.wait()
        agent.cancel(CancelCause("user"))
        agent.cancel(CancelCause("parent"))  # first cause wins
        agent.steer(user_message("new instructions"))
        splice = find(agent.session, EventType.INBOX_SPLICED)[-1]
        assert splice["target"] == "next-turn"
        await agent.when_idle()
        ends = [v["reason"] for v in find(agent.session, EventType.TURN_END)]
        assert ends == [{"kind": "aborted", "reason": {"kind": "user"}}, {"kind": "completed"}]
        assert _texts(agent.session) == ["go", "new instructions"]
        assert kit.hooks.statuses("a") == ["running", "idle"]

    async def test_cancel_during_the_checkpoint_skips_the_model_call(self) -> None:
        """A cancel that lands before the model call means the model is never asked."""

        class CancelOnPrompt:
            agent: Any = None

            def pre_append(self, session: Any, event: Any) -> None:
                pass

            def committed(self, session: Any, event: Any) -> None:
                if event.type == EventType.USER_MESSAGE:
                    self.agent.cancel(CancelCause("user"))

            def flushed(self, session: Any, seq: int) -> None:
                pass

        observer = CancelOnPrompt()
        kit = make_kit({"x": [{"text": "never"}]})
        agent = kit.registry.create(Session(SessionHeader(id="a", created_at=0), observer=observer), name="x")
        observer.agent = agent
        agent.followup(user_message("go"))
        await agent.when_idle()
        assert kit.model.requests == []
        assert find(agent.session, EventType.TURN_END)[-1]["reason"]["kind"] == "aborted"

    async def test_cancel_during_the_model_call_aborts_it(self) -> None:
        """A hanging model call is abandoned; no assistant message is recorded."""

        class HangModel:
            cancelled = False

            async def complete(self, request: Any) -> Any:
                try:
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    HangModel.cancelled = True
                    raise

        kit = make_kit(model=HangModel())
        agent = kit.registry.create(memory_session("a"), name="x")
        agent.followup(user_message("go"))
        for _ in range(5):
            await asyncio.sleep(0)
        agent.cancel(CancelCause("user"))
        await agent.when_idle()
        assert HangModel.cancelled
        assert find(agent.session, EventType.ASSISTANT_MESSAGE) == []
        assert types(agent.session)[-2:] == ["step/end", "turn/end"]


class TestToolCallsInTheLoop:
    async def test_unknown_tool_called_by_the_model(self) -> None:
        """The model gets an UNKNOWN_TOOL error result and the turn carries on."""
        kit = make_kit({"x": [{"tool_calls": [{"name": "missing"}]}, {"text": "recovered"}]})
        agent = kit.registry.create(memory_session("a"), name="x")
        agent.followup(user_message("go"))
        await agent.when_idle()
        (result,) = find(agent.session, EventType.TOOL_RESULT)
        assert result["is_error"] and result["error"] == {"code": "UNKNOWN_TOOL", "message": 'unknown tool "missing"'}
        assert find(agent.session, EventType.TURN_END)[-1]["reason"] == {"kind": "completed"}
        assert kit.model.requests[1].messages[-1]["content"][0]["text"] == 'Error: unknown tool "missing"'

    async def test_tool_arguments_failing_their_schema(self) -> None:
        """Arguments that do not match the Struct give INVALID_ARGS; the turn continues."""
        kit = make_kit({"x": [{"tool_calls": [{"name": "echo", "arguments": {"text": 5}}]}, {"text": "ok"}]})
        kit.tools.register(echo_tool())
        agent = kit.registry.create(memory_session("a"), name="x")
        agent.followup(user_message("go"))
        await agent.when_idle()
        (result,) = find(agent.session, EventType.TOOL_RESULT)
        assert result["error"]["code"] == "INVALID_ARGS"
        assert "Expected `str`, got `int` - at `$.text`" in result["error"]["message"]
        assert find(agent.session, EventType.TURN_END)[-1]["reason"] == {"kind": "completed"}

    async def test_events_appended_inside_a_tool_carry_the_call(self) -> None:
        """cause = (agent, call id, tool) inside the body; (agent) for loop events; none for outside sends."""

        async def note(args: NoArgs, call: Any) -> dict[str, bool]:
            call.agent.session.append("test/note", {})
            return {"ok": True}

        kit = make_kit({"x": [{"tool_calls": [{"name": "note"}]}]})
        kit.tools.register(ToolSpec("note", "Note.", NoArgs, dict[str, bool], note))
        agent = kit.registry.create(memory_session("a"), name="x")
        agent.followup(user_message("go"))
        await agent.when_idle()
        by_type = {e.type: e.cause for e in agent.session.events}
        assert by_type["test/note"] == Cause(agent_id="a", call_id="x-1.1", tool="note")
        assert by_type["tool/result"] == Cause(agent_id="a")
        assert agent.session.events[0].cause is None

    async def test_concurrency_safe_calls_run_together_in_model_order(self) -> None:
        """Consecutive safe calls overlap; their results still commit in model order."""
        seen_b = asyncio.Event()

        async def slow(args: NoArgs, call: Any) -> dict[str, bool]:
            await asyncio.wait_for(seen_b.wait(), 2)
            return {"overlapped": True}

        async def fast(args: NoArgs, call: Any) -> dict[str, bool]:
            seen_b.set()
            return {"overlapped": False}

        kit = make_kit({"x": [{"tool_calls": [{"name": "slow"}, {"name": "fast"}]}]})
        kit.tools.register(ToolSpec("slow", "", NoArgs, dict[str, bool], slow, concurrency_safe=True))
        kit.tools.register(ToolSpec("fast", "", NoArgs, dict[str, bool], fast, concurrency_safe=True))
        agent = kit.registry.create(memory_session("a"), name="x")
        agent.followup(user_message("go"))
        await agent.when_idle()
        results = find(agent.session, EventType.TOOL_RESULT)
        assert [r["name"] for r in results] == ["slow", "fast"]
        assert results[0]["content"][0]["text"] == '{"overlapped":true}'
        tail = [e.type for e in agent.session.events if e.type.startswith("tool/")]
        assert tail == ["tool/call", "tool/call", "tool/result", "tool/result"]

    def test_unsafe_calls_are_barriers(self) -> None:
        """Only consecutive concurrency-safe calls share a batch."""
        kit = make_kit()
        kit.tools.register(echo_tool("safe", concurrency_safe=True))
        kit.tools.register(echo_tool("unsafe"))
        agent = kit.registry.create(memory_session("a"), name="x")
        names = ["safe", "safe", "unsafe", "safe", "missing", "safe"]
        calls = [ModelToolCall(id=str(i), name=n, arguments="{}") for i, n in enumerate(names)]
        assert [[c.name for c in b] for b in batches(agent, calls)] == [
            ["safe", "safe"], ["unsafe"], ["safe"], ["missing"], ["safe"],
        ]


class TestFailures:
    async def _run_with(self, model: Any) -> Any:
        kit = make_kit(model=model)
        agent = kit.registry.create(memory_session("a"), name="x")
        agent.followup(user_message("go"))
        await agent.when_idle()
        return agent, kit

    async def test_model_error_ends_the_turn_with_its_code(self) -> None:
        """A ModelError becomes turn/end error carrying its code; step/end is still written."""

        class Down:
            async def complete(self, request: Any) -> Any:
                raise ModelError("provider down", code="MODEL_DOWN")

        agent, kit = await self._run_with(Down())
        reason = find(agent.session, EventType.TURN_END)[-1]["reason"]
        assert reason == {"kind": "error", "error": {"message": "provider down", "code": "MODEL_DOWN"}}
        assert types(agent.session)[-2:] == ["step/end", "turn/end"]
        assert kit.hooks.turn_ends("a") == [(1, reason)]
        assert agent.status == "idle"

    async def test_failure_after_cancel_reports_aborted_not_error(self) -> None:
        """An exception that follows a cancel is the cancel's consequence: the turn ends aborted."""

        class CancelThenFail:
            agent: Any = None

            async def complete(self, request: Any) -> Any:
                request.agent.cancel(CancelCause("user"))
                raise ConnectionError("stream closed")

        agent, kit = await self._run_with(CancelThenFail())
        assert find(agent.session, EventType.TURN_END)[-1]["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}

    async def test_unexpected_model_exception_is_unknown(self) -> None:
        """Any other exception ends the turn with code UNKNOWN."""

        class Broken:
            async def complete(self, request: Any) -> Any:
                raise ValueError("bad")

        agent, _ = await self._run_with(Broken())
        assert find(agent.session, EventType.TURN_END)[-1]["reason"]["error"] == {"message": "ValueError: bad", "code": "UNKNOWN"}

    async def test_malformed_reply_is_a_model_error(self) -> None:
        """A reply without the documented shape is rejected as MODEL_BAD_REPLY."""

        class Weird:
            async def complete(self, request: Any) -> Any:
                return {"text": "x", "tool_calls": [{"arguments": "{}"}]}

        agent, _ = await self._run_with(Weird())
        assert find(agent.session, EventType.TURN_END)[-1]["reason"]["error"]["code"] == "MODEL_BAD_REPLY"

    async def test_failed_checkpoint_answers_every_call_before_the_turn_fails(self) -> None:
        """If the pre-tool flush fails, each call gets TOOL_NOT_STARTED and the turn ends error."""

        backend = FaultyStorage(MemoryStorage()).create(SessionHeader(id="a", created_at=0))

        class ArmingModel:
            async def complete(self, request: Any) -> Any:
                backend.fail_when(lambda number: True)
                return {"text": "", "tool_calls": [{"id": "c1", "name": "echo", "arguments": "{}"}, {"id": "c2", "name": "echo"}]}

        kit = make_kit(model=ArmingModel())
        kit.tools.register(echo_tool())
        session = Session(SessionHeader(id="a", created_at=0), backend=backend)
        agent = kit.registry.create(session, name="x")
        agent.followup(user_message("go"))
        await agent.when_idle()
        results = find(agent.session, EventType.TOOL_RESULT)
        assert [(r["call_id"], r["error"]["code"]) for r in results] == [("c1", "TOOL_NOT_STARTED"), ("c2", "TOOL_NOT_STARTED")]
        assert find(agent.session, EventType.TURN_END)[-1]["reason"]["error"]["code"] == "UNKNOWN"

    async def test_vetoed_result_leaves_the_turn_in_error(self) -> None:
        """If the log refuses tool results, the turn still closes with an error."""

        class VetoResults:
            def pre_append(self, session: Any, event: Any) -> None:
                if event.type == EventType.TOOL_RESULT:
                    raise InvariantError("test", "no results")

            def committed(self, session: Any, event: Any) -> None:
                pass

            def flushed(self, session: Any, seq: int) -> None:
                pass

        kit = make_kit({"x": [{"tool_calls": [{"name": "echo", "arguments": {"text": "t"}}]}]})
        kit.tools.register(echo_tool())
        agent = kit.registry.create(Session(SessionHeader(id="a", created_at=0), observer=VetoResults()), name="x")
        agent.followup(user_message("go"))
        await agent.when_idle()
        reason = find(agent.session, EventType.TURN_END)[-1]["reason"]
        assert reason["error"]["code"] == "INVARIANT"
        assert agent.status == "idle"

    async def test_hook_failures_are_contained(self) -> None:
        """A raising status or turn_end hook does not stop the agent."""
        kit = make_kit({"x": [{"text": "a"}]})

        def boom(*args: Any) -> None:
            raise RuntimeError("observer bug")

        kit.hooks.on_status = boom
        kit.hooks.fail = {"turn_end"}
        agent = kit.registry.create(memory_session("a"), name="x")
        agent.followup(user_message("go"))
        await agent.when_idle()
        assert agent.status == "idle"
        assert find(agent.session, EventType.TURN_END)[-1]["reason"] == {"kind": "completed"}

    async def test_session_closed_under_the_driver_goes_idle(self) -> None:
        """If even turn/end cannot be written, the driver logs and the agent goes idle."""

        class Closer:
            def __init__(self) -> None:
                self.session: Any = None

            async def complete(self, request: Any) -> Any:
                self.session.close()
                return {"text": "x"}

        closer = Closer()
        kit = make_kit(model=closer)
        agent = kit.registry.create(memory_session("a"), name="x")
        closer.session = agent.session
        agent.followup(user_message("go"))
        await agent.when_idle()
        assert agent.status == "idle" and kit.hooks.statuses("a") == ["running", "idle"]
        assert find(agent.session, EventType.TURN_END) == []


class TestStatus:
    def test_setting_the_same_status_twice_reports_once(self) -> None:
        """The status hook never sees a repeated status."""
        kit = make_kit()
        agent = kit.registry.create(memory_session("a"), name="x")
        agent.driver_done()
        assert kit.hooks.statuses("a") == []

    async def test_runtime_defaults_to_null_hooks(self) -> None:
        """Without app hooks the agents still run (tests, benchmarks)."""
        from host_spec.host.agents.registry import AgentRegistry, AgentRuntime, NullHooks
        from host_spec.host.models.scripted import ScriptedModel
        from host_spec.host.agents.prompt import PromptRegistry
        from host_spec.host.agents.tools import ToolRegistry
        runtime = AgentRuntime(None, ToolRegistry(), PromptRegistry(), ScriptedModel.from_mapping({}))
        assert isinstance(runtime.hooks, NullHooks)
        registry = AgentRegistry(runtime)
        agent = registry.create(memory_session("a"), name="x")
        agent.followup(user_message("go"))
        await agent.when_idle()
        await registry.dispose(agent)
        assert find(agent.session, EventType.TURN_END)[-1]["reason"] == {"kind": "completed"}

    async def test_status_never_repeats_when_a_hook_rewakes_the_agent(self) -> None:
        """Idle -> steer from the status hook -> running again, strictly alternating."""
        kit = make_kit({"x": [{"text": "1"}, {"text": "2"}]})
        sent: list[str] = []

        def on_status(agent: Any, status: str) -> None:
            if status == "idle" and not sent:
                sent.append(agent.steer(user_message("again")))

        kit.hooks.on_status = on_status
        agent = kit.registry.create(memory_session("a"), name="x")
        agent.followup(user_message("go"))
        await agent.when_idle()
        assert kit.hooks.statuses("a") == ["running", "idle", "running", "idle"]
        assert _texts(agent.session) == ["go", "again"]


class TestJsonlRun:
    async def test_single_agent_run_with_a_tool_on_a_jsonl_session(self, tmp_path: Path) -> None:
        """End to end on disk: every loop event is durable and checkpoints precede model and tool bodies."""
        checkpoints: list[tuple[str, int, int]] = []
        store = SessionStore(JsonlStore(tmp_path), None)
        session = store.create("lead-1")
        kit = make_kit({"lead": [{"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]}, {"text": "done"}]})
        inner = kit.model

        class Watching:
            async def complete(self, request: Any) -> Any:
                checkpoints.append(("model", session.durable_seq, session.last_seq))
                return await inner.complete(request)

        async def echo(args: Any, call: Any) -> Any:
            checkpoints.append(("tool", session.durable_seq, session.last_seq))
            return {"echoed": args.text}

        kit.registry.runtime.model = Watching()
        kit.tools.register(ToolSpec("echo", "Echo.", EchoArgs, EchoOut, echo))
        kit.prompts.register(PromptSection("identity", -100, "You are a test agent."))
        agent = kit.registry.create(session, name="lead")
        agent.followup(user_message("go"))
        await agent.when_idle()
        await kit.registry.dispose(agent)
        await store.dispose(session)
        assert inner.requests[0].system == "You are a test agent."
        assert all(durable == last for _, durable, last in checkpoints)
        assert [kind for kind, _, _ in checkpoints] == ["model", "tool", "model"]
        header, events = JsonlStore(tmp_path).read("lead-1")
        assert [e.type for e in events] == [
            "agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "step/start", "user/message",
            "assistant/message", "tool/call", "tool/result", "step/end",
            "step/start", "assistant/message", "step/end", "turn/end",
        ]
        result = [e.value() for e in events if e.type == EventType.TOOL_RESULT][0]
        assert result["content"] == [{"type": "text", "text": '{"echoed":"hi"}'}]

    async def test_cold_resume_with_pending_work_continues(self, tmp_path: Path) -> None:
        """A stored session with an unclaimed prompt starts working as soon as its agent is created."""
        store = SessionStore(JsonlStore(tmp_path), None)
        session = store.create("worker-1")
        Inbox(session).insert(user_message("left over", id="left"), NEXT_TURN)
        await store.dispose(session)

        store2 = SessionStore(JsonlStore(tmp_path), None)
        resumed = store2.resume("worker-1")
        kit = make_kit({"w": [{"text": "picked up"}]})
        agent = kit.registry.create(resumed, name="w", source="resume")
        assert agent.status == "running"
        await agent.when_idle()
        assert kit.model.requests[0].reply["text"] == "picked up"
        assert agent.inbox.pending() == ()
        await kit.registry.dispose(agent)
        await store2.dispose(resumed)
        _, events = JsonlStore(tmp_path).read("worker-1")
        assert [e.value()["reason"] for e in events if e.type == EventType.TURN_END] == [{"kind": "completed"}]
