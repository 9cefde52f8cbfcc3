"""Compaction on the ``openai:`` adapter against a real chat-completions server on 127.0.0.1.

The window comes from the spec (``?context=N``), the estimate from the usage the
server reports, and the summary from the same server, asked without tools.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from host_spec.events import ContextCompaction, EventType
from host_spec.host.agents.compaction import SUMMARY_SYSTEM
from kit_model_server import ModelServer, calls, text
from kit_notes import KEY, KEY_ENV, run_prompt, spec

SUMMARY = "SUMMARY: four notes were written"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def responder() -> Any:
    """Summaries for tool-less requests; otherwise a note per step (four), each reporting a growing prompt."""
    steps = iter(range(1_000))

    def respond(request: dict[str, Any]) -> Any:
        if "tools" not in request:
            return text(SUMMARY, usage=(300, 20))
        step = next(steps)
        if step < 4:
            return calls(("note", {"text": f"[n{step}] " + "x" * 50}), content="y" * 400, usage=(600 * (step + 1), 7))
        return text("done")

    return respond


def wire_pairs_kept(messages: list[dict[str, Any]]) -> bool:
    """Every tool message on the wire answers a call of an earlier assistant message."""
    seen: set[str] = set()
    for message in messages:
        seen |= {c["id"] for c in message.get("tool_calls") or ()}
        if message["role"] == "tool" and message["tool_call_id"] not in seen:
            return False
    return True


async def test_a_reported_window_and_usage_compact_through_the_server(tmp_path: Path) -> None:
    """The summary call goes out without tools; its usage and model land in the record; the next
    request is first message + summary + recent turns, with every tool call answered."""
    with ModelServer(responder()) as server:
        events, notes = await run_prompt(tmp_path, spec(server.base_url, "context=2000"))
    event = next(e for e in events if e.type == EventType.CONTEXT_COMPACTED)  # the fake usage keeps growing
    record = event.decode(ContextCompaction)
    assert (record.summary, record.window, record.model) == (SUMMARY, 2000, "openai:stub-model")
    assert record.usage is not None and (record.usage.input_tokens, record.usage.output_tokens) == (300, 20)
    prior = [e for e in events if e.type == EventType.ASSISTANT_MESSAGE and e.seq < event.seq][-1].value()["usage"]
    assert record.estimated_tokens >= prior["input_tokens"] + prior["output_tokens"] >= 0.8 * 2000
    index = next(i for i, r in enumerate(server.requests) if "tools" not in r)
    summary_request, after = server.requests[index], server.requests[index + 1]
    assert [m["role"] for m in summary_request["messages"]] == ["system", "user"]
    assert summary_request["messages"][0]["content"] == SUMMARY_SYSTEM and "[n0]" in summary_request["messages"][1]["content"]
    wire = after["messages"]
    assert wire[0] == {"role": "user", "content": "write a note"} and SUMMARY in wire[1]["content"]  # no system prompt
    assert "[n0]" not in str(wire) and wire_pairs_kept(wire)
    assert len(notes.notes) == 4 and server.requests[-1]["messages"][-1]["role"] == "tool"
