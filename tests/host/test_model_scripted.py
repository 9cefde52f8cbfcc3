"""ScriptedModel: the keyless deterministic adapter (architecture.md §5 script format)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from _agent_kit import echo_tool, make_kit, memory_session
from host_spec.errors import ScriptError
from host_spec.events import EventType
from host_spec.host.models.adapter import ModelRequest
from host_spec.host.models.scripted import EXHAUSTED_TEXT, WAITING_TEXT, ScriptedModel
from host_spec.messages import AssistantMessage, text_block, user_message

SCRIPT = {
    "lead": [
        {"text": "first", "tool_calls": [{"name": "echo", "arguments": {"text": "a"}}, {"name": "echo"}]},
        {"text": "second"},
    ],
    "worker": [{"text": "w1"}],
}


def _agent(name: str, session_id: str | None = None) -> Any:
    kit = make_kit()
    return kit.registry.create(memory_session(session_id or name), name=name)


def _request(agent: Any, messages: Any = ()) -> ModelRequest:
    return ModelRequest(agent=agent, system="sys", messages=list(messages), tools=[echo_tool()])


async def _answer(model: ScriptedModel, agent: Any, messages: Any = ()) -> Any:
    """One model call, then record the answer the way the loop would (one assistant message)."""
    reply = await model.complete(_request(agent, messages))
    content = [text_block(reply["text"])] if reply["text"] else []
    content += [{"type": "tool-call", **call} for call in reply["tool_calls"]]
    agent.session.append(EventType.ASSISTANT_MESSAGE, AssistantMessage(turn=1, step=1, content=content))
    return reply


class TestSteps:
    async def test_each_call_consumes_the_next_step_of_that_agent_name(self) -> None:
        """Scripts are keyed by agent name and walked in order."""
        model = ScriptedModel.from_mapping(SCRIPT)
        lead, worker = _agent("lead"), _agent("worker")
        first = await _answer(model, lead)
        assert first["text"] == "first"
        assert first["tool_calls"] == [
            {"id": "lead-1.1", "name": "echo", "arguments": '{"text":"a"}'},
            {"id": "lead-1.2", "name": "echo", "arguments": "{}"},
        ]
        assert (await _answer(model, worker)) == {"text": "w1", "tool_calls": []}
        assert (await _answer(model, lead)) == {"text": "second", "tool_calls": []}

    async def test_a_step_reports_its_usage(self) -> None:
        """``usage`` is answered as the step's token usage, as a server would report it."""
        model = ScriptedModel.from_mapping({"lead": [{"text": "paid", "usage": {"input_tokens": 9, "output_tokens": 2}}]})
        assert (await _answer(model, _agent("lead"))) == {
            "text": "paid", "tool_calls": [], "usage": {"input_tokens": 9, "output_tokens": 2}}

    async def test_exhausted_script_answers_plain_text(self) -> None:
        """After the last step (or for an unscripted name) the model ends turns with plain text."""
        model = ScriptedModel.from_mapping(SCRIPT)
        worker, stranger = _agent("worker"), _agent("stranger")
        await _answer(model, worker)
        assert (await _answer(model, worker)) == {"text": EXHAUSTED_TEXT, "tool_calls": []}
        assert (await _answer(model, stranger)) == {"text": EXHAUSTED_TEXT, "tool_calls": []}
        assert model.position(worker) == 1

    async def test_position_is_derived_from_the_agents_own_log(self) -> None:
        """A fresh adapter (new process) continues a resumed agent where its log stopped."""
        lead = _agent("lead")
        await _answer(ScriptedModel.from_mapping(SCRIPT), lead)
        assert (await _answer(ScriptedModel.from_mapping(SCRIPT), lead))["text"] == "second"

    async def test_inherited_prefix_does_not_count(self) -> None:
        """A fork child's inherited assistant messages are not its own script steps."""
        parent = _agent("lead", "p")
        await _answer(ScriptedModel.from_mapping(SCRIPT), parent)
        kit = make_kit()
        seed = list(parent.session.events)
        from host_spec.events import SessionHeader
        from host_spec.host.store.session import Session

        child_session = Session(SessionHeader(id="c", created_at=0, seed_length=len(seed)), events=seed)
        child = kit.registry.create(child_session, name="lead")
        assert ScriptedModel.from_mapping(SCRIPT).position(child) == 0

    async def test_requests_are_recorded(self) -> None:
        """Every call is recorded with what the model saw and answered."""
        model = ScriptedModel.from_mapping(SCRIPT)
        lead = _agent("lead")
        messages = [{"role": "user", "content": [text_block("hello")]}]
        reply = await model.complete(_request(lead, messages))
        (recorded,) = model.requests
        assert (recorded.agent_id, recorded.agent_name, recorded.system) == ("lead", "lead", "sys")
        assert recorded.messages == tuple(messages)
        assert recorded.tools == ("echo",)
        assert recorded.reply == reply
        quiet = ScriptedModel.from_mapping(SCRIPT, record=False)
        await quiet.complete(_request(lead))
        assert quiet.requests == []


