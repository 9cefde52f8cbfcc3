"""``dsh team serve --store``: a Team another process runs, followed live, every change pushed once, in order.

Real processes throughout: a real PostgreSQL server (the module's own: one test
restarts it), the Team held live in its own process (``store_team.py``), the panel
in another (``dsh team serve --store``), and the test reading the panel's event
stream over HTTP. The oracle is the Lead log folded afresh: the timeline entries
pushed, concatenated, must be exactly its timeline in seq order -- no gap, no
duplicate -- across a dropped LISTEN connection and a server restart.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import msgspec
import psycopg
import pytest
from kit_postgres import PostgresServer

from dsh_team.views.usage import fold_usage
from follow_kit import EventLog, Serve, StoreTeam
from host_spec.host.store.postgres import PostgresStore
from host_spec.host.store.postgres.schema import CHANNEL


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    server = PostgresServer()
    server.start()
    yield server
    server.destroy()


@pytest.fixture
def url(server: PostgresServer) -> str:
    if not server.running:
        server.start()
    return server.new_database()


def _pushed_seqs(messages: list[tuple[str, int, dict[str, Any]]]) -> list[int]:
    """The timeline seqs the stream carried, in order (a snapshot starts over)."""
    seqs: list[int] = []
    for kind, _, data in messages:
        if kind == "snapshot":
            seqs = []
        seqs.extend(entry["seq"] for entry in data.get("timeline", ()))
    return seqs


def _drop_listener(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return len(conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = %s AND datname = current_database() "
            "AND pid <> pg_backend_pid()", (f"LISTEN {CHANNEL}",)).fetchall())


def test_changes_of_another_process_are_pushed_once_in_order_across_a_dropped_listen_and_a_restart(
    server: PostgresServer, url: str
) -> None:
    team = StoreTeam(url)
    serve = Serve(url)
    stream = EventLog(serve)
    try:
        first = stream.until(0)[0]
        assert first[0] == "snapshot" and first[2]["following"] is True and first[2]["live"] is False
        start = first[1]
        at = team.command("task First from afar")
        messages = stream.until(at)
        assert [kind for kind, _, _ in messages[1:]] == ["team"]
        assert "First from afar" in {task["subject"] for task in messages[-1][2]["tasks"]}
        assert _drop_listener(url) == 1  # the panel's LISTEN connection is cut
        at = team.command("task Second, after the cut")
        at = team.command("send finish now")  # mail, a member's write, task-1 completed
        stream.until(at)
        server.stop("immediate")  # every connection of both processes is cut
        server.start()
        at = team.command("task Third, after the restart")
        messages = stream.until(at)
        store = PostgresStore(url)
        lead = store.read(team.lead_id)[1]
        doc = messages[-1][2] if messages[-1][0] == "team" else None
        fresh = httpx2.get(serve.api("/api/team"), timeout=60).json()  # the Team folded afresh from the log
        assert fresh["at"] == len(lead) and len(fresh["timeline"]) < 300  # the whole timeline, not a window
        assert _pushed_seqs(messages) == [entry["seq"] for entry in fresh["timeline"]]  # each once, in order
        ids = [ident for _, ident, _ in messages]
        assert ids == sorted(ids) and ids[-1] == len(lead) and start < ids[1]
        assert doc is not None and {t["subject"] for t in doc["tasks"]} >= {"Second, after the cut", "Third, after the restart"}
        assert next(t for t in doc["tasks"] if t["id"] == "task-1")["status"] == "completed"
        assert [w["path"] for w in doc["writes"]] == ["src/a.py"] and doc["writes"][0]["member"] == "builder"
        for member in doc["members"]:  # running totals from followed batches == a fold of the whole log now
            header, events = store.read(member["id"])
            assert member["usage"] == msgspec.to_builtins(fold_usage(events[header.seed_length:])), member["name"]
        assert {m["name"]: m["usage"]["calls"] > 0 for m in doc["members"]} == {"lead": True, "builder": True}
        store.close()
        refused = serve.post("/api/tasks", {"subject": "s", "description": "d"})
        assert refused.status_code == 409
        assert refused.json()["error"]["code"] == "TEAM_RUN_LIVE" and team.holder in refused.json()["error"]["message"]
    finally:
        stream.close()
        team.close()
    try:
        refused = serve.post("/api/tasks", {"subject": "s", "description": "d"})  # nobody holds it now
        assert refused.status_code == 405 and refused.json()["error"]["code"] == "WEB_READ_ONLY"
    finally:
        serve.close()
