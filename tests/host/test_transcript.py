"""Transcript and log-line rendering of events."""

from __future__ import annotations

import types

import msgspec

from host_spec.events import Cause, Event, EventType, encode_data
from host_spec.host.cli.transcript import Transcript, format_event, render_event
from host_spec.messages import AssistantMessage, ToolResultMessage, user_message


def event(type: str, data: object, cause: Cause | None = None) -> Event:
    return Event(1, 0, type, encode_data(data), cause)


class TestRenderEvent:
    def test_user_messages_show_their_source(self) -> None:
        """User messages print their text; non-user sources are named."""
        assert render_event("lead", event(EventType.USER_MESSAGE, user_message("hi\nthere"))) == [
            "[lead] user: hi",
            "[lead] user: there",
        ]
        team = user_message("hello", source={"kind": "team-message"})
        assert render_event("bob", event(EventType.USER_MESSAGE, team)) == ["[bob] user (team-message): hello"]

    def test_assistant_text_only_when_present(self) -> None:
        """Assistant text prints; a step with only tool calls prints nothing here."""
        said = AssistantMessage(turn=1, step=1, content=[{"type": "text", "text": "ok"}])
        silent = AssistantMessage(turn=1, step=1, content=[{"type": "tool-call", "id": "c", "name": "x", "arguments": "{}"}])
        assert render_event("lead", event(EventType.ASSISTANT_MESSAGE, said)) == ["[lead] assistant: ok"]
        assert render_event("lead", event(EventType.ASSISTANT_MESSAGE, silent)) == []

    def test_tool_calls_and_results(self) -> None:
        """Tool calls show their arguments; results their text, errors marked."""
        call = {"turn": 1, "step": 1, "call_id": "c", "name": "echo", "arguments": '{"a":1}'}
        assert render_event("lead", event(EventType.TOOL_CALL, call)) == ['[lead] tool call echo {"a":1}']
        ok = ToolResultMessage(turn=1, step=1, call_id="c", name="echo", content=[{"type": "text", "text": "{}"}])
        bad = msgspec.structs.replace(ok, is_error=True, content=[{"type": "text", "text": "Error: no"}])
        assert render_event("lead", event(EventType.TOOL_RESULT, ok)) == ["[lead] tool result echo {}"]
        assert render_event("lead", event(EventType.TOOL_RESULT, bad)) == ["[lead] tool result echo (error) Error: no"]

    def test_only_abnormal_turn_ends(self) -> None:
        """A completed turn prints nothing; any other end prints its reason."""
        assert render_event("lead", event(EventType.TURN_END, {"turn": 1, "reason": {"kind": "completed"}})) == []
        assert render_event("lead", event(EventType.TURN_END, {"turn": 1, "reason": {"kind": "aborted"}})) == [
            '[lead] turn ended: {"kind":"aborted"}'
        ]
        assert render_event("lead", event("team/task", {})) == []


class TestFormatEvent:
    def test_log_line_with_and_without_cause(self) -> None:
        """``dsh log`` lines carry seq, type, data and the non-empty cause parts."""
        assert format_event(event("x/y", {"a": 1})) == '    1 x/y {"a":1}'
        assert format_event(event("x/y", {}, Cause())) == "    1 x/y {}"
        caused = event("x/y", {}, Cause(agent_id="lead-1", call_id="c1", tool="echo"))
        assert format_event(caused) == "    1 x/y {}  (agent=lead-1 call=c1 tool=echo)"


class TestTranscriptPlugin:
    def test_names_come_from_agent_creation(self) -> None:
        """Lines use the created agent's name, or the fallback before creation."""
        lines: list[str] = []
        transcript = Transcript(write=lines.append, fallback=lambda session: "early")
        session = types.SimpleNamespace(id="s1")
        transcript.dsh_session_event(session, event(EventType.USER_MESSAGE, user_message("a")))
        transcript.dsh_agent_created(types.SimpleNamespace(id="s1", name="alice"))
        transcript.dsh_session_event(session, event(EventType.USER_MESSAGE, user_message("b")))
        assert lines == ["[early] user: a", "[alice] user: b"]
