"""The event stream: ids are Lead log positions, a resume gets exactly what it missed, mail-only changes carry only mail.

Streams are read through Starlette's test client on the Team's own loop; a portal
task makes the changes and then ends every stream (as the server does when it
stops), so each response is complete and finite.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from starlette.testclient import TestClient

from dsh_team.web.document import TIMELINE_KEPT, TIMELINE_WINDOW
from web_kit import TOKEN, Team

AUTH = {"X-Dsh-Token": TOKEN}


def _parse(body: str) -> list[tuple[str, int, dict[str, Any]]]:
    events = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if "event" in fields:
            assert fields["retry"] == "1000"
            events.append((fields["event"], int(fields["id"]), json.loads(fields["data"])))
    return events


def _stream(client: TestClient, team: Team, headers: dict[str, str] | None = None, query: str = "",
            during: Callable[[], Awaitable[Any]] | None = None, published: int = 0) -> list[tuple[str, int, dict[str, Any]]]:
    feed = team.panel.feed

    async def drive() -> None:
        while feed.watching == 0:
            await asyncio.sleep(0.01)
        start = feed.published
        if during is not None:
            await during()
        while feed.published < start + published:
            await asyncio.sleep(0.01)
        feed.close_all()

    client.portal.start_task_soon(drive)
    response = client.get("/api/events" + query, headers={**AUTH, **(headers or {})})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    return _parse(response.text)


def _position(team: Team) -> int:
    return team.lead.session.durable_seq


def test_a_first_connect_gets_one_snapshot_whose_id_is_the_lead_log_position(api: tuple[TestClient, Team]) -> None:
    client, team = api
    events = _stream(client, team)
    assert [(kind, seq) for kind, seq, _ in events] == [("snapshot", _position(team))]
    assert events[0][2]["at"] == _position(team) and len(events[0][2]["timeline"]) == 6
    # the builder idles on its claimed task: the last entry is the Team's one quiescence record
    assert events[0][2]["timeline"][-1]["summary"] == "Team quiescent: 1 in progress stalled"


def test_a_resume_gets_exactly_what_it_missed(api: tuple[TestClient, Team]) -> None:
    client, team = api
    snapshot = _stream(client, team)[0][2]
    middle = snapshot["timeline"][2]["seq"]
    for header in ({"Last-Event-ID": str(middle)}, None):
        query = "" if header else f"?last_event_id={middle}"
        [(kind, seq, doc)] = _stream(client, team, header, query)
        assert (kind, seq) == ("team", _position(team))
        assert [e["seq"] for e in doc["timeline"]] == [e["seq"] for e in snapshot["timeline"][3:]]
        assert doc["tasks"] == snapshot["tasks"] and doc["members"] == snapshot["members"]


def test_a_resume_at_the_current_position_gets_only_the_live_statuses(api: tuple[TestClient, Team]) -> None:
    client, team = api
    [(kind, seq, data)] = _stream(client, team, {"Last-Event-ID": str(_position(team))})
    assert (kind, seq) == ("status", _position(team))
    assert data == {"statuses": {team.lead.id: "idle", team.agent_id("builder"): "inactive"}}


@pytest.mark.parametrize("last", ["junk", "-3", "999999"])
def test_an_id_the_log_does_not_have_starts_over_with_a_snapshot(api: tuple[TestClient, Team], last: str) -> None:
    client, team = api
    assert [kind for kind, _, _ in _stream(client, team, {"Last-Event-ID": last})] == ["snapshot"]


def test_a_live_board_change_is_a_team_event_with_only_the_new_timeline(api: tuple[TestClient, Team]) -> None:
    client, team = api

    async def create() -> None:
        await team.service.create_task(team.lead, subject="Write docs", description="Docs for a and b.")

    events = _stream(client, team, during=create, published=1)
    [(kind, seq, doc)] = [e for e in events if e[0] != "snapshot"]
    assert kind == "team" and seq == _position(team) > events[0][1]
    assert [e["summary"] for e in doc["timeline"]] == ["task-3 created: Write docs (rev 1)"]
    assert [t["id"] for t in doc["tasks"]] == ["task-1", "task-2", "task-3"]


def test_a_mailbox_only_change_publishes_only_the_mail(api: tuple[TestClient, Team]) -> None:
    client, team = api
    hold: list[Any] = []

    async def send() -> None:  # the builder is held in its model call, so the message stays queued
        hold.append(await team.hold_running("builder", "hello"))
        await team.service.send_message(team.lead, target="builder", content=[{"type": "text", "text": "ping"}])

    events = _stream(client, team, during=send, published=3)
    client.portal.call(team.let_go, "builder", hold[0])
    kinds = [kind for kind, _, _ in events]
    assert kinds[0] == "snapshot" and "mail" in kinds and "status" in kinds
    mail = [data for kind, _, data in events if kind == "mail"]
    assert all(set(data) == {"at", "log_length", "as_of", "pending_mail", "pending_counts", "unread_counts",
                             "message_status", "timeline"} for data in mail)
    summaries = [entry["summary"] for data in mail for entry in data["timeline"]]
    assert summaries == ["message lead \u2192 builder", "message delivered to builder"] * 2  # "hello", then "ping"
    assert mail[-1]["pending_counts"] == {team.lead.id: 0, team.agent_id("builder"): 0}
    # Both messages sit in the held builder's context, delivered and not yet read by a completed step.
    assert mail[-1]["unread_counts"] == {team.lead.id: 0, team.agent_id("builder"): 2}
    sends = [entry["message_id"] for data in mail for entry in data["timeline"] if entry["type"] == "team/message/queued"]
    assert {mid: mail[-1]["message_status"].get(mid) for mid in sends[-1:]} == {sends[-1]: "delivered"}
    assert all(set(data["message_status"]) == {e["message_id"] for e in data["timeline"]} for data in mail)
    pending = [m for data in mail for m in data["pending_mail"]]
    assert pending and all(m["text"] in ("hello", "ping") and m["queued_at"] > 0 for m in pending)
    statuses = [data["statuses"] for kind, _, data in events if kind == "status"]
    assert {team.agent_id("builder"): "running"}.items() <= statuses[0].items()
    ids = [seq for kind, seq, _ in events if kind != "status"]
    assert ids == sorted(set(ids))


def test_nothing_is_folded_while_nobody_watches(api: tuple[TestClient, Team]) -> None:
    client, team = api
    feed = team.panel.feed

    async def create() -> None:
        await team.service.create_task(team.lead, subject="Unwatched", description="Nobody looks.")

    client.portal.call(create)
    assert feed.published == 0 and feed.watching == 0
    assert client.get("/api/team", headers=AUTH).json()["tasks"][-1]["subject"] == "Unwatched"


def test_more_changes_at_once_than_the_fold_keeps_are_one_snapshot(api: tuple[TestClient, Team]) -> None:
    """A watcher that is current gets a snapshot (not a delta missing entries) when one publication
    carries more entries than the fold keeps."""
    client, team = api
    count = 2 * TIMELINE_KEPT + 1

    async def burst() -> None:
        session = team.lead.session
        for number in range(count):  # no await in between: the feed folds them in one pump
            session.append("team/mode", {"version": 2, "team_id": team.lead.id, "enabled": bool(number % 2)})
        await session.flush()
        await asyncio.sleep(0)

    events = _stream(client, team, during=burst, published=1)
    kinds = [kind for kind, _, _ in events]
    assert kinds[0] == "snapshot" and kinds[1:] == ["snapshot"], kinds
    last = events[-1][2]
    assert last["at"] == team.lead.session.durable_seq and len(last["timeline"]) == TIMELINE_WINDOW
    assert team.panel.feed.fold().dropped > events[0][1]  # entries of this burst were let go
