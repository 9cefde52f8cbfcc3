"""The Team's contribution to ``dsh trace export`` on hand-written Lead logs: old records, a broken stream, content.

The demo tests (``test_trace_demo.py``) cover the usual run; these logs hold what
a run rarely shows: records of an older version (upcast like every reader does),
a record of another Team, a stream the fold rejects, a receipt whose target's
log is not part of the export, and a reply outside any turn.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from trace_kit import export, parse_otlp, spans, values

from host_spec.events import Cause
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.store.session import NullObserver
from host_spec.host.store.sessions import SessionStore

LEAD = "lead"


@pytest.fixture(autouse=True)
def _logging() -> Iterator[None]:
    """``main()`` configures structlog for the process; undo it for the tests that follow."""
    yield
    structlog.reset_defaults()


def team_message(message_id: str) -> dict[str, Any]:
    """A target's user message holding Team message ``message_id`` (as delivery records it)."""
    source = {"kind": "team-message", "team_id": LEAD, "message_id": message_id, "sender_id": LEAD, "sender_name": "lead"}
    return {"id": message_id, "content": [{"type": "text", "text": "Team message"}], "source": source}


def message(message_id: str, target: str, text: str, version: int = 2) -> dict[str, Any]:
    body = {"id": message_id, "sender_id": LEAD, "sender_name": "lead", "target_id": target,
            "content": [{"type": "text", "text": text}]}
    return {"version": version, "team_id": LEAD, "message": body}


def receipt(kind: str, message_id: str, target: str) -> tuple[str, dict[str, Any]]:
    return f"team/message/{kind}", {"version": 2, "team_id": LEAD, "message_id": message_id, "target_id": target}


def write(data: Path) -> None:
    """A Lead whose Team holds v1 records, a reader with a reply outside a turn, an absent member, a broken stream."""

    async def run() -> None:
        clock = itertools.count(1000, 10)
        store = SessionStore(JsonlStore(data), NullObserver(), clock=lambda: next(clock))
        lead = store.create(LEAD)
        lead.append("turn/start", {"turn": 1})
        lead.append("tool/call", {"turn": 1, "step": 1, "call_id": "spawn", "name": "spawn_teammate", "arguments": "{}"})
        by_spawn = Cause(agent_id=LEAD, call_id="spawn")
        v1_member = {"id": "absent", "name": "alpha", "description": "the secret parser", "provider": "spawn",
                     "phase": "provisioning"}
        lead.append("team/member", {"version": 1, "team_id": LEAD, "member": v1_member}, cause=by_spawn)
        failed = {**v1_member, "context": "fresh", "phase": "failed", "error": "secret provisioning failure"}
        lead.append("team/member", {"version": 2, "team_id": LEAD, "member": failed}, cause=by_spawn)
        for phase in ("provisioning", "active"):
            beta = {"id": "reader", "name": "beta", "description": "d", "provider": "spawn", "context": "fresh",
                    "phase": phase}
            lead.append("team/member", {"version": 2, "team_id": LEAD, "member": beta}, cause=by_spawn)
        lead.append("team/mode", {"version": 2, "team_id": LEAD, "enabled": True}, cause=Cause(agent_id=LEAD))
        lead.append("team/mode", {"version": 2, "team_id": "another-team", "enabled": False})
        task = {"id": "task-1", "revision": 1, "subject": "secret subject", "description": "secret description",
                "status": "in_progress", "blocked_by": [], "write_scopes": [], "owner_id": "ghost"}
        lead.append("team/task", {"version": 2, "team_id": LEAD, "task": task})
        for message_id, target, version in (("m-reader", "reader", 1), ("m-absent", "absent", 2)):
            queued = message(message_id, target, "the secret text", version)  # v1 has the v2 shape: upcast by version
            lead.append("team/message/queued", queued, cause=Cause(agent_id=LEAD))
            lead.append(*receipt("delivered", message_id, target))
            lead.append(*receipt("read", message_id, target), cause=Cause(agent_id=target))
        stalled = {"in_progress": [{"id": "task-1", "owner_id": "ghost"}], "failed": ["absent"]}
        lead.append("team/quiescent", {"version": 2, "team_id": LEAD, "stalled": stalled}, cause=Cause())
        lead.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        lead.append("team/task", {"version": 2, "team_id": LEAD, "task": {**task, "revision": 5}})  # breaks the fold
        lead.append("team/mode", {"version": 2, "team_id": LEAD, "enabled": False})  # after the failure: not shown
        reader = store.create("reader", parent_session=LEAD)
        reader.append("user/message", team_message("m-reader"))
        reader.append("assistant/message", {"turn": 0, "step": 0, "content": []})  # no turn: not a step of this host
        reader.append("turn/start", {"turn": 7})
        reader.append("user/message", team_message("m-reader"))  # recorded again (a redelivery): read once
        reader.append("assistant/message", {"turn": 7, "step": 1, "content": []})
        reader.append("assistant/message", {"turn": 7, "step": 2, "content": []})
        reader.append("turn/end", {"turn": 7, "reason": {"kind": "completed"}})
        for session in (lead, reader):
            await store.dispose(session)

    asyncio.run(run())


