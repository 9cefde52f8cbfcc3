"""The ``llm:`` adapter in-process: a scripted ``llm`` model driven by our loop, tools run by us, errors typed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import llm
import pytest
from llm.parts import ToolCallPart, ToolResultPart
from llm_scripted_plugin import (
    REQUESTS,
    APITimeoutError,
    KeyedAsync,
    NoToolsAsync,
    ProviderStatusError,
    ScriptedAsync,
    SyncScripted,
)

from host_spec.errors import ModelError
from host_spec.events import EventType
from host_spec.messages import user_message
from host_spec.records import CancelCause
from host_spec.host.models.llm_adapter import build, classify
from host_spec.host.models.llm_wire import (
    call_arguments,
    encode_arguments,
    parse_settings,
    to_llm_messages,
    to_llm_turn,
    usage_from_llm,
)
from kit_llm import KEY, adapter, step
from kit_notes import of, open_notes, turn_end

WHERE = "llm model m"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_USER_PATH", str(tmp_path / "llm-user"))  # never the user's own llm directory
    monkeypatch.delenv("DSH_TEST_LLM_LOG", raising=False)
    REQUESTS.clear()


async def run(tmp_path: Path, model: Any, prompt: str = "[lead] write a note") -> tuple[list[Any], list[str]]:
    host, notes = await open_notes(tmp_path / "data", model)
    try:
        agent = await host.run(prompt)
        return list(agent.session.events), notes.notes
    finally:
        await host.close()


class TestConversation:
    async def test_a_streamed_tool_call_runs_in_our_loop_with_usage_recorded(self, tmp_path: Path) -> None:
        script = {"[lead]": [step("I will note it.", ("note", {"text": "via llm"}), usage=(20, 7), chunks=4,
                                  details={"prompt_tokens_details": {"cached_tokens": 5}}),
                             step("noted", usage=(11, 3))]}
        events, notes = await run(tmp_path, adapter(script))
        assert notes == ["via llm"]  # our tool ran: llm was given no implementation to run
        first, second = of(events, EventType.ASSISTANT_MESSAGE)
        assert first["content"][0] == {"type": "text", "text": "I will note it."}  # four chunks, one text
        call = first["content"][1]
        assert (call["name"], json.loads(call["arguments"]), call["id"]) == ("note", {"text": "via llm"}, "tc-lead-0-0")
        assert first["usage"] == {"input_tokens": 20, "output_tokens": 7, "cached_tokens": 5}
        assert first["model"] == "llm:dsh-scripted" and second["usage"] == {"input_tokens": 11, "output_tokens": 3}
        assert turn_end(events) == {"kind": "completed"}
        asked = [r for r in REQUESTS if "roles" in r]
        assert asked[0]["tools"] == ["note"] and asked[0]["stream"] is True
        assert asked[1]["roles"] == ["user", "assistant", "tool"]  # no profile: an empty system prompt is left out
        assert asked[1]["parts"][1] == ["TextPart", "ToolCallPart"] and asked[1]["parts"][2] == ["ToolResultPart"]

    async def test_malformed_arguments_get_invalid_args_and_are_replayed_raw(self, tmp_path: Path) -> None:
        script = {"[lead]": [step("", ("note", '{"text": "oops')), step("", ("note", {"text": "fixed"})), step("ok")]}
        model = ScriptedAsync(script)
        events, notes = await run(tmp_path, adapter(script, model=model))
        assert notes == ["fixed"]
        assert [r.get("error", {}).get("code") for r in of(events, EventType.TOOL_RESULT)] == ["INVALID_ARGS", None]
        assert of(events, EventType.ASSISTANT_MESSAGE)[0]["content"][0]["arguments"] == '{"text": "oops'

    async def test_non_streamed_mode_and_a_model_reporting_no_usage(self, tmp_path: Path) -> None:
        events, _ = await run(tmp_path, adapter({"[lead]": [step("plain answer")]}, "stream=false"))
        reply = of(events, EventType.ASSISTANT_MESSAGE)[0]
        assert reply["content"] == [{"type": "text", "text": "plain answer"}] and "usage" not in reply
        assert REQUESTS[0]["stream"] is False

    async def test_a_model_without_tool_support_fails_the_step_with_a_clear_code(self, tmp_path: Path) -> None:
        model = NoToolsAsync({"[lead]": [step("never asked")]})
        events, _ = await run(tmp_path, adapter({}, model=model))
        reason = turn_end(events)
        assert reason["kind"] == "error" and reason["error"]["code"] == "MODEL_TOOLS_UNSUPPORTED"
        assert "supports_tools" in reason["error"]["message"] and "llm models list --tools" in reason["error"]["message"]
        assert REQUESTS == []  # refused before the model was asked

    async def test_a_transient_error_is_retried_then_answered(self, tmp_path: Path) -> None:
        script = {"[lead]": [step("after retries", error={"status": 429, "message": "slow down", "retry_after": "0"},
                                  error_times=2)]}
        events, _ = await run(tmp_path, adapter(script, "backoff=0.01"))
        assert turn_end(events) == {"kind": "completed"}
        assert of(events, EventType.ASSISTANT_MESSAGE)[0]["content"][0]["text"] == "after retries"
        assert len(REQUESTS) == 3

    async def test_retries_used_up_end_the_turn_with_the_typed_code(self, tmp_path: Path) -> None:
        script = {"[lead]": [step(error={"status": 503, "message": f"overloaded, key {KEY}"})]}
        model = ScriptedAsync(script)
        events, _ = await run(tmp_path, adapter(script, "retries=2&backoff=0.01", model=model))
        error = turn_end(events)["error"]
        assert error["code"] == "MODEL_UNAVAILABLE" and error["message"].endswith("(after 3 attempts)")
        assert len(REQUESTS) == 3

    async def test_a_cancelled_turn_closes_the_plugins_stream_promptly(self, tmp_path: Path) -> None:
        host, _ = await open_notes(tmp_path / "data", adapter({"[lead]": [step("slow " * 50, chunks=50, sleep=30)]}))
        try:
            session = await host.create_session()
            agent = host.start_agent(session, name="lead")
            agent.followup(user_message("[lead] go"))
            while not REQUESTS:
                await asyncio.sleep(0.01)
            agent.cancel(CancelCause("user"))
            await asyncio.wait_for(host.quiesce(), 20)  # a stream left open would sleep 30 s per chunk
            events = list(agent.session.events)
        finally:
            await host.close()
        assert turn_end(events)["kind"] == "aborted"
        assert {"closed": 0, "tag": "[lead]"} in REQUESTS


class TestSyncModel:
    async def test_a_sync_model_runs_in_a_thread_with_tools_and_usage(self, tmp_path: Path) -> None:
        script = {"[lead]": [step("noting", ("note", {"text": "from a thread"}), usage=(6, 2)), step("done")]}
        events, notes = await run(tmp_path, adapter({}, model=SyncScripted(script)))
        assert notes == ["from a thread"]
        first = of(events, EventType.ASSISTANT_MESSAGE)[0]
        assert first["content"][0] == {"type": "text", "text": "noting"}
        assert first["usage"] == {"input_tokens": 6, "output_tokens": 2} and first["model"] == "llm:dsh-synconly"

    async def test_a_cancel_ends_the_turn_at_once_and_the_thread_stops_at_its_next_chunk(self, tmp_path: Path) -> None:
        model = SyncScripted({"[lead]": [step("one two three four five six", sleep=0.3)]})
        host, _ = await open_notes(tmp_path / "data", adapter({}, model=model))
        try:
            session = await host.create_session()
            agent = host.start_agent(session, name="lead")
            agent.followup(user_message("[lead] go"))
            while not REQUESTS:
                await asyncio.sleep(0.01)
            agent.cancel(CancelCause("user"))
            await asyncio.wait_for(host.quiesce(), 20)  # not the 1.8 s the whole reply takes
            events = list(agent.session.events)
        finally:
            await host.close()
        assert turn_end(events)["kind"] == "aborted"
        for _ in range(200):  # the thread notices at its next chunk (0.3 s) and closes the plugin's generator
            if any("closed" in r for r in REQUESTS):
                break
            await asyncio.sleep(0.05)
        assert {"closed": 0, "tag": "[lead]", "thread": True} in REQUESTS

    async def test_a_failure_in_the_thread_is_classified(self, tmp_path: Path) -> None:
        model = SyncScripted({"[lead]": [step(error={"status": 400, "message": "bad request"})]})
        events, _ = await run(tmp_path, adapter({}, model=model))
        assert turn_end(events)["error"]["code"] == "MODEL_REQUEST_REJECTED"


class TestClassify:
    @pytest.mark.parametrize(("exc", "retryable", "code"), [
        (ProviderStatusError(401, f"bad key {KEY}"), False, "MODEL_AUTH"),
        (ProviderStatusError(429, "slow down"), True, "MODEL_RATE_LIMITED"),
        (ProviderStatusError(503, "down"), True, "MODEL_UNAVAILABLE"),
        (ProviderStatusError(408, "late"), True, "MODEL_UNAVAILABLE"),
        (ProviderStatusError(404, "no such model"), False, "MODEL_UNAVAILABLE"),
        (ProviderStatusError(400, "maximum context length is 8192 tokens"), False, "MODEL_CONTEXT_OVERFLOW"),
        (ProviderStatusError(400, f"bad request {KEY}"), False, "MODEL_REQUEST_REJECTED"),
        (APITimeoutError("timed out"), True, "MODEL_UNAVAILABLE"),
        (ConnectionRefusedError("refused"), True, "MODEL_UNAVAILABLE"),
        (llm.ModelError("the model refused"), False, "MODEL_REQUEST_REJECTED"),
        (llm.NeedsKeyException("No key found - add one using 'llm keys set x'"), False, "MODEL_AUTH"),
        (ValueError("Expecting value: line 1"), False, "MODEL_BAD_REPLY"),
        (RuntimeError("surprise"), True, "MODEL_UNAVAILABLE"),
        (ModelError("ours", code="MODEL_BAD_REPLY"), False, "MODEL_BAD_REPLY"),
    ])
    def test_each_failure_maps_to_its_code_and_never_shows_the_key(self, exc: Exception, retryable: bool,
                                                                   code: str) -> None:
        again, _, error = classify(exc, where=WHERE, key=KEY)
        assert (again, error.code) == (retryable, code)
        assert KEY not in error.message

    def test_an_auth_failure_carries_no_provider_text(self) -> None:
        _, _, error = classify(ProviderStatusError(403, "key sk-abc... is invalid"), where=WHERE, key="")
        assert error.message == f"{WHERE} refused the API key (HTTP 403)"

    def test_retry_after_is_honoured_and_capped(self) -> None:
        assert classify(ProviderStatusError(429, "x", "2.5"), where=WHERE, key="")[1] == 2.5
        assert classify(ProviderStatusError(429, "x", "9999"), where=WHERE, key="")[1] == 60.0
        assert classify(ProviderStatusError(429, "x", "soon"), where=WHERE, key="")[1] is None


class TestWire:
    def test_settings_parse_and_refuse_bad_options(self) -> None:
        s = parse_settings("gpt-4o-mini?stream=false&retries=0&backoff=0.5&context=8000&o.temperature=0.2")
        assert (s.model, s.stream, s.retries, s.backoff, s.context) == ("gpt-4o-mini", False, 0, 0.5, 8000)
        assert s.options == {"temperature": "0.2"}
        assert parse_settings("openrouter/meta/llama:free").model == "openrouter/meta/llama:free"
        for bad, fragment in [("", "model id"), ("m?key=sk-1", "refused"), ("m?stream=maybe", "true or false"),
                              ("m?retries=99", "out of range"), ("m?context=lots", "not a number"),
                              ("m?colour=red", "unknown llm spec option")]:
            with pytest.raises(ModelError, match=fragment) as info:
                parse_settings(bad)
            assert info.value.code == "MODEL_SPEC_INVALID"

    def test_consecutive_tool_results_become_one_tool_message(self) -> None:
        calls = [{"type": "tool-call", "id": "a", "name": "note", "arguments": '{"text": "1"}'},
                 {"type": "tool-call", "id": "b", "name": "note", "arguments": "not json"}]
        messages = to_llm_messages("sys", [
            {"role": "user", "content": [{"type": "text", "text": "Team message m1 from bob:"},
                                         {"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": calls},
            {"role": "tool", "call_id": "a", "name": "note", "content": [{"type": "text", "text": "ok"}]},
            {"role": "tool", "call_id": "b", "name": "note", "content": [{"type": "text", "text": "Error: bad"}]},
            {"role": "assistant", "content": []},
        ])
        assert [m.role for m in messages] == ["system", "user", "assistant", "tool"]
        assert messages[1].parts[0].text == "Team message m1 from bob:\nhi"
        first, second = messages[2].parts
        assert isinstance(first, ToolCallPart) and first.arguments == {"text": "1"} and first.tool_call_id == "a"
        assert isinstance(second, ToolCallPart) and second.arguments == {"_raw": "not json"}
        results = messages[3].parts
        assert all(isinstance(p, ToolResultPart) for p in results)
        assert [(p.tool_call_id, p.output) for p in results] == [("a", "ok"), ("b", "Error: bad")]

    def test_the_turn_splits_off_the_prompt_or_the_tool_results_and_llm_rebuilds_the_whole_chain(self) -> None:
        call = {"type": "tool-call", "id": "a", "name": "note", "arguments": "{}"}
        history = [{"role": "user", "content": [{"type": "text", "text": "first"}]},
                   {"role": "assistant", "content": [call]},
                   {"role": "tool", "call_id": "a", "name": "note", "content": [{"type": "text", "text": "ok"}]}]
        cases = [
            (history, None, [("note", "ok", "a")]),
            ([*history, {"role": "assistant", "content": [{"type": "text", "text": "noted"}]},
              {"role": "user", "content": [{"type": "text", "text": "now the second"}]}], "now the second", []),
            ([{"role": "user", "content": []}], None, []),  # an empty line stays history (llm drops an empty prompt)
        ]
        for messages, prompt, results in cases:
            turn = to_llm_turn("sys", messages)
            assert (turn.prompt, turn.system) == (prompt, "sys")
            assert [(r.name, r.output, r.tool_call_id) for r in turn.tool_results] == results
            # The independent oracle: what llm itself makes of the arguments is the whole conversation.
            built = ScriptedAsync({}).prompt(**turn.kwargs()).prompt
            assert [m.to_dict() for m in built.messages] == [m.to_dict() for m in to_llm_messages("sys", messages)]
            assert (built.prompt, built.system) == (prompt or "", "sys")
        assert to_llm_turn("", []).system is None

    def test_usage_and_arguments(self) -> None:
        assert usage_from_llm(None, None, None) is None
        assert usage_from_llm(5, None, {"cache_read_input_tokens": 2}) == {"input_tokens": 5, "output_tokens": 0,
                                                                          "cached_tokens": 2}
        assert usage_from_llm(5, 1, {"input_tokens_details": {"cached_tokens": 3}})["cached_tokens"] == 3
        assert "cached_tokens" not in usage_from_llm(5, 1, {"other": 1})
        assert call_arguments("[1]") == {"_raw": "[1]"} and call_arguments("") == {}
        assert encode_arguments({"a": 1}) == '{"a":1}' and encode_arguments('{"a": 1') == '{"a": 1'


class TestBuild:
    def test_model_options_are_checked_by_the_model_and_converted(self) -> None:
        built = build(parse_settings("dsh-scripted?o.temperature=0.5"), ScriptedAsync({}))
        assert built.options == {"temperature": 0.5}
        for bad in ("o.temperature=hot", "o.colour=red"):
            with pytest.raises(ModelError, match="refuses its options") as info:
                build(parse_settings(f"dsh-scripted?{bad}"), ScriptedAsync({}))
            assert info.value.code == "MODEL_SPEC_INVALID"

    def test_a_missing_key_names_llm_keys_set_and_a_set_one_is_never_shown(self, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv("DSH_TEST_LLM_KEY", raising=False)
        with pytest.raises(ModelError, match="llm keys set dshtest") as info:
            build(parse_settings("dsh-keyed"), KeyedAsync({}))
        assert info.value.code == "MODEL_AUTH"
        monkeypatch.setenv("DSH_TEST_LLM_KEY", KEY)
        built = build(parse_settings("dsh-keyed"), KeyedAsync({}))
        assert KEY not in repr(built)
