"""``dsh trace export`` on real logs of the scripted demo: span tree, receipt links, no content, determinism.

The demo runs once through the real ``dsh run`` (subprocess, real JSONL files);
the expectations are derived here from those logs by a naive reading (counts of
``turn/start``, ``assistant/message`` and ``tool/call`` per session, the turn
number in the payload of the first reply after a Team message), never from the
exporter's own lookups. The golden file pins the complete document of a demo
run kept as a fixture (``fixtures/demo_run``), since a fresh run's ids and times differ.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import structlog
from kit_golden import Golden
from trace_kit import FIXTURE, GOLDEN, REPO, TIMEOUT_S, export, parse_otlp, run_demo, spans, values

from host_spec.events import Event
from host_spec.host.store.jsonl import JsonlStore

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _logging() -> Any:
    """``main()`` configures structlog for the process; undo it for the tests that follow."""
    yield
    structlog.reset_defaults()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("demo")
    run_demo(data_dir)
    return data_dir


def exported(data_dir: Path, tmp_path: Path, *args: str) -> tuple[bytes, dict[str, Any]]:
    out = tmp_path / "trace.json"
    assert export(data_dir, out, *args) == 0
    data = out.read_bytes()
    return data, json.loads(data)


def own_logs(data_dir: Path) -> dict[str, list[Event]]:
    store = JsonlStore(data_dir)
    logs = {}
    for session_id in store.list_ids():
        header, events = store.read(session_id)
        logs[session_id] = list(events)[header.seed_length :]
    return logs


class Tree:
    """The spans of one export, with the session each span belongs to (found by climbing its parents)."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.spans = spans(document)
        self.by_id = {span["spanId"]: span for span in self.spans}

    def session_of(self, span: dict[str, Any]) -> str:
        while not span["name"].startswith("session "):
            span = self.by_id[span["parentSpanId"]]
        return str(values(span)["gen_ai.agent.id"])

    def parent(self, span: dict[str, Any]) -> dict[str, Any]:
        return self.by_id[span["parentSpanId"]]

    def kinds(self, session_id: str) -> Counter[str]:
        return Counter(s["name"].split(" ")[0] for s in self.spans if self.session_of(s) == session_id)


def test_one_span_per_session_turn_model_call_and_tool_call(demo: Path, tmp_path: Path) -> None:
    _, document = exported(demo, tmp_path)
    tree = Tree(document)
    assert len({span["traceId"] for span in tree.spans}) == 1
    roots = [span for span in tree.spans if "parentSpanId" not in span]
    assert [values(root)["gen_ai.agent.id"] for root in roots] == ["session-1"]
    logs = own_logs(demo)
    assert len(logs) == 3
    for session_id, events in logs.items():
        kinds = Counter(event.type for event in events)
        assert tree.kinds(session_id) == Counter({
            "session": 1, "turn": kinds["turn/start"], "chat": kinds["assistant/message"],
            "execute_tool": kinds["tool/call"],
        }), session_id
    for span in tree.spans:
        name = span["name"]
        if name.startswith(("chat", "execute_tool")):
            turn = tree.parent(span)
            assert turn["name"].startswith("turn ")
            assert int(turn["startTimeUnixNano"]) <= int(span["startTimeUnixNano"])
            assert int(span["endTimeUnixNano"]) <= int(turn["endTimeUnixNano"])
        if name.startswith("chat"):
            assert values(span)["dsh.turn"] == values(tree.parent(span))["dsh.turn"]
            assert span["kind"] == 3  # CLIENT: a call to the model
        elif name.startswith("turn "):
            assert tree.parent(span)["name"].startswith("session ")
            assert values(span)["dsh.turn.end_reason"] == "completed"
    # Teammates' sessions are children of the Lead's, labelled with their Team names.
    sessions = {values(s)["dsh.team.member.name"]: s for s in tree.spans if s["name"].startswith("session ")}
    assert sorted(sessions) == ["builder", "lead", "reviewer"]
    assert tree.parent(sessions["builder"]) is sessions["lead"] and tree.parent(sessions["reviewer"]) is sessions["lead"]


def test_tool_calls_carry_their_outcome_and_error_code(demo: Path, tmp_path: Path) -> None:
    _, document = exported(demo, tmp_path)
    results = {}
    for events in own_logs(demo).values():
        for event in events:
            if event.type == "tool/result":
                value = event.value()
                results[value["call_id"]] = (value.get("error") or {}).get("code")
    tools = [span for span in spans(document) if span["name"].startswith("execute_tool ")]
    assert len(tools) == len(results)
    for span in tools:
        attributes = values(span)
        code = results[attributes["gen_ai.tool.call.id"]]
        assert span["name"] == f"execute_tool {attributes['gen_ai.tool.name']}"
        assert attributes["dsh.tool.outcome"] == ("error" if code else "ok")
        assert attributes.get("error.type") == code
        assert span.get("status", {}).get("code", 0) == (2 if code else 0)
    assert "FILE_STALE" in {values(span).get("error.type") for span in tools}