def exported(tmp_path: Path, *args: str) -> dict[str, Any]:
    data, out = tmp_path / "data", tmp_path / "out.json"
    if not data.exists():
        write(data)
    assert export(data, out, *args) == 0
    parse_otlp(out.read_bytes())
    return json.loads(out.read_bytes())


def events_by_span(document: dict[str, Any]) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    return {s["name"]: [(e["name"], values(e)) for e in s.get("events", [])] for s in spans(document)}


def test_records_become_events_up_to_the_failure(tmp_path: Path) -> None:
    document = exported(tmp_path)
    found = events_by_span(document)
    assert found["execute_tool spawn_teammate"] == [
        ("team.member", {"dsh.team.member.id": "absent", "dsh.team.member.name": "alpha",
                         "dsh.team.member.phase": "provisioning", "dsh.team.member.context": "fresh",
                         "dsh.team.member.provider": "spawn"}),
        ("team.member", {"dsh.team.member.id": "absent", "dsh.team.member.name": "alpha",
                         "dsh.team.member.phase": "failed", "dsh.team.member.context": "fresh",
                         "dsh.team.member.provider": "spawn"}),
        *[("team.member", {"dsh.team.member.id": "reader", "dsh.team.member.name": "beta",
                           "dsh.team.member.phase": phase, "dsh.team.member.context": "fresh",
                           "dsh.team.member.provider": "spawn"}) for phase in ("provisioning", "active")],
    ]
    # Without a call, a record goes to its agent's turn at that time; without an agent (or one outside the
    # export: the absent member's receipt) to the Lead's session. Another Team's record is not shown.
    turn = [name for name, _ in found["turn 1"] if name.startswith("team.")]
    assert turn == ["team.mode", "team.message.sent", "team.message.sent"]
    session = found["session lead"]
    names = [name for name, _ in session]
    assert names == ["team.task", "team.message.delivered", "team.message.delivered", "team.message.read",
                     "team.quiescent", "team.stream.failed"]
    assert session[0][1]["dsh.team.task.owner"] == "ghost"  # an id the roster does not list stays an id
    assert session[-2][1] == {"dsh.team.stalled.in_progress": ["task-1"], "dsh.team.stalled.failed": ["alpha"]}
    assert session[-1][1] == {"dsh.team.fold.rule": "task-revision-not-contiguous", "dsh.team.fold.seq": 18}
    assert b"secret" not in (tmp_path / "out.json").read_bytes()


def test_a_receipt_links_to_the_first_turn_whose_step_completed_with_the_message(tmp_path: Path) -> None:
    document = exported(tmp_path)
    by_name = {(values(s)["gen_ai.agent.id"] if s["name"].startswith("session") else s["name"], s.get("parentSpanId")): s
               for s in spans(document)}
    reader_session = by_name[("reader", by_name[(LEAD, None)]["spanId"])]
    (reader_turn,) = [s for s in spans(document)
                      if s.get("parentSpanId") == reader_session["spanId"] and s["name"].startswith("turn ")]
    assert values(reader_session)["dsh.team.member.name"] == "beta"
    reply = int(reader_turn["startTimeUnixNano"]) + 20_000_000  # turn/start, user/message, then the first reply
    assert [(e["name"], e["timeUnixNano"]) for e in reader_turn["events"] if e["name"].startswith("team.")] == [
        ("team.message.read", str(reply))]
    links = [link for s in spans(document) for link in s.get("links", [])]
    assert [(link["spanId"], values(link)["dsh.team.message.id"]) for link in links] == [(reader_turn["spanId"], "m-reader")]


def test_content_shows_the_records_text(tmp_path: Path) -> None:
    text = json.dumps(exported(tmp_path, "--content"))
    for secret in ("the secret parser", "secret provisioning failure", "secret subject", "secret description",
                   "the secret text"):
        assert secret in text


def test_a_session_holding_only_another_teams_records_is_no_lead(tmp_path: Path) -> None:
    async def run() -> None:
        store = SessionStore(JsonlStore(tmp_path / "data"), NullObserver(), clock=lambda: 1000)
        lead = store.create(LEAD)
        lead.append("team/mode", {"version": 2, "team_id": "another-team", "enabled": True})
        await store.dispose(lead)

    asyncio.run(run())
    (session,) = spans(exported(tmp_path))
    assert values(session) == {"gen_ai.agent.id": LEAD} and "events" not in session
