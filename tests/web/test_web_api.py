"""The panel's HTTP API through Starlette's test client, against a real scripted Team run.

The host is opened on the test client's own event loop (its portal), so every
request reaches the same live Team service the agents use. The document is checked
against ``dsh team show``'s own builder (an independent oracle: the same fold,
rendered by the CLI's code), every steering outcome against the service's board.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.testclient import TestClient

from dsh_team.core.fold import replay
from dsh_team.cost import replay_costs
from dsh_team.cost.report import build_report
from dsh_team.views.show import build_show, render_json
from dsh_team.views.usage import fold_usage
from kit_gates import faulty_log
from web_kit import TOKEN, Team

ORIGIN = {"Origin": "http://testserver"}
AUTH = {"X-Dsh-Token": TOKEN}
POST = {**AUTH, **ORIGIN}


def _tasks(team: Team) -> dict[str, Any]:
    return {view.id: view for view in team.service.list_tasks(team.lead)}


# ---------------------------------------------------------------- the token, the origin, the files


@pytest.mark.parametrize("path", ["/", "/api/team", "/api/events", "/static/panel.js", "/nowhere"])
def test_every_request_needs_the_token(api: tuple[TestClient, Team], path: str) -> None:
    client, _ = api
    for headers, query in (({}, ""), ({"X-Dsh-Token": "wrong"}, ""), ({}, "?token=wrong")):
        response = client.get(path + query, headers=headers)
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "WEB_BAD_TOKEN"


def test_the_page_passes_its_token_to_its_own_files(api: tuple[TestClient, Team]) -> None:
    client, _ = api
    page = client.get(f"/?token={TOKEN}")
    assert page.status_code == 200 and page.headers["cache-control"] == "no-store"
    assert f'src="/static/panel.js?token={TOKEN}"' in page.text and "{{token}}" not in page.text
    script = client.get(f"/static/panel.js?token={TOKEN}")
    assert script.status_code == 200 and "EventSource" in script.text
    assert client.get("/static/panel.css", headers=AUTH).status_code == 200


@pytest.mark.parametrize("path", ["/static/../plugin.py", "/static/%2e%2e/plugin.py", "/static/missing.js", "/plugin.py"])
def test_nothing_is_served_outside_the_static_directory(api: tuple[TestClient, Team], path: str) -> None:
    client, _ = api
    assert client.get(path, headers=AUTH).status_code == 404


@pytest.mark.parametrize("origin", [None, "http://evil.example", "http://testserver:1"])
def test_a_state_change_needs_the_panels_own_origin(api: tuple[TestClient, Team], origin: str | None) -> None:
    client, team = api
    headers = dict(AUTH) if origin is None else {**AUTH, "Origin": origin}
    response = client.post("/api/tasks", json={"subject": "x", "description": "y"}, headers=headers)
    assert response.status_code == 403 and response.json()["error"]["code"] == "WEB_BAD_ORIGIN"
    assert list(_tasks(team)) == ["task-1", "task-2"]


def test_a_state_change_is_a_post_with_a_json_object(api: tuple[TestClient, Team]) -> None:
    client, team = api
    assert client.get("/api/tasks", headers=AUTH).status_code == 405
    cases = [
        ({"content": b'{"subject": "x"}', "headers": {**POST, "Content-Type": "text/plain"}}, 415, "WEB_NOT_JSON"),
        ({"content": b'{"subject": ', "headers": {**POST, "Content-Type": "application/json"}}, 400, "WEB_BAD_JSON"),
        ({"json": ["subject"], "headers": POST}, 400, "WEB_BAD_JSON"),
    ]
    for kwargs, status, code in cases:
        response = client.post("/api/tasks", **kwargs)
        assert (response.status_code, response.json()["error"]["code"]) == (status, code)
    assert list(_tasks(team)) == ["task-1", "task-2"]


# ---------------------------------------------------------------- the document


def test_the_document_is_team_show_plus_live_status_layers_and_timeline(api: tuple[TestClient, Team]) -> None:
    client, team = api
    doc = client.get("/api/team", headers=AUTH).json()
    session = team.lead.session
    usage = {team.lead.id: fold_usage(session.own_events())}  # the builder was released: its log is not loaded
    state = replay(session.events, team.lead.id)
    costs = build_report(state, replay_costs(session.events[: session.durable_seq], team.lead.id))
    show = json.loads(render_json(build_show(state, session_id=team.lead.id, log_length=len(session.events),
                                             at=session.durable_seq, usage=usage, costs=costs)))
    for key in set(show) - {"members", "offline"}:
        assert doc[key] == show[key], key
    assert doc["offline"] is False and doc["live"] is True and doc["read_only"] is False
    assert [{**m, "status": "?"} for m in doc["members"]] == [{**m, "status": "?"} for m in show["members"]]
    assert [(m["name"], m["status"]) for m in doc["members"]] == [("lead", "idle"), ("builder", "inactive")]
    assert doc["layers"] == [["task-1"], ["task-2"]]
    assert [(e["member"], e["tool"], e["summary"]) for e in doc["timeline"][:3]] == [
        ("lead", "team_task_create", "task-1 created: Write module a (rev 1)"),
        ("lead", "team_task_create", "task-2 created: Write module b (rev 1)"),
        ("lead", "spawn_teammate", "builder provisioning"),
    ]


def test_members_show_the_tokens_their_own_loaded_logs_used(api: tuple[TestClient, Team]) -> None:
    client, team = api
    calls = sum(1 for r in team.model.requests if r.agent_name == "lead")
    for _ in range(2):  # the second look folds only what is new
        lead, builder = client.get("/api/team", headers=AUTH).json()["members"]
        assert lead["usage"] == {"calls": calls, "input_tokens": 120 * calls, "output_tokens": 30 * calls,
                                 "cached_tokens": 0, "model": "scripted:kit", "compactions": 0}
        assert builder["usage"] is None  # released while idle: its log is not loaded
    first = client.get("/api/team", headers=AUTH).json()["timeline"][0]["seq"]
    assert client.get(f"/api/team?at={first}", headers=AUTH).json()["members"][0]["usage"]["calls"] == 1


def test_at_shows_the_team_at_an_earlier_position(api: tuple[TestClient, Team]) -> None:
    client, team = api
    doc = client.get("/api/team", headers=AUTH).json()
    first = doc["timeline"][0]["seq"]
    earlier = client.get(f"/api/team?at={first}", headers=AUTH).json()
    assert earlier["at"] == first and earlier["log_length"] == doc["log_length"]
    assert [m["name"] for m in earlier["members"]] == ["lead"]
    assert [t["id"] for t in earlier["tasks"]] == ["task-1"]
    assert earlier["live"] is False and earlier["offline"] is True
    assert client.get(f"/api/team?at={doc['at']}", headers=AUTH).json()["live"] is True
    assert client.get("/api/team?at=", headers=AUTH).json()["at"] == doc["at"]
    for bad in ("x", "-1", str(doc["at"] + 1)):
        response = client.get(f"/api/team?at={bad}", headers=AUTH)
        assert (response.status_code, response.json()["error"]["code"]) == (400, "WEB_BAD_POSITION")


# ---------------------------------------------------------------- steering


def test_create_a_task_from_the_page(api: tuple[TestClient, Team]) -> None:
    client, team = api
    body = {"subject": "Write docs", "description": "Document a and b.", "blocked_by": ["task-2"]}
    result = client.post("/api/tasks", json=body, headers=POST).json()
    assert result["ok"] is True and result["value"]["id"] == "task-3" and result["value"]["revision"] == 1
    assert _tasks(team)["task-3"].blocked_by == ("task-2",)
    doc = client.get("/api/team", headers=AUTH).json()
    assert doc["layers"] == [["task-1"], ["task-2"], ["task-3"]]
    assert doc["timeline"][-1]["summary"] == "task-3 created: Write docs (rev 1)"
    assert doc["timeline"][-1]["tool"] is None  # not a tool call: the page acted


def test_an_unconfirmed_create_says_so_and_is_never_a_rejection(api: tuple[TestClient, Team]) -> None:
    client, team = api
    faulty_log(team.lead.session, fail_at=(1,))  # the create's flush fails; the session retries it later
    result = client.post("/api/tasks", json={"subject": "Write docs", "description": "d"}, headers=POST).json()
    assert result["ok"] is True and result["value"]["id"] == "task-3"
    assert result["unconfirmed"]["code"] == "team-persistence-unconfirmed"
    assert "task-3" in _tasks(team)  # appended and visible to the Team


def test_a_live_panel_lists_the_writes_made_while_it_was_loaded(api: tuple[TestClient, Team]) -> None:
    client, team = api
    assert client.get("/api/team", headers=AUTH).json()["writes"] == []
    client.portal.call(team.tell, "builder", "finish now")
    doc = client.get("/api/team", headers=AUTH).json()
    [write] = doc["writes"]
    assert (write["member"], write["path"], write["in_scope"], write["tasks"]) == ("builder", "src/a.py", True, ["task-1"])
    assert client.get(f"/api/team?at={doc['timeline'][0]['seq']}", headers=AUTH).json()["writes"] == []


def test_a_stale_revision_is_a_conflict_carrying_the_current_task(api: tuple[TestClient, Team]) -> None:
    client, team = api
    edit = {"action": "edit", "expected_revision": 1, "subject": "Write module b, v2"}
    assert client.post("/api/tasks/task-2", json=edit, headers=POST).json()["value"]["revision"] == 2
    stale = client.post("/api/tasks/task-2", json={"action": "claim", "expected_revision": 1}, headers=POST)
    result = stale.json()
    assert stale.status_code == 200 and result["ok"] is False
    assert result["error"]["code"] == "team-task-conflict" and result["error"]["reason"] == "TEAM_TASK_STALE_REVISION"
    assert result["current"]["revision"] == 2 and result["current"]["subject"] == "Write module b, v2"
    assert _tasks(team)["task-2"].revision == 2


@pytest.mark.parametrize(("path", "body", "reason"), [
    ("/api/tasks/task-9", {"action": "claim", "expected_revision": 1}, "TEAM_TASK_NOT_FOUND"),
    ("/api/tasks/task-2", {"action": "claim", "expected_revision": 1}, "TEAM_TASK_BLOCKED"),
    ("/api/tasks", {"subject": "x", "description": "y", "colour": "red"}, "TEAM_INVALID_ARGUMENT"),
    ("/api/tasks", {"subject": "x", "description": "y", "as": "nobody"}, "TEAM_MEMBER_NOT_FOUND"),
    ("/api/tasks", {"subject": "x", "description": "y", "as": 7}, "TEAM_INVALID_ARGUMENT"),
    ("/api/tasks/task-1", {"action": "release", "expected_revision": 2, "as": "builder"}, "TEAM_NOT_MEMBER"),
])
def test_a_domain_rejection_comes_back_inside_a_successful_response(
    api: tuple[TestClient, Team], path: str, body: dict[str, Any], reason: str
) -> None:
    client, team = api
    response = client.post(path, json=body, headers=POST)
    result = response.json()
    assert response.status_code == 200 and result["ok"] is False
    assert result["error"]["code"] == "team-rejected" and result["error"]["message"]
    assert result["error"]["reason"] == reason
    assert [(v.id, v.revision) for v in _tasks(team).values()] == [("task-1", 2), ("task-2", 1)]


def test_a_teammate_acts_as_itself_while_it_is_loaded(api: tuple[TestClient, Team]) -> None:
    client, team = api
    told = client.portal.call(team.hold_running, "builder", "finish now")
    doc = client.get("/api/team", headers=AUTH).json()
    assert [(m["name"], m["status"]) for m in doc["members"]] == [("lead", "idle"), ("builder", "running")]
    released = client.post("/api/tasks/task-1", json={"action": "release", "expected_revision": 2, "as": "builder"},
                           headers=POST).json()
    assert released["ok"] is True and released["value"]["status"] == "pending"
    refused = client.post("/api/mode", json={"enabled": False, "as": "builder"}, headers=POST).json()
    assert refused["ok"] is False and refused["error"]["reason"] == "TEAM_LEAD_REQUIRED"
    client.portal.call(team.let_go, "builder", told)
    assert team.service.is_enabled(team.lead) is True


def test_the_mode_toggle_is_root_only_and_checked(api: tuple[TestClient, Team]) -> None:
    client, team = api
    for body, reason in (({"enabled": "no"}, "TEAM_INVALID_ARGUMENT"), ({"enabled": False, "x": 1}, "TEAM_INVALID_ARGUMENT")):
        result = client.post("/api/mode", json=body, headers=POST).json()
        assert result["ok"] is False and result["error"]["reason"] == reason
    assert team.service.is_enabled(team.lead) is True
    assert client.post("/api/mode", json={"enabled": False}, headers=POST).json() == {"ok": True, "value": {"enabled": False}}
    assert team.service.is_enabled(team.lead) is False
    assert client.get("/api/team", headers=AUTH).json()["enabled"] is False


def test_a_plan_decision_from_the_page_is_checked(api: tuple[TestClient, Team]) -> None:
    """Bad requests and a decision without a submitted plan come back as rejections; nothing is recorded."""
    client, team = api
    for body, reason in (
        ({"plan": "maybe"}, "TEAM_INVALID_ARGUMENT"),
        ({"plan": "approve", "x": 1}, "TEAM_INVALID_ARGUMENT"),
        ({"plan": "approve", "as": "builder"}, "TEAM_PLAN_INVALID"),  # the builder was spawned without plan approval
    ):
        result = client.post("/api/plans/builder", json=body, headers=POST).json()
        assert result["ok"] is False and result["error"]["reason"] == reason, result
    assert not team.service.controls_state(team.lead).plans


def test_a_gated_task_can_be_created_from_the_page(api: tuple[TestClient, Team]) -> None:
    client, team = api
    created = client.post("/api/tasks", json={"subject": "s", "description": "d", "checks": ["make test"]},
                          headers=POST).json()
    assert created["ok"] is True and created["value"]["checks"] == ["make test"]
    assert team.service.get_task(team.lead, created["value"]["id"]).checks == ("make test",)


def test_the_message_box_sends_as_the_user_once(api: tuple[TestClient, Team]) -> None:
    client, team = api
    result = client.post("/api/messages", json={"target": "builder", "text": "finish now"}, headers=POST).json()
    assert result["ok"] is True and result["value"]["message_id"].startswith("team-message-")
    assert result["value"]["status"] in ("accepted", "queued")
    queued = [e.value() for e in team.lead.session.events if e.type == "team/message/queued"]
    assert [q["message"]["sender_id"] for q in queued].count("user") == 1
    assert queued[-1]["message"]["id"] == result["value"]["message_id"]


def test_the_message_box_refuses_inside_a_successful_response(api: tuple[TestClient, Team]) -> None:
    client, team = api
    before = len(team.lead.session.events)
    for body, reason in (
        ({"target": "nobody", "text": "hi"}, "TEAM_MEMBER_NOT_FOUND"),
        ({"target": "builder", "text": "  "}, "TEAM_INVALID_ARGUMENT"),
        ({"target": "builder", "text": "hi", "as": "builder"}, "TEAM_INVALID_ARGUMENT"),
    ):
        result = client.post("/api/messages", json=body, headers=POST).json()
        assert result["ok"] is False and result["error"]["reason"] == reason
    assert len(team.lead.session.events) == before


def test_an_unconfirmed_message_says_so_and_is_never_a_rejection(api: tuple[TestClient, Team]) -> None:
    client, team = api
    faulty_log(team.lead.session, fail_at=(1,))  # the queued record's flush fails; it stays visible
    result = client.post("/api/messages", json={"target": "builder", "text": "finish now"}, headers=POST).json()
    assert result["ok"] is True and result["unconfirmed"]["code"] == "team-persistence-unconfirmed"
    assert result["value"]["status"] == "queued" and result["value"]["message_id"].startswith("team-message-")