def test_every_read_receipt_links_the_send_to_the_turn_that_read_it(demo: Path, tmp_path: Path) -> None:
    _, document = exported(demo, tmp_path)
    tree = Tree(document)
    logs = own_logs(demo)
    lead = logs["session-1"]
    sends = {e.value()["message"]["id"]: e.cause for e in lead if e.type == "team/message/queued"}
    reads = [e.value() for e in lead if e.type == "team/message/read"]
    assert len(reads) == len(sends) == 4
    for read in reads:
        message_id, target = read["message_id"], read["target_id"]
        # Naive oracle: the turn number of the target's first reply after the message entered its history.
        events = logs[target]
        recorded = next(i for i, e in enumerate(events) if e.type == "user/message"
                        and (e.value().get("source") or {}).get("message_id") == message_id)
        reply = next(e for e in events[recorded:] if e.type == "assistant/message")
        cause = sends[message_id]
        (send,) = [s for s in tree.spans if values(s).get("gen_ai.tool.call.id") == cause.call_id
                   and tree.session_of(s) == cause.agent_id]
        assert send["name"] == "execute_tool send_message"
        (link,) = [link for link in send["links"] if values(link)["dsh.team.message.id"] == message_id]
        reader = tree.by_id[link["spanId"]]
        assert link["traceId"] == send["traceId"]
        assert (tree.session_of(reader), reader["name"]) == (target, f"turn {reply.value()['turn']}")
        assert {"name": "team.message.read", "id": message_id} in [
            {"name": e["name"], "id": values(e).get("dsh.team.message.id")} for e in reader["events"]]
        sent = [e["name"] for e in send["events"] if values(e).get("dsh.team.message.id") == message_id]
        assert sent[0] == "team.message.sent"
        # The acknowledgement is made by whichever path saw the delivery first (the send, or the
        # read receipt catching up), so it sits on the span of that cause; it is there once.
        delivered = [s["name"] for s in tree.spans for e in s.get("events", [])
                     if e["name"] == "team.message.delivered" and values(e)["dsh.team.message.id"] == message_id]
        assert len(delivered) == 1


def test_team_events_sit_on_the_calls_that_made_them(demo: Path, tmp_path: Path) -> None:
    _, document = exported(demo, tmp_path)
    placed = Counter()
    for span in spans(document):
        for event in span.get("events", []):
            if event["name"].startswith("team."):
                placed[(span["name"], event["name"])] += 1
    assert placed[("execute_tool spawn_teammate", "team.member")] == 4  # provisioning, active; two teammates
    assert placed[("execute_tool team_task_create", "team.task")] == 2
    assert placed[("execute_tool team_task_update", "team.task")] == 4  # claim and complete, two tasks
    assert placed[("execute_tool send_message", "team.message.sent")] == 4


def test_no_content_unless_asked(demo: Path, tmp_path: Path) -> None:
    texts = set()
    for events in own_logs(demo).values():
        for event in events:
            value = event.value()
            if event.type in ("user/message", "assistant/message", "tool/result"):
                texts |= {block["text"] for block in value["content"] if block.get("type") == "text"}
            elif event.type == "tool/call":
                texts.add(value["arguments"])
    texts = {text for text in texts if len(text) > 12 and not text.startswith("{\"timed_out")}
    assert len(texts) > 20
    plain, _ = exported(demo, tmp_path)
    leaked = [text for text in texts if json.dumps(text)[1:-1] in plain.decode()]
    assert leaked == []
    assert b"Hello" not in plain and b"greet(" not in plain
    full, document = exported(demo, tmp_path, "--content")
    assert b"Review verdict: approved" in full and b"changed since you read it" in full
    tasks = [values(e) for s in spans(document) for e in s.get("events", []) if e["name"] == "team.task"]
    assert {t["dsh.team.task.subject"] for t in tasks} == {"Write the greeting module", "Review the greeting module"}


def snapshot(data_dir: Path) -> dict[str, bytes]:
    return {str(path.relative_to(data_dir)): path.read_bytes() for path in sorted(data_dir.rglob("*")) if path.is_file()}


def test_two_exports_are_byte_identical_and_the_logs_are_untouched(demo: Path, tmp_path: Path) -> None:
    before = snapshot(demo)
    first, _ = exported(demo, tmp_path)
    second, _ = exported(demo, tmp_path)
    assert first == second
    assert snapshot(demo) == before  # read-only: no lock file, no repair, nothing appended
    stdout = subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", "trace", "export", "--data-dir", str(demo)],
                            capture_output=True, timeout=TIMEOUT_S, cwd=REPO)
    assert stdout.returncode == 0 and stdout.stdout == first


def test_the_export_is_a_valid_otlp_request(demo: Path, tmp_path: Path) -> None:
    data, document = exported(demo, tmp_path, "--content")
    request = parse_otlp(data)
    (resource,) = request.resource_spans
    (scope,) = resource.scope_spans
    assert len(scope.spans) == len(spans(document)) > 30
    ids = {span.span_id for span in scope.spans}
    assert len(ids) == len(scope.spans)
    for span in scope.spans:
        assert len(span.trace_id) == 16 and len(span.span_id) == 8
        assert span.parent_span_id in ids or not span.parent_span_id
        assert span.start_time_unix_nano <= span.end_time_unix_nano
        assert all(link.span_id in ids for link in span.links)
    assert sum(len(span.links) for span in scope.spans) == 4
    usage = {kv.key: kv.value.string_value for kv in resource.resource.attributes}
    assert usage["service.name"] == "dsh"


def test_the_fixture_run_exports_to_the_reviewed_document(tmp_path: Path, golden: Golden) -> None:
    data, document = exported(FIXTURE, tmp_path)
    parse_otlp(data)
    golden.check(GOLDEN / "demo_trace.json", document)
