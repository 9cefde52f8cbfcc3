"""Transcript additions for the team demo: framed Team mail reads as one line; cold resumes are marked."""

from __future__ import annotations

import types

from host_spec.events import Event, EventType, encode_data
from host_spec.host.cli.transcript import Transcript, render_event
from host_spec.messages import text_block, user_message


def event(type: str, data: object) -> Event:
    return Event(1, 0, type, encode_data(data), None)


class TestUserText:
    def test_adjacent_text_blocks_are_separated(self) -> None:
        """A framing block and the sender's text get one space between them, never a glued word."""
        framed = user_message([text_block("Team message m-1 from bob:"), text_block("hi")], source={"kind": "team-message"})
        assert render_event("ann", event(EventType.USER_MESSAGE, framed)) == [
            "[ann] user (team-message): Team message m-1 from bob: hi"
        ]

    def test_blocks_ending_in_whitespace_or_empty_are_kept_as_is(self) -> None:
        """A block that already ends in whitespace (the identity reminder) and empty blocks add no space."""
        blocks = [text_block("<reminder>\n\n"), text_block(""), {"type": "image"}, text_block("task")]
        assert render_event("bob", event(EventType.USER_MESSAGE, user_message(blocks))) == [
            "[bob] user: <reminder>",
            "[bob] user: ",
            "[bob] user: task",
        ]


class TestResumeMarker:
    def test_only_a_cold_resumed_child_is_marked(self) -> None:
        """``(resumed from disk)`` is written for a child reloaded with source ``resume``, not for roots or new agents."""
        lines: list[str] = []
        transcript = Transcript(write=lines.append, fallback=lambda session: "?")
        child = types.SimpleNamespace(id="c", name="bob", parent_id="root")
        root = types.SimpleNamespace(id="root", name="lead", parent_id=None)
        transcript.dsh_agent_session_start(child, "resume")
        transcript.dsh_agent_session_start(child, "startup")
        transcript.dsh_agent_session_start(root, "resume")
        assert lines == ["[bob] (resumed from disk)"]