class TestWhen:
    async def test_gated_step_waits_without_being_consumed(self) -> None:
        """Until the substring appears, the answer is a short text and the step stays next."""
        model = ScriptedModel.from_mapping({"w": [{"when": "GO", "text": "going"}, {"text": "after"}]})
        agent = _agent("w")
        assert (await _answer(model, agent)) == {"text": WAITING_TEXT, "tool_calls": []}
        assert (await _answer(model, agent)) == {"text": WAITING_TEXT, "tool_calls": []}
        assert model.position(agent) == 0
        said = [{"role": "user", "content": [text_block("please GO now")]}]
        assert (await _answer(model, agent, said))["text"] == "going"
        assert (await _answer(model, agent, said))["text"] == "after"

    async def test_gate_matches_tool_results(self) -> None:
        """Any message counts, tool results included."""
        model = ScriptedModel.from_mapping({"w": [{"when": "task-7", "text": "seen"}]})
        agent = _agent("w")
        result = {"role": "tool", "call_id": "x", "name": "t", "content": [text_block('{"id":"task-7"}')]}
        assert (await _answer(model, agent, [result]))["text"] == "seen"

    async def test_gate_ignores_the_adapters_own_placeholder(self) -> None:
        """A ``when`` that the waiting text itself contains is not opened by it."""
        model = ScriptedModel.from_mapping({"w": [{"when": "waiting", "text": "opened"}]})
        agent = _agent("w")
        placeholder = {"role": "assistant", "content": [text_block(WAITING_TEXT)]}
        assert (await _answer(model, agent, [placeholder]))["text"] == WAITING_TEXT
        real = {"role": "user", "content": [text_block("stop waiting")]}
        assert (await _answer(model, agent, [placeholder, real]))["text"] == "opened"

    async def test_gated_worker_reacts_to_a_later_message_in_a_real_loop(self) -> None:
        """Driven by the loop: the first turn waits, a message with the substring opens the step."""
        kit = make_kit({"w": [{"when": "deploy", "text": "deploying"}]})
        agent = kit.registry.create(memory_session("w"), name="w")
        agent.followup(user_message("hello"))
        await agent.when_idle()
        agent.followup(user_message("please deploy"))
        await agent.when_idle()
        assert [r.reply["text"] for r in kit.model.requests] == [WAITING_TEXT, "deploying"]


