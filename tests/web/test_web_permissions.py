"""The panel's Permissions card: a live run's open ask, answered from the page once, as the user.

A real host (agent-teams plus a ``[permissions]`` table asking before ``list_agents``)
and the panel's real application on the test client's loop. The scripted Lead's
call waits on its ask; the page's ``POST /api/permissions/ID`` answers it through
the Team's one answer path, and a second answer is a rejection.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from dsh_team import TeamServiceAPI
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.messages import user_message
from web_kit import TOKEN, Dispatch

AUTH = {"X-Dsh-Token": TOKEN}
POST = {**AUTH, "Origin": "http://testserver"}
SCRIPT = {"lead": [{"text": "look", "tool_calls": [{"name": "list_agents", "arguments": {}}]}, {"text": "done"}]}


async def open_run(path: Path) -> tuple[Host, Any]:
    profile = path.with_name("p.toml")
    profile.write_text('extends = "agent-teams"\n[permissions]\nask = ["list_agents"]\n')
    host = await Host.open(path, str(profile), ScriptedModel.from_mapping(SCRIPT))
    host.plugins.load("dsh-team-web", {"token": TOKEN})
    session = await host.create_session("lead")
    lead = host.start_agent(session, name="lead")
    lead.followup(user_message("go"))
    return host, lead


@pytest.fixture
def run(tmp_path: Path) -> Iterator[tuple[TestClient, Host, Any]]:
    dispatch = Dispatch()
    with TestClient(dispatch) as client:
        host, lead = client.portal.call(open_run, tmp_path / "data")
        from dsh_team.web.plugin import Panel

        dispatch.app = host.service(Panel).app
        try:
            yield client, host, lead
        finally:
            client.portal.call(host.close)


def _asks(client: TestClient) -> list[dict[str, Any]]:
    permissions = client.get("/api/team", headers=AUTH).json()["permissions"]
    return [] if permissions is None else permissions["asks"]


def test_the_page_answers_an_open_ask_once(run: tuple[TestClient, Host, Any]) -> None:
    client, host, lead = run
    deadline = time.monotonic() + 30
    while not _asks(client):
        assert time.monotonic() < deadline, "the Lead never asked"
        time.sleep(0.05)
    [ask] = _asks(client)
    assert (ask["ask_id"], ask["status"], ask["tool"], ask["rule"]) == ("ask-1", "open", "list_agents", "list_agents")
    bad = client.post("/api/permissions/ask-1", json={"answer": "deny", "x": 1}, headers=POST).json()
    assert bad["ok"] is False and bad["error"]["reason"] == "TEAM_INVALID_ARGUMENT"
    done = client.post("/api/permissions/ask-1", json={"answer": "deny", "reason": "not now", "as": "lead"},
                       headers=POST).json()  # fmt: skip
    assert done == {"ok": True, "value": {"ask_id": "ask-1", "decision": "deny", "always": False}}
    again = client.post("/api/permissions/ask-1", json={"answer": "allow"}, headers=POST).json()
    assert again["ok"] is False and again["error"]["reason"] == "PERMISSION_ALREADY_ANSWERED"
    [ask] = _asks(client)
    assert (ask["status"], ask["by"], ask["reason"]) == ("deny", "user", "not now")
    client.portal.call(lead.when_idle)
    state = host.service(TeamServiceAPI).permissions_state(lead)
    assert [a.answer.decision for a in state.listed() if a.answer is not None] == ["deny"]
