"""``dsh trace export`` on hand-written logs: usage, failures, crashes, forks, damage, bad input, a live run.

The logs are real JSONL files written by the host's own session store (with its
fsync); each test writes exactly the events it is about, so the expected span is
known from the test itself.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from trace_kit import REPO, TIMEOUT_S, export, parse_otlp, spans, values

from host_spec.events import Cause
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.store.session import NullObserver
from host_spec.host.store.sessions import SessionStore
from host_spec.trace import TraceContext

HOLD_TEAM = Path(__file__).resolve().parents[1] / "hold_team.py"


@pytest.fixture(autouse=True)
def _logging() -> Iterator[None]:
    """``main()`` configures structlog for the process; undo it for the tests that follow."""
    yield
    structlog.reset_defaults()


Writer = Callable[[SessionStore], Any]


def write(data: Path, body: Callable[[SessionStore], list[Any]]) -> None:
    """Create sessions with ``body(store)`` (times 1000, 1010, ...) and store them."""

    async def run() -> None:
        clock = itertools.count(1000, 10)
        store = SessionStore(JsonlStore(data), NullObserver(), clock=lambda: next(clock))
        for session in body(store):
            await store.dispose(session)

    asyncio.run(run())


def document(data: Path, tmp_path: Path, *args: str, code: int = 0, **kwargs: Any) -> dict[str, Any]:
    out = tmp_path / "out.json"
    assert export(data, out, *args, **kwargs) == code
    parse_otlp(out.read_bytes())
    return json.loads(out.read_bytes())


def named(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {span["name"]: span for span in spans(doc)}


def turn(session: Any, number: int) -> None:
    session.append("turn/start", {"turn": number})
    session.append("step/start", {"turn": number, "step": 1})


def reply(number: int, **extra: Any) -> dict[str, Any]:
    return {"turn": number, "step": 1, "content": [{"type": "text", "text": "the secret plan"}], **extra}


def lone(store: SessionStore) -> list[Any]:
    """One root session with one event (a session without events is never stored)."""
    lead = store.create("lead")
    lead.append("note", {})
    return [lead]


def test_a_model_call_carries_its_model_and_token_usage(tmp_path: Path) -> None:
    def body(store: SessionStore) -> list[Any]:
        lead = store.create("lead")
        turn(lead, 1)  # step/start at 1020
        lead.append("user/message", {"id": "m1", "content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}})
        usage = {"input_tokens": 100, "output_tokens": 10, "cached_tokens": 40}
        lead.append("assistant/message", reply(1, usage=usage, model="openai:big"))
        lead.append("step/start", {"turn": 1, "step": 2})
        lead.append("assistant/message", {**reply(1), "step": 2, "interrupted": True})
        lead.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        return [lead]

    write(tmp_path / "d", body)
    spans_by_name = named(document(tmp_path / "d", tmp_path))
    chat = spans_by_name["chat openai:big"]
    assert values(chat) == {
        "gen_ai.operation.name": "chat", "dsh.turn": 1, "dsh.step": 1, "gen_ai.response.model": "openai:big",
        "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 10, "gen_ai.usage.cache_read.input_tokens": 40,
    }
    # The call starts when its input was complete: the step's last user message (1030), not the step start.
    assert (chat["startTimeUnixNano"], chat["endTimeUnixNano"]) == ("1030000000", "1040000000")
    plain = spans_by_name["chat"]
    assert values(plain)["dsh.model.interrupted"] is True and "gen_ai.usage.input_tokens" not in values(plain)
    assert plain["startTimeUnixNano"] == "1050000000"  # its step/start
    (event,) = spans_by_name["turn 1"]["events"]
    assert (event["name"], values(event)) == ("user.message", {"dsh.message.id": "m1", "dsh.message.source": "user"})


def test_a_failed_turn_an_unfinished_call_and_a_crash(tmp_path: Path) -> None:
    def body(store: SessionStore) -> list[Any]:
        lead = store.create("lead")
        turn(lead, 1)
        lead.append("tool/call", {"turn": 1, "step": 1, "call_id": "c1", "name": "bash", "arguments": "{\"cmd\": \"ls\"}"})
        lead.append("tool/result", {"turn": 1, "step": 1, "call_id": "c-unknown", "name": "bash", "content": []})
        error = {"code": "MODEL_TIMEOUT", "message": "the secret plan timed out"}
        lead.append("turn/end", {"turn": 1, "reason": {"kind": "error", "error": error}})  # 1050
        turn(lead, 2)  # a crash: no turn/end before the next turn
        lead.append("turn/start", {"turn": 3})
        lead.append("user/message", {"id": "m", "content": [], "source": {"kind": "plugin", "plugin": "p"}})
        lead.append("turn/end", {"turn": 99, "reason": {"kind": "completed"}})
        lead.append("turn/end", {"turn": 99, "reason": {"kind": "completed"}})  # no open turn: ignored
        lead.append("user/message", {"id": "late", "content": [], "source": {"kind": "user"}})  # outside any turn
        turn(lead, 4)  # still open at the end of the log
        return [lead]

    write(tmp_path / "d", body)
    doc = document(tmp_path / "d", tmp_path)
    by_name = named(doc)
    failed = by_name["turn 1"]
    assert failed["status"] == {"code": 2, "message": "MODEL_TIMEOUT"}
    assert values(failed)["dsh.turn.end_reason"] == "error"
    tool = by_name["execute_tool bash"]
    assert values(tool)["dsh.tool.outcome"] == "unknown" and tool["endTimeUnixNano"] == failed["endTimeUnixNano"]
    assert values(by_name["turn 2"])["dsh.turn.open"] is True
    assert "dsh.turn.open" not in values(by_name["turn 3"])
    assert values(by_name["turn 4"])["dsh.turn.open"] is True
    session = by_name["session lead"]
    assert [values(e)["dsh.message.id"] for e in session["events"]] == ["late"]
    assert b"secret" not in (tmp_path / "out.json").read_bytes()
    with_content = json.dumps(document(tmp_path / "d", tmp_path, "--content"))
    assert "ls" in with_content


def test_a_fork_exports_only_its_own_work_and_unreadable_events_are_counted(tmp_path: Path) -> None:
    def body(store: SessionStore) -> list[Any]:
        lead = store.create("lead")
        turn(lead, 1)
        lead.append("assistant/message", reply(1))
        lead.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        fork = store.create("fork", parent_session="lead", seed=list(lead.events))
        fork.append("subagent/descriptor", {"version": 2, "mode": "continuable", "provider": "fork", "label": "f"})
        fork.append("subagent/descriptor", {"version": "bad"})
        fork.append("turn/start", {"turn": "two"})
        turn(fork, 2)
        fork.append("tool/call", {"turn": 2, "step": 1, "call_id": "k", "name": "grep", "arguments": "{}"})
        fork.append("tool/result", {"turn": 2, "step": 1, "call_id": "k", "name": "grep", "content": [],
                                    "is_error": True})
        fork.append("turn/end", {"turn": 2, "reason": {"kind": "aborted", "reason": {"kind": "user"}}})
        other = store.create("other-root")
        other.append("note", {})
        return [lead, fork, other]

    write(tmp_path / "d", body)
    doc = document(tmp_path / "d", tmp_path, "fork")  # any session of the run exports the whole run
    names = [span["name"] for span in spans(doc)]
    assert names == ["session lead", "turn 1", "chat", "session f", "turn 2", "execute_tool grep"]
    by_name = named(doc)
    assert values(by_name["session f"])["dsh.session.unreadable_events"] == 1  # the turn/start; a bad descriptor only names nothing
    assert by_name["session f"]["parentSpanId"] == by_name["session lead"]["spanId"]
    grep = by_name["execute_tool grep"]
    assert values(grep)["error.type"] == "TOOL_ERROR" and grep["status"]["code"] == 2
    assert values(by_name["turn 2"])["dsh.turn.end_reason"] == "aborted"
    assert [s["name"] for s in spans(document(tmp_path / "d", tmp_path, "other-root"))] == ["session other-root"]


def test_contributors_add_events_links_and_attributes_or_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def body(store: SessionStore) -> list[Any]:
        lead = store.create("lead")
        turn(lead, 1)
        lead.append("tool/call", {"turn": 1, "step": 1, "call_id": "c", "name": "t", "arguments": "{}"})
        lead.append("note", {}, cause=Cause(agent_id="lead", call_id="c"))
        lead.append("tool/result", {"turn": 1, "step": 1, "call_id": "c", "name": "t", "content": []})
        lead.append("note", {}, cause=Cause(agent_id="lead"))
        lead.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        lead.append("note", {}, cause=Cause(agent_id="stranger"))
        lead.append("note", {})
        return [lead]

    def good(trace: TraceContext) -> None:
        notes = [e for e in trace.own_events("lead") if e.type == "note"]
        anchors = [trace.anchor("lead", note) for note in notes]
        for note, span in zip(notes, anchors):
            trace.add_event(span, "note", note.time, {"seq": note.seq, "skipped": None})
        assert trace.turn_span("lead", 1) == trace.turn_span("lead", 7) == anchors[1]
        assert trace.turn_span("lead", 8) is None and trace.turn_span("nobody", 2) is None
        assert trace.log("lead").header.id == "lead" and not trace.content
        trace.add_link(anchors[0], anchors[1], {"why": "test"})
        trace.add_attributes(trace.session_span("lead"), {"gen_ai.agent.id": "not replaced", "extra": 1.5})

    def broken(trace: TraceContext) -> None:
        trace.add_event(trace.session_span("lead"), "never", 0, {})
        trace.session_span("not-in-the-run")

    write(tmp_path / "d", body)
    doc = document(tmp_path / "d", tmp_path, trace_contributors=[("broken", broken), ("good", good)])
    err = capsys.readouterr().err
    assert 'trace contributor "broken" failed and added nothing: KeyError' in err and '"good"' not in err
    by_name = named(doc)
    assert [values(e)["seq"] for e in by_name["execute_tool t"]["events"]] == [4]
    assert [values(e)["seq"] for e in by_name["turn 1"]["events"]] == [6]
    assert [values(e)["seq"] for e in by_name["session lead"]["events"]] == [8, 9]
    (link,) = by_name["execute_tool t"]["links"]
    assert link["spanId"] == by_name["turn 1"]["spanId"] and values(link) == {"why": "test"}
    assert values(by_name["session lead"]) == {"gen_ai.agent.id": "lead", "extra": 1.5}


def test_an_unknown_span_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "d", lone)

    def wrong(trace: TraceContext) -> None:
        span = trace.session_span("lead")
        trace.add_event(type(span)(session_id="lead", seq=7, span_id="0" * 16), "x", 0, {})

    document(tmp_path / "d", tmp_path, trace_contributors=[("wrong", wrong)])
    assert "no span opened by seq 7 of session lead" in capsys.readouterr().err


@pytest.mark.parametrize(("make", "code"), [
    (lambda p: p, "DATA_DIR_NOT_FOUND"),
    (lambda p: (p.write_text("x"), p)[1], "DATA_DIR_UNUSABLE"),
    (lambda p: (p.mkdir(), p)[1], "SESSION_NOT_FOUND"),
])
def test_a_bad_data_dir_is_a_typed_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Any, code: str) -> None:
    data = make(tmp_path / "data")
    assert export(data, tmp_path / "out.json") == 2
    assert capsys.readouterr().err.startswith(f"dsh: {code}: ")
    assert not (tmp_path / "out.json").exists()


def test_an_unknown_session_or_an_unwritable_out_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "d", lone)
    assert export(tmp_path / "d", tmp_path / "out.json", "ghost") == 2
    assert "dsh: SESSION_NOT_FOUND: " in capsys.readouterr().err
    assert export(tmp_path / "d", tmp_path / "missing" / "out.json") == 2
    assert "dsh: TRACE_OUT_UNUSABLE: cannot write" in capsys.readouterr().err
    assert export(tmp_path / "d", tmp_path) == 2
    assert "it is a directory" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


def test_a_damaged_log_exports_its_readable_part_with_status_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def body(store: SessionStore) -> list[Any]:
        lead = store.create("lead")
        turn(lead, 1)
        lead.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        turn(lead, 2)
        lead.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
        child = store.create("child", parent_session="lead")
        lost = store.create("lost", parent_session="lead")
        for session in (child, lost):
            session.append("note", {})
        return [lead, child, lost]

    data = tmp_path / "d"
    write(data, body)
    log = JsonlStore(data).path("lead")
    lines = log.read_bytes().split(b"\n")
    lines[4] = b"{not json"  # the second turn's start: committed lines follow it
    log.write_bytes(b"\n".join(lines))
    JsonlStore(data).path("lost").write_bytes(b"garbage\n")
    doc = document(data, tmp_path, "lead", code=3)  # a damaged header: the newest root cannot be told, so name it
    err = capsys.readouterr().err
    assert "dsh: warning: session lead: SESSION_CORRUPT" in err  # a log without a header is in no run
    by_name = named(doc)
    assert values(by_name["session lead"])["dsh.session.damaged"] is True
    assert [s["name"] for s in spans(doc)] == ["session lead", "turn 1", "session child"]


def test_a_root_that_cannot_be_read_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "d", lone)
    JsonlStore(tmp_path / "d").path("lead").write_bytes(b'{"type":"session","version":99,"id":"lead","created_at":1}\n')
    assert export(tmp_path / "d", tmp_path / "out.json", "lead") == 2
    assert "dsh: SESSION_FORMAT_UNSUPPORTED" in capsys.readouterr().err


def test_a_live_run_is_exported_without_taking_its_lock(tmp_path: Path) -> None:
    """Another process holds the Team (and its sessions' locks) while the export reads its logs."""
    data = tmp_path / "d"
    holder = subprocess.Popen([sys.executable, str(HOLD_TEAM), str(data)], cwd=REPO, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        ready = next((line for line in holder.stdout if line.startswith("ready")), "")  # structlog may print first
        sessions = ready.split()[1:]
        assert sessions, f"holder exited with {holder.poll()}"
        exporter = subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", "trace", "export", "--data-dir",
                                   str(data)], cwd=REPO, capture_output=True, timeout=TIMEOUT_S)
        assert exporter.returncode == 0, exporter.stderr.decode()
        doc = json.loads(exporter.stdout)
        assert sorted(values(s)["gen_ai.agent.id"] for s in spans(doc) if s["name"].startswith("session ")) == sorted(sessions)
        assert any(e["name"] == "team.member" for s in spans(doc) for e in s.get("events", []))
        assert holder.poll() is None  # the Team's process was never disturbed
    finally:
        holder.communicate("", timeout=TIMEOUT_S)