class TestScriptErrors:
    @pytest.mark.parametrize(
        ("script", "path"),
        [
            ([], "$"),
            ({"lead": {}}, "lead"),
            ({"lead": ["x"]}, "lead[0]"),
            ({"lead": [{}, {}, {"txt": "typo"}]}, "lead[2].txt"),
            ({"lead": [{"text": 1}]}, "lead[0].text"),
            ({"lead": [{"when": 3}]}, "lead[0].when"),
            ({"lead": [{"tool_calls": {}}]}, "lead[0].tool_calls"),
            ({"lead": [{"tool_calls": [1]}]}, "lead[0].tool_calls[0]"),
            ({"lead": [{}, {}, {"tool_calls": [{"arguments": {}}]}]}, "lead[2].tool_calls[0].name"),
            ({"lead": [{"tool_calls": [{"name": ""}]}]}, "lead[0].tool_calls[0].name"),
            ({"lead": [{"tool_calls": [{"name": "t", "arguments": []}]}]}, "lead[0].tool_calls[0].arguments"),
            ({"lead": [{"tool_calls": [{"name": "t", "id": "x"}]}]}, "lead[0].tool_calls[0].id"),
            ({"lead": [{"usage": []}]}, "lead[0].usage"),
            ({"lead": [{"usage": {}}]}, "lead[0].usage"),
            ({"lead": [{"usage": {"input": 3}}]}, "lead[0].usage.input"),
            ({"lead": [{"usage": {"output_tokens": -1}}]}, "lead[0].usage.output_tokens"),
            ({"lead": [{"usage": {"input_tokens": True}}]}, "lead[0].usage.input_tokens"),
        ],
    )
    def test_malformed_script_names_the_path(self, script: Any, path: str) -> None:
        """Every malformed item raises ScriptError (code SCRIPT_INVALID) naming where it is."""
        with pytest.raises(ScriptError) as info:
            ScriptedModel.from_mapping(script)
        assert info.value.path == path
        assert info.value.code == "SCRIPT_INVALID"
        assert str(info.value).endswith(f"@ {path}")

    def test_from_file_reads_a_valid_script(self, tmp_path: Path) -> None:
        """A JSON file loads like a mapping."""
        path = tmp_path / "script.json"
        path.write_text('{"lead": [{"text": "hi"}]}')
        model = ScriptedModel.from_file(path)
        assert model.steps["lead"][0].text == "hi"

    def test_bad_json_names_the_file(self, tmp_path: Path) -> None:
        """Invalid JSON is a ScriptError naming the file."""
        path = tmp_path / "bad.json"
        path.write_text('{"lead": [')
        with pytest.raises(ScriptError) as info:
            ScriptedModel.from_file(path)
        assert info.value.path == str(path)
        assert "not valid JSON" in str(info.value)

    def test_missing_file_is_a_script_error(self, tmp_path: Path) -> None:
        """An unreadable file is reported as a ScriptError too."""
        with pytest.raises(ScriptError) as info:
            ScriptedModel.from_file(tmp_path / "missing.json")
        assert "cannot read script" in str(info.value)


class TestReplyShape:
    """``parse_reply`` guards the loop against adapter bugs (host_spec.host.models.adapter)."""

    @pytest.mark.parametrize(
        ("reply", "fragment"),
        [
            ("text", "must be an object"),
            ({"text": 3}, "text must be a string"),
            ({"tool_calls": "x"}, "tool_calls must be a list"),
            ({"tool_calls": [{"name": ""}]}, "tool_calls[0] needs a name"),
            ({"tool_calls": [{"name": "t", "arguments": 5}]}, "tool_calls[0].arguments must be JSON text"),
        ],
    )
    def test_malformed_replies_are_model_errors(self, reply: Any, fragment: str) -> None:
        """Each shape violation is a ModelError with code MODEL_BAD_REPLY."""
        from host_spec.errors import ModelError
        from host_spec.host.models.adapter import parse_reply

        with pytest.raises(ModelError) as info:
            parse_reply(reply)
        assert info.value.code == "MODEL_BAD_REPLY" and fragment in str(info.value)

    def test_object_arguments_and_missing_ids_are_normalised(self) -> None:
        """Argument objects become JSON text; a call without id gets a fresh one."""
        from host_spec.host.models.adapter import parse_reply, tool_definitions

        reply = parse_reply({"tool_calls": [{"name": "t", "arguments": {"a": 1}}, {"id": "x", "name": "u"}]})
        assert reply.text == ""
        assert reply.tool_calls[0].arguments == '{"a":1}' and reply.tool_calls[0].id.startswith("call-")
        assert (reply.tool_calls[1].id, reply.tool_calls[1].arguments) == ("x", "")
        (definition,) = tool_definitions([echo_tool()])
        assert definition["name"] == "echo" and definition["parameters"]["required"] == ["text"]
