"""A live context is flat: a message adds no object the garbage collector has to walk.

A session's context lives as long as the session, and a busy one holds thousands of
messages. Each full collection walks every tracked object, so a context that kept a
decoded entry, dict and content list per message made every message cost more than
the one before it. These tests pin the shape (no tracked object per message) and
what a model still receives: the messages, decoded, equal to the log's.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest

from _agent_kit import memory_session
from host_spec.events import EventType
from host_spec.host.agents.context import Conversation, Messages
from host_spec.messages import AssistantMessage, ToolResultMessage, text_block, user_message

#: Tracked objects a context may gain while it grows by a thousand messages (a few
#: containers that grow in place, an interpreter cache), far below one per message.
SLACK = 50


def tracked() -> int:
    """GC-tracked objects alive after a full collection."""
    gc.collect()
    return len(gc.get_objects())


def append_turn(session: Any, index: int) -> None:
    """A user message, an assistant message calling a tool, and the tool's result."""
    session.append(EventType.USER_MESSAGE, user_message(f"message {index}", id=f"u{index}"))
    call = {"type": "tool-call", "id": f"c{index}", "name": "echo", "arguments": {"n": index}}
    session.append(EventType.ASSISTANT_MESSAGE,
                   AssistantMessage(turn=index, step=1, content=[text_block(f"answer {index}"), call]))
    session.append(EventType.TOOL_RESULT,
                   ToolResultMessage(turn=index, step=1, call_id=f"c{index}", name="echo", content=[text_block(str(index))]))


def expected(session: Any) -> list[dict[str, Any]]:
    """The documented event -> message mapping, read from the log."""
    out = []
    for event in session.events:
        value = event.value()
        if event.type == EventType.USER_MESSAGE:
            out.append(value)
        elif event.type == EventType.ASSISTANT_MESSAGE and value.get("content"):
            out.append({"role": "assistant", **value})
        elif event.type == EventType.TOOL_RESULT:
            out.append({"role": "tool", **value})
    return out


class TestFlatContext:
    def test_a_growing_context_adds_no_tracked_object_per_message(self) -> None:
        """3,000 more messages folded: the tracked objects stay within a constant slack."""
        session = memory_session("flat")
        conversation = Conversation(session)
        for index in range(10):
            append_turn(session, index)
        conversation.messages()
        before = tracked()
        for index in range(10, 1010):
            append_turn(session, index)
        messages = conversation.messages()
        assert len(messages) == 3030
        assert tracked() - before < SLACK
        assert list(messages) == expected(session)

    def test_the_sizes_follow_the_payloads(self) -> None:
        """The context's size is the bytes of its events' payloads, message by message."""
        session = memory_session("sizes")
        conversation = Conversation(session)
        append_turn(session, 1)
        conversation.fold()
        assert [entry.size for entry in conversation.entries] == [len(e.data) for e in session.events]
        assert conversation.size == sum(len(e.data) for e in session.events)

    def test_an_assistant_message_without_content_adds_no_entry(self) -> None:
        """An empty answer (an interrupted step) is not in the context; its reported usage is kept."""
        session = memory_session("empty")
        conversation = Conversation(session)
        append_turn(session, 1)
        session.append(EventType.ASSISTANT_MESSAGE, AssistantMessage(
            turn=2, step=1, content=[], interrupted=True, usage={"input_tokens": 7, "output_tokens": 2}))
        assert len(conversation.messages()) == 3 and conversation.usage_tokens == (9, conversation.size)


class TestMessages:
    def test_a_snapshot_never_sees_later_messages(self) -> None:
        """``messages()`` is frozen at its length: later appends show only in a new snapshot."""
        session = memory_session("snap")
        conversation = Conversation(session)
        append_turn(session, 1)
        first = conversation.messages()
        append_turn(session, 2)
        later = conversation.messages()
        assert (len(first), len(later)) == (3, 6)
        assert list(first) == expected(session)[:3] and first == later[:3] and later == expected(session)
        assert repr(first) == "<messages 3>"

    def test_indexes_slices_and_equality_read_like_a_list(self) -> None:
        """Negative indexes, out-of-range errors, slices as tuples, equality with lists and tuples."""
        session = memory_session("read")
        conversation = Conversation(session)
        for index in range(3):
            append_turn(session, index)
        messages, want = conversation.messages(), expected(session)
        assert messages[-1] == want[-1] and messages[0] == want[0] and messages[4] == want[4]
        assert messages[2:7:2] == tuple(want[2:7:2]) and messages[7:2] == ()
        for wrong in (9, -10):
            with pytest.raises(IndexError):
                messages[wrong]
        assert messages == tuple(want) and messages != want[:-1] and messages != want[:-1] + [{"role": "user"}]
        assert messages.__eq__("text") is NotImplemented
        assert isinstance(messages, Messages)

    def test_every_read_is_a_fresh_message(self) -> None:
        """A reader that edits a message it was given changes nothing the context keeps."""
        session = memory_session("fresh")
        conversation = Conversation(session)
        append_turn(session, 1)
        message = conversation.messages()[1]
        message["content"].append(text_block("edited"))  # type: ignore[index]
        message["role"] = "user"  # type: ignore[index]
        assert conversation.messages()[1] == expected(session)[1]