def test_stdout_gets_the_document_and_a_failed_write_leaves_no_file(tmp_path: Path,
                                                                    capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    from host_spec.host.cli.main import main

    write(tmp_path / "d", lone)
    assert main(["trace", "export", "--data-dir", str(tmp_path / "d")]) == 0
    printed = capsysbinary.readouterr().out
    assert [s["name"] for s in spans(json.loads(printed))] == ["session lead"]
    # The temporary file's name (".NAME.XXXXXXXX") is too long for the file system: refused, nothing left.
    out = tmp_path / ("x" * 250)
    assert export(tmp_path / "d", out) == 2
    assert b"dsh: TRACE_OUT_UNUSABLE: cannot write" in capsysbinary.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


def test_content_gives_a_model_call_its_output_as_genai_message_parts(tmp_path: Path) -> None:
    def body(store: SessionStore) -> list[Any]:
        lead = store.create("lead")
        turn(lead, 1)
        content = [
            {"type": "text", "text": "plan"}, {"type": "reasoning", "text": "why"},
            {"type": "tool-call", "id": "a", "name": "grep", "arguments": "{\"pattern\": \"x\"}"},
            {"type": "tool-call", "id": "b", "name": "grep", "arguments": "{not json"},
            {"type": "image", "attachment": {}},
        ]
        lead.append("assistant/message", {"turn": 1, "step": 1, "content": content})
        return [lead]

    write(tmp_path / "d", body)
    assert "gen_ai.output.messages" not in values(named(document(tmp_path / "d", tmp_path))["chat"])
    chat = named(document(tmp_path / "d", tmp_path, "--content"))["chat"]
    assert json.loads(values(chat)["gen_ai.output.messages"]) == [{"role": "assistant", "parts": [
        {"type": "text", "content": "plan"}, {"type": "reasoning", "content": "why"},
        {"type": "tool_call", "id": "a", "name": "grep", "arguments": {"pattern": "x"}},
        {"type": "tool_call", "id": "b", "name": "grep", "arguments": "{not json"},
        {"type": "image"},
    ]}]


def test_a_compaction_is_a_model_call_of_its_own(tmp_path: Path) -> None:
    def body(store: SessionStore) -> list[Any]:
        lead = store.create("lead")
        turn(lead, 1)  # step/start at 1020
        lead.append("context/compacted", {
            "version": 1, "summary": "the secret summary", "first_seq": 1, "kept_from_seq": 2, "summarised": 6,
            "estimated_tokens": 7000, "window": 8192, "usage": {"input_tokens": 6000, "output_tokens": 90},
            "model": "openai:small",
        })
        lead.append("assistant/message", reply(1))
        lead.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        return [lead]

    write(tmp_path / "d", body)
    by_name = named(document(tmp_path / "d", tmp_path))
    summary, chat = by_name["compact_context"], by_name["chat"]
    assert values(summary) == {
        "gen_ai.operation.name": "chat", "dsh.compaction.summarised": 6, "dsh.compaction.estimated_tokens": 7000,
        "dsh.compaction.window": 8192, "gen_ai.response.model": "openai:small", "gen_ai.usage.input_tokens": 6000,
        "gen_ai.usage.output_tokens": 90,
    }
    assert summary["parentSpanId"] == chat["parentSpanId"] == by_name["turn 1"]["spanId"]
    assert (summary["startTimeUnixNano"], summary["endTimeUnixNano"]) == ("1020000000", "1030000000")
    assert (chat["startTimeUnixNano"], chat["endTimeUnixNano"]) == ("1030000000", "1040000000")
    assert b"secret" not in (tmp_path / "out.json").read_bytes()
    with_content = named(document(tmp_path / "d", tmp_path, "--content"))["compact_context"]
    assert values(with_content)["dsh.compaction.summary"] == "the secret summary"
