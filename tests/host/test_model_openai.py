"""The ``openai:`` adapter against a real chat-completions server on 127.0.0.1 (in-process host)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from host_spec.errors import ModelError
from host_spec.events import EventType
from host_spec.host.models.openai_adapter import classify, from_spec
from host_spec.host.store.jsonl import JsonlStore
from kit_model_server import ModelServer, Raw, Slow, Status, calls, text
from kit_notes import KEY, KEY_ENV, of, open_notes, run_prompt, spec, turn_end


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def script(*replies: Any) -> Any:
    """A responder answering ``replies`` in order (then plain text)."""
    queue = list(replies)
    return lambda request: queue.pop(0) if queue else text("done")


class TestConversation:
    async def test_arguments_split_mid_json_are_reassembled_executed_and_usage_recorded(self, tmp_path: Path) -> None:
        with ModelServer(script(calls(("note", {"text": "split \u00e9 json"}), split=3, cached=5), text("noted"))) as server:
            events, notes = await run_prompt(tmp_path, spec(server.base_url))
        assert notes.notes == ["split \u00e9 json"]
        first, second = of(events, EventType.ASSISTANT_MESSAGE)
        assert first["content"][0]["arguments"] == json.dumps({"text": "split \u00e9 json"})
        assert first["usage"] == {"input_tokens": 20, "output_tokens": 7, "cached_tokens": 5}
        assert first["model"] == "openai:stub-model"
        assert second["usage"] == {"input_tokens": 11, "output_tokens": 3}
        assert turn_end(events) == {"kind": "completed"}
        request = server.requests[0]
        assert request["model"] == "stub-model" and request["stream"] is True
        assert request["tools"][0]["function"]["name"] == "note"
        assert server.headers[0]["authorization"] == f"Bearer {KEY}"
        # The second request carries the call and its result, linked by the call id.
        wire = server.requests[1]["messages"]
        assert wire[-2]["tool_calls"][0]["id"] == "call_0" and wire[-1]["tool_call_id"] == "call_0"

    async def test_malformed_arguments_get_invalid_args_and_the_model_corrects_itself(self, tmp_path: Path) -> None:
        replies = script(calls(("note", '{"text": "oops'), split=4), calls(("note", {"text": "fixed"})), text("ok"))
        with ModelServer(replies) as server:
            events, notes = await run_prompt(tmp_path, spec(server.base_url))
        assert notes.notes == ["fixed"]
        results = of(events, EventType.TOOL_RESULT)
        assert [r.get("error", {}).get("code") for r in results] == ["INVALID_ARGS", None]
        seen = server.requests[1]["messages"][-1]
        assert seen["role"] == "tool" and seen["content"].startswith("Error: invalid arguments")
        assert server.requests[1]["messages"][-2]["tool_calls"][0]["function"]["arguments"] == '{"text": "oops'

    async def test_a_reply_naming_an_unknown_tool_gets_unknown_tool(self, tmp_path: Path) -> None:
        with ModelServer(script(calls(("nope", {})), text("ok"))) as server:
            events, _ = await run_prompt(tmp_path, spec(server.base_url))
        assert of(events, EventType.TOOL_RESULT)[0]["error"]["code"] == "UNKNOWN_TOOL"
        assert turn_end(events) == {"kind": "completed"}

    async def test_non_streamed_mode(self, tmp_path: Path) -> None:
        with ModelServer(script(calls(("note", {"text": "plain"})), text("ok"))) as server:
            events, notes = await run_prompt(tmp_path, spec(server.base_url, "stream=false"))
        assert notes.notes == ["plain"] and "stream" not in server.requests[0]
        assert of(events, EventType.ASSISTANT_MESSAGE)[0]["usage"] == {"input_tokens": 20, "output_tokens": 7}

    async def test_constrained_mode_sends_a_schema_and_parses_the_json_step(self, tmp_path: Path) -> None:
        step = json.dumps({"tool": "note", "arguments": {"text": "constrained"}})
        with ModelServer(script(text(step), text(json.dumps({"answer": "finished"})))) as server:
            events, notes = await run_prompt(tmp_path, spec(server.base_url, "tools=constrained"))
        assert notes.notes == ["constrained"]
        first = server.requests[0]
        assert "tools" not in first and first["response_format"]["type"] == "json_schema"
        assert "- note: Write a note." in first["messages"][0]["content"]
        assert server.requests[1]["messages"][-1] == {"role": "user", "content": 'Result of tool note:\n{"saved":true}'}
        assert [message_texts(m) for m in of(events, EventType.ASSISTANT_MESSAGE)][-1] == "finished"


def message_texts(message: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in message["content"] if b["type"] == "text")


class TestRetries:
    async def test_429_then_success(self, tmp_path: Path) -> None:
        with ModelServer(script(Status(429, "slow down", {"retry-after": "0"}), text("made it"))) as server:
            events, _ = await run_prompt(tmp_path, spec(server.base_url))
        assert len(server.requests) == 2 and turn_end(events) == {"kind": "completed"}

    async def test_a_persistent_500_ends_the_turn_with_model_unavailable_after_bounded_retries(self, tmp_path: Path) -> None:
        with ModelServer(lambda request: Status(500, "boom")) as server:
            events, _ = await run_prompt(tmp_path, spec(server.base_url, "retries=2"))
        reason = turn_end(events)
        assert len(server.requests) == 3
        assert reason["kind"] == "error" and reason["error"]["code"] == "MODEL_UNAVAILABLE"
        assert "after 3 attempts" in reason["error"]["message"] and "boom" in reason["error"]["message"]
        assert of(events, EventType.ASSISTANT_MESSAGE) == []

    async def test_an_unreadable_retry_after_falls_back_to_backoff(self, tmp_path: Path) -> None:
        with ModelServer(script(Status(503, "busy", {"retry-after": "soon"}), text("made it"))) as server:
            events, _ = await run_prompt(tmp_path, spec(server.base_url))
        assert len(server.requests) == 2 and turn_end(events) == {"kind": "completed"}

    async def test_a_constrained_reply_cut_by_max_tokens_says_so(self, tmp_path: Path) -> None:
        from kit_model_server import Reply

        with ModelServer(script(Reply(content='{"tool": "note", "argu', finish="length"))) as server:
            events, notes = await run_prompt(tmp_path, spec(server.base_url, "tools=constrained"))
        reason = turn_end(events)
        assert reason["error"]["code"] == "MODEL_BAD_REPLY" and "(the reply hit max_tokens)" in reason["error"]["message"]
        assert notes.notes == []

    async def test_rate_limit_exhausted(self, tmp_path: Path) -> None:
        with ModelServer(lambda request: Status(429, "quota", {"retry-after": "0"})) as server:
            events, _ = await run_prompt(tmp_path, spec(server.base_url, "retries=1"))
        assert turn_end(events)["error"]["code"] == "MODEL_RATE_LIMITED" and len(server.requests) == 2

    @pytest.mark.parametrize("reply, code", [
        (Status(401, f"Incorrect API key provided: {KEY}"), "MODEL_AUTH"),
        (Status(400, "This model's maximum context length is 8192 tokens"), "MODEL_CONTEXT_OVERFLOW"),
        (Status(400, "unsupported parameter"), "MODEL_REQUEST_REJECTED"),
        (Status(404, "no such model"), "MODEL_UNAVAILABLE"),
        (Raw(b"<html>gateway</html>"), "MODEL_BAD_REPLY"),
        (Raw(b"data: {\"choices\": []}\n\ndata: [DONE]\n\n", "text/event-stream"), "MODEL_BAD_REPLY"),
    ])
    async def test_unretried_failures_end_the_turn_with_their_code_and_never_the_key(
        self, tmp_path: Path, reply: Any, code: str
    ) -> None:
        with ModelServer(lambda request: reply) as server:
            events, _ = await run_prompt(tmp_path, spec(server.base_url))
        reason = turn_end(events)
        assert reason["error"]["code"] == code and len(server.requests) == 1
        assert KEY not in reason["error"]["message"]
        assert not any(KEY.encode() in path.read_bytes() for path in tmp_path.rglob("*") if path.is_file())

    @pytest.mark.parametrize("body, kind", [(b"not json at all", "application/json"), (b"hello", "text/plain")])
    async def test_non_json_in_non_streamed_mode(self, tmp_path: Path, body: bytes, kind: str) -> None:
        with ModelServer(lambda request: Raw(body, kind)) as server:
            events, _ = await run_prompt(tmp_path, spec(server.base_url, "stream=false"))
        assert turn_end(events)["error"]["code"] == "MODEL_BAD_REPLY" and len(server.requests) == 1

    async def test_an_unreachable_base_url_is_model_unavailable(self, tmp_path: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]  # nothing listens here once the probe closes
        events, _ = await run_prompt(tmp_path, spec(f"http://127.0.0.1:{port}/v1", "retries=1"))
        reason = turn_end(events)
        assert reason["error"]["code"] == "MODEL_UNAVAILABLE" and f"127.0.0.1:{port}" in reason["error"]["message"]


class TestCancel:
    async def test_a_cancelled_turn_closes_the_stream_promptly(self, tmp_path: Path) -> None:
        async def body(server: ModelServer) -> tuple[list[Any], float]:
            host, _ = await open_notes(tmp_path, spec(server.base_url))
            try:
                session = await host.create_session()
                agent = host.start_agent(session, name="lead", model=host.models.default_spec)
                agent.followup(__import__("host_spec.messages", fromlist=["user_message"]).user_message("go"))
                while not server.stream_started.is_set():
                    await __import__("asyncio").sleep(0.02)
                cancelled_at = time.monotonic()
                from host_spec.records import CancelCause
                agent.cancel(CancelCause("user"))
                await host.quiesce()
                return list(agent.session.events), cancelled_at
            finally:
                await host.close()

        with ModelServer(lambda request: Slow(every=0.05)) as server:
            events, cancelled_at = await body(server)
            deadline = time.monotonic() + 60
            while not server.disconnects and time.monotonic() < deadline:
                time.sleep(0.05)
        assert server.disconnects, "the server kept streaming to a cancelled turn"
        assert turn_end(events)["kind"] == "aborted"
        # A stream left open would run for 300 s (6000 x 0.05 s); it was dropped right after the cancel.
        assert server.disconnects[0] - cancelled_at < 60


class TestBuild:
    def test_a_missing_key_variable_fails_before_anything_is_written(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv(KEY_ENV)
        with pytest.raises(ModelError, match=f"environment variable {KEY_ENV} is not set") as info:
            from_spec(f"m?api_key_env={KEY_ENV}")
        assert info.value.code == "MODEL_AUTH"
        assert from_spec("m?api_key_env=&base_url=http://127.0.0.1:9/v1").settings.api_key_env == ""

    def test_repr_and_classification_never_show_the_key(self) -> None:
        adapter = from_spec(f"m?api_key_env={KEY_ENV}")
        assert KEY not in repr(adapter)
        retry, _, error = classify(RuntimeError(f"odd {KEY}"), where="server", key=KEY)
        assert retry and error.code == "MODEL_UNAVAILABLE" and KEY not in error.message
        assert classify(ModelError("x", code="MODEL_BAD_REPLY"), where="s", key=KEY)[2].code == "MODEL_BAD_REPLY"
        assert classify(RuntimeError("x" * 400), where="s", key="")[2].message.endswith("...")  # no key: nothing to hide

    async def test_stored_logs_hold_usage_but_no_key(self, tmp_path: Path) -> None:
        with ModelServer(script(text("hi"))) as server:
            await run_prompt(tmp_path, spec(server.base_url))
        store = JsonlStore(tmp_path)
        _, events = store.read(store.list_ids()[0])
        assert of(list(events), EventType.ASSISTANT_MESSAGE)[0]["usage"]["input_tokens"] == 11


class TestToolRails:
    """``first_tool`` and ``max_tool_steps``: what a request offers at each point of a conversation."""

    @staticmethod
    def body(options: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
        from host_spec.host.models.adapter import ModelRequest
        from kit_notes import NoteArgs, NoteResult
        from host_spec.records import ToolSpec

        async def never(args: Any, call: Any) -> Any:
            raise AssertionError

        note = ToolSpec("note", "Write a note.", NoteArgs, NoteResult, never)
        other = ToolSpec("other", "Something else.", NoteArgs, NoteResult, never)
        adapter = from_spec(f"m?api_key_env={KEY_ENV}&{options}")
        return adapter.request_body(ModelRequest(agent=None, system="s", messages=messages, tools=[note, other]))  # type: ignore[arg-type]

    FIRST = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
    AFTER_CALL = [*FIRST, {"role": "assistant", "content": [{"type": "tool-call", "id": "c", "name": "note", "arguments": "{}"}]},
                  {"role": "tool", "call_id": "c", "name": "note", "content": []}]
    AFTER_TEXT = [*FIRST, {"role": "assistant", "content": [{"type": "text", "text": "hm"}]}]

    @staticmethod
    def offered(body: dict[str, Any]) -> list[str]:
        variants = body["response_format"]["json_schema"]["schema"]["anyOf"]
        return [v["properties"]["tool"]["enum"][0] if "tool" in v["properties"] else "answer" for v in variants]

    def test_constrained(self) -> None:
        rails = "tools=constrained&first_tool=note&max_tool_steps=1"
        assert self.offered(self.body(rails, self.FIRST)) == ["note"]
        assert self.offered(self.body(rails, self.AFTER_TEXT)) == ["note", "other", "answer"]
        assert self.offered(self.body(rails, self.AFTER_CALL)) == ["answer"]
        capped = self.body(f"{rails}&max_answer_chars=80", self.AFTER_CALL)["response_format"]["json_schema"]["schema"]
        assert capped["anyOf"][0]["properties"]["answer"] == {"type": "string", "maxLength": 80}
        assert self.offered(self.body("tools=constrained&first_tool=any", self.FIRST)) == ["note", "other"]
        assert self.offered(self.body("tools=constrained&first_tool=missing", self.FIRST)) == ["note", "other", "answer"]

    def test_native(self) -> None:
        assert self.body("first_tool=note", self.FIRST)["tool_choice"] == {"type": "function", "function": {"name": "note"}}
        assert self.body("first_tool=any", self.FIRST)["tool_choice"] == "required"
        assert "tool_choice" not in self.body("first_tool=any", self.AFTER_TEXT)
        assert self.body("max_tool_steps=1", self.AFTER_CALL)["tool_choice"] == "none"
        assert "tool_choice" not in self.body("max_tool_steps=2", self.AFTER_CALL)
        assert self.body("max_tokens=5&temperature=0.5", self.FIRST) | {"messages": None, "tools": None} == {
            "model": "m", "messages": None, "tools": None, "max_tokens": 5, "temperature": 0.5}


class TestInterruptAgent:
    @pytest.mark.timeout_s(180)
    async def test_interrupt_agent_cuts_a_teammates_slow_stream(self, tmp_path: Path) -> None:
        """The Lead interrupts a teammate mid-stream: its turn ends aborted and the server sees the hang-up."""
        from host_spec.host.app import Host

        server_box: list[ModelServer] = []
        lead_steps = [calls(("spawn_teammate", {"name": "slowpoke", "description": "slow", "prompt": "[slowpoke] go"})),
                      "interrupt", text("interrupted it")]

        def responder(request: dict[str, Any]) -> Any:
            first = next(m["content"] for m in request["messages"] if m["role"] == "user")
            if "[slowpoke]" in first:
                return Slow(every=0.05) if not server_box[0].disconnects else text("slowpoke resumed")
            step = lead_steps.pop(0) if lead_steps else text("done")
            if step == "interrupt":
                assert server_box[0].stream_started.wait(120), "the teammate never started streaming"
                return calls(("interrupt_agent", {"target": "slowpoke"}))
            return step

        async def body() -> tuple[list[Any], list[Any]]:
            host = await Host.open(tmp_path, "agent-teams", spec(server_box[0].base_url))
            try:
                lead = await host.run("[lead] start a slow teammate, then stop it")
                child = next(s for s in host.store.list_ids() if s != lead.id)
                return list(lead.session.events), list(host.store.read(child)[1])
            finally:
                await host.close()

        with ModelServer(responder) as server:
            server_box.append(server)
            lead_events, child_events = await body()
            deadline = time.monotonic() + 60
            while not server.disconnects and time.monotonic() < deadline:
                time.sleep(0.05)
        assert server.disconnects, "the teammate's stream was left open"
        results = [r for r in of(lead_events, EventType.TOOL_RESULT) if r["name"] == "interrupt_agent"]
        assert results and not results[0].get("is_error")
        reasons = [e.value()["reason"] for e in child_events if e.type == EventType.TURN_END]
        assert reasons[0]["kind"] == "aborted"
        # Nothing half-streamed was recorded as the teammate's answer.
        assert all("." * 3 not in message_texts(m) for m in of(child_events, EventType.ASSISTANT_MESSAGE))
