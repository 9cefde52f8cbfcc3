"""The pure chat-completions translation: messages out, replies and streamed chunks in."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from host_spec.errors import ModelError
from host_spec.host.models.openai_settings import parse_settings
from host_spec.host.models.openai_wire import (
    StreamAccumulator,
    WireTool,
    constrained_format,
    native_tools,
    parse_constrained,
    reply_from_completion,
    to_wire_messages,
    usage_from_wire,
)

NOTE = WireTool("note", "Write a note.", {"type": "object", "properties": {"text": {"type": "string"}},
                                          "required": ["text"]})


def user(*texts: str) -> dict[str, Any]:
    return {"role": "user", "id": "m1", "source": {"kind": "user"}, "content": [{"type": "text", "text": t} for t in texts]}


def assistant(text: str = "", *calls: tuple[str, str, str]) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool-call", "id": i, "name": n, "arguments": a} for i, n, a in calls]
    return {"role": "assistant", "turn": 1, "step": 1, "content": content}


def tool(call_id: str, name: str, text: str, *, error: bool = False) -> dict[str, Any]:
    return {"role": "tool", "turn": 1, "step": 1, "call_id": call_id, "name": name,
            "content": [{"type": "text", "text": text}], "is_error": error}


class TestMessagesOut:
    def test_native_conversation_keeps_raw_arguments_and_call_ids(self) -> None:
        history = [
            user("Team message t1 from bob:", "hi"),
            assistant("calling", ("c1", "note", '{"text": "x"')),  # malformed on purpose: kept byte for byte
            tool("c1", "note", "Error: invalid arguments", error=True),
            {"role": "assistant", "turn": 1, "step": 2, "content": [{"type": "reasoning", "text": "hidden"}]},
        ]
        wire = to_wire_messages("be brief", history)
        assert wire == [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "Team message t1 from bob:\nhi"},
            {"role": "assistant", "content": "calling", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "note", "arguments": '{"text": "x"'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "Error: invalid arguments"},
        ]

    def test_a_call_without_text_sends_null_content_and_no_system_when_empty(self) -> None:
        wire = to_wire_messages("", [assistant("", ("c1", "note", ""))])
        assert wire == [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "note", "arguments": ""}}]}]

    def test_text_blocks_that_end_in_whitespace_are_not_padded(self) -> None:
        assert to_wire_messages("", [user("a\n", "b")])[0]["content"] == "a\nb"

    def test_constrained_replays_calls_as_json_and_results_as_user_text(self) -> None:
        history = [user("go"), assistant("", ("c1", "note", '{"text":"x"}')), tool("c1", "note", "ok"),
                   assistant("", ("c2", "note", "{bad")), assistant("finished")]
        wire = to_wire_messages("sys", history, mode="constrained", tools=[NOTE])
        assert wire[0]["role"] == "system" and wire[0]["content"].startswith("sys\n\nReply with exactly one JSON object.")
        assert "- note: Write a note." in wire[0]["content"]
        assert wire[1:] == [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": '{"tool":"note","arguments":{"text":"x"}}'},
            {"role": "user", "content": "Result of tool note:\nok"},
            {"role": "assistant", "content": '{"tool":"note","arguments":{bad}'},
            {"role": "assistant", "content": '{"answer":"finished"}'},
        ]

    def test_constrained_without_system_prompt_still_describes_tools(self) -> None:
        wire = to_wire_messages("", [assistant()], mode="constrained", tools=[NOTE])
        assert [m["role"] for m in wire] == ["system"]

    def test_native_tools_and_constrained_union(self) -> None:
        assert native_tools([NOTE]) == [{"type": "function", "function": {
            "name": "note", "description": "Write a note.", "parameters": dict(NOTE.parameters)}}]
        other = WireTool("pick", "Pick one.", {"$ref": "#/$defs/P", "$defs": {"P": {"type": "object"}}})
        fmt = constrained_format([NOTE, other])
        schema = fmt["json_schema"]["schema"]
        assert fmt["type"] == "json_schema" and schema["$defs"] == {"P": {"type": "object"}}
        tools = [v["properties"]["tool"]["enum"] for v in schema["anyOf"][:2]]
        assert tools == [["note"], ["pick"]] and schema["anyOf"][1]["properties"]["arguments"] == {"$ref": "#/$defs/P"}
        assert schema["anyOf"][2]["required"] == ["answer"]
        assert "$defs" not in constrained_format([NOTE])["json_schema"]["schema"]


class TestRepliesIn:
    def test_constrained_reply_shapes(self) -> None:
        assert parse_constrained('{"tool": "note", "arguments": {"text": "hi"}}', "c9") == {
            "text": "", "tool_calls": [{"id": "c9", "name": "note", "arguments": '{"text":"hi"}'}]}
        assert parse_constrained(' {"answer": "all done"} ', "c9") == {"text": "all done", "tool_calls": []}
        for bad, cause in (('{"tool": "note", "argu', "not JSON"), ("", "needs"), ('{"x": 1}', "needs"), ("[1]", "needs")):
            with pytest.raises(ModelError, match=cause) as info:
                parse_constrained(bad, "c")
            assert info.value.code == "MODEL_BAD_REPLY"

    def test_usage(self) -> None:
        assert usage_from_wire(None) is None
        assert usage_from_wire({"prompt_tokens": 5, "completion_tokens": 2}) == {"input_tokens": 5, "output_tokens": 2}
        assert usage_from_wire({"prompt_tokens": 5, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 4}}) \
            == {"input_tokens": 5, "output_tokens": 2, "cached_tokens": 4}
        assert usage_from_wire({"prompt_tokens_details": {"cached_tokens": None}}) == {"input_tokens": 0, "output_tokens": 0}

    def test_completion_body(self) -> None:
        body = {"choices": [{"message": {"content": "hi", "tool_calls": [
            {"id": "c1", "function": {"name": "note", "arguments": '{"a"'}}]}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
        assert reply_from_completion(body) == {"text": "hi", "tool_calls": [{"id": "c1", "name": "note", "arguments": '{"a"'}],
                                               "finish_reason": "tool_calls", "usage": {"input_tokens": 3, "output_tokens": 1}}
        assert reply_from_completion({"choices": [{"message": {}}]}) == {"text": "", "tool_calls": []}
        for bad in ({}, {"choices": []}, {"choices": ["x"]}, {"choices": [{"message": {"tool_calls": [{"function": {}}]}}]}):
            with pytest.raises(ModelError) as info:
                reply_from_completion(bad)
            assert info.value.code == "MODEL_BAD_REPLY"


def _chunks_for(calls: list[tuple[str, str, str]], cuts: list[int], text: str) -> list[dict[str, Any]]:
    """A stream of ``calls`` with arguments cut at ``cuts`` and the deltas of different calls interleaved."""
    streams: list[list[dict[str, Any]]] = []
    for index, (call_id, name, arguments) in enumerate(calls):
        points = sorted({c % (len(arguments) + 1) for c in cuts} | {0, len(arguments)})
        pieces = [arguments[a:b] for a, b in zip(points, points[1:])] or [""]
        deltas = [{"index": index, "id": call_id, "function": {"name": name, "arguments": pieces[0]}}]
        deltas += [{"index": index, "function": {"arguments": p}} for p in pieces[1:]]
        streams.append([{"choices": [{"delta": {"tool_calls": [d]}}]} for d in deltas])
    merged: list[dict[str, Any]] = [{"choices": [{"delta": {"content": text[:1]}}]}, {"choices": [{"delta": {"content": text[1:]}}]}]
    while any(streams):
        for stream in streams:
            if stream:
                merged.append(stream.pop(0))
    merged.append({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]})
    merged.append({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}})
    return merged


class TestStream:
    @settings(max_examples=60, deadline=None)
    @given(
        args=st.lists(st.dictionaries(st.text(min_size=1, max_size=5), st.one_of(st.integers(), st.text(max_size=8)),
                                      max_size=3), min_size=1, max_size=3),
        cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=6),
        text=st.text(max_size=10),
    )
    def test_deltas_split_anywhere_reassemble_per_index(self, args: list[dict[str, Any]], cuts: list[int], text: str) -> None:
        calls = [(f"id{i}", f"tool{i}", json.dumps(a)) for i, a in enumerate(args)]
        accumulator = StreamAccumulator()
        for chunk in _chunks_for(calls, cuts, text):
            accumulator.add(chunk)
        reply = accumulator.reply()
        # Oracle: the calls exactly as the server meant them, in index order, arguments byte for byte.
        assert reply["tool_calls"] == [{"id": i, "name": n, "arguments": a} for i, n, a in calls]
        assert [json.loads(c["arguments"]) for c in reply["tool_calls"]] == args
        assert reply["text"] == text and reply["finish_reason"] == "tool_calls"
        assert reply["usage"] == {"input_tokens": 9, "output_tokens": 4}

    def test_no_choices_or_a_nameless_call_is_a_bad_reply(self) -> None:
        empty = StreamAccumulator()
        empty.add({"choices": [], "usage": {"prompt_tokens": 1}})
        nameless = StreamAccumulator()
        nameless.add({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}]})
        for accumulator, cause in ((empty, "no choices"), (nameless, "no function name")):
            with pytest.raises(ModelError, match=cause) as info:
                accumulator.reply()
            assert info.value.code == "MODEL_BAD_REPLY"

    def test_an_out_of_order_index_still_sorts(self) -> None:
        accumulator = StreamAccumulator()
        order = [1, 0]
        random.shuffle(order)
        for index in order:
            accumulator.add({"choices": [{"delta": {"tool_calls": [{"index": index, "id": f"c{index}",
                                                                    "function": {"name": "n", "arguments": "{}"}}]}}]})
        assert [c["id"] for c in accumulator.reply()["tool_calls"]] == ["c0", "c1"]


class TestSpec:
    def test_defaults_and_options(self) -> None:
        plain = parse_settings("gpt-4o-mini", environ={})
        assert (plain.model, plain.tools, plain.base_url, plain.api_key_env, plain.stream) == (
            "gpt-4o-mini", "native", None, "OPENAI_API_KEY", True)
        full = parse_settings("smol?tools=constrained&base_url=http://127.0.0.1:9/v1&api_key_env=&stream=false"
                              "&retries=0&backoff=0.5&timeout=30&max_tokens=64&temperature=0", environ={})
        assert (full.tools, full.base_url, full.api_key_env, full.stream, full.retries, full.backoff, full.timeout,
                full.max_tokens, full.temperature) == ("constrained", "http://127.0.0.1:9/v1", "", False, 0, 0.5, 30.0, 64, 0.0)
        assert parse_settings("m", environ={"OPENAI_BASE_URL": "https://x.example/v1"}).base_url == "https://x.example/v1"
        assert (plain.context, parse_settings("m?context=32768", environ={}).context) == (None, 32768)
        assert parse_settings("m?base_url=http://a:1", environ={"OPENAI_BASE_URL": "https://x/v1"}).base_url == "http://a:1"

    @pytest.mark.parametrize("argument, cause", [
        ("", "needs a model name"),
        ("?tools=native", "needs a model name"),
        ("m?api_key=sk-secret", "refused"),
        ("m?tools=maybe", "native or constrained"),
        ("m?base_url=ftp://x", "http"),
        ("m?base_url=http://user:pw@host/v1", "credentials"),
        ("m?stream=perhaps", "true or false"),
        ("m?retries=99", "out of range"),
        ("m?max_tokens=lots", "not a number"),
        ("m?temperature=3", "out of range"),
        ("m?context=0", "out of range"),
        ("m?colour=blue", "unknown openai spec option 'colour'"),
    ])
    def test_bad_specs_name_the_option(self, argument: str, cause: str) -> None:
        with pytest.raises(ModelError, match=cause) as info:
            parse_settings(argument, environ={})
        assert info.value.code == "MODEL_SPEC_INVALID"
        assert "sk-secret" not in info.value.message
