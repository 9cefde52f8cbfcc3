"""``dsh team serve --store``: a Team another process runs, followed live, every change pushed once, in order.

Real processes throughout: a real PostgreSQL server (the module's own: one test
restarts it), the Team held live in its own process (``store_team.py``), the panel
in another (``dsh team serve --store``), and the test reading the panel's event
stream over HTTP. The oracle is the Lead log folded afresh: the timeline entries
pushed, concatenated, must be exactly its timeline in seq order -- no gap, no
duplicate -- across a dropped LISTEN connection and a server restart.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import sys
import threading
import time
from typing import Any

import httpx2
import msgspec
import psycopg
import pytest
from kit_postgres import PostgresServer, own_server, running_database
from sse_starlette.sse import AppStatus

from dsh_team.views.usage import fold_usage
from follow_kit import EventLog, Serve, StoreTeam
from dsh_team.web.followed import FollowedRun
from dsh_team.web.stream import Feed
from host_spec.events import Event, SessionHeader
from host_spec.host.cli.backend_reader import BackendReader
from host_spec.host.cli.main import main
from host_spec.host.store.postgres import PostgresStore
from host_spec.host.store.postgres.schema import CHANNEL


server = pytest.fixture(scope="module", name="server")(own_server)


@pytest.fixture
def url(server: PostgresServer) -> str:
    return running_database(server)


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


# ------------------------------------------------------------------ in this process, from a recorded run


class Recorded:
    """A finished run of the kit's Team on the store (task-3 created, task-1 completed by the builder)."""

    def __init__(self, url: str) -> None:
        team = StoreTeam(url)
        team.command("task Recorded elsewhere")
        team.command("send finish now")
        team.close()
        store = PostgresStore(url)
        self.lead = store.read(team.lead_id)
        builder_id = next(sid for sid in store.list_ids() if sid != team.lead_id)
        self.builder = store.read(builder_id)
        store.close()
        #: The Lead log up to just before the builder joins the roster.
        self.before_spawn = next(e.seq for e in self.lead[1] if e.type == "team/member") - 1


@pytest.fixture(scope="module")
def recorded(server: PostgresServer) -> Recorded:
    if not server.running:
        server.start()
    return Recorded(server.new_database())


def _copy(store: PostgresStore, log: tuple[SessionHeader, list[Event]], upto: int | None = None) -> Any:
    """A new session in ``store`` holding ``log``'s events up to ``upto``; returned open (its lease held)."""
    header, events = log
    writer = store.create(header)
    writer.append(events[:upto], expected_seq=0)
    writer.sync()
    return writer


def _extend(writer: Any, log: tuple[SessionHeader, list[Event]]) -> None:
    events = log[1]
    writer.append(events[writer.tail_seq:], expected_seq=writer.tail_seq)
    writer.sync()


def test_team_serve_follows_a_run_committed_by_another_connection_until_interrupted(
    url: str, recorded: Recorded, monkeypatch: Any
) -> None:
    """In this process: the roster's builder has no log yet at the start; it is followed from its first event."""
    store = PostgresStore(url, holder="machine-b:7:abc")
    lead = _copy(store, recorded.lead, upto=recorded.before_spawn + 2)  # the builder is listed, its log not written
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    monkeypatch.setattr(AppStatus, "should_exit", False)  # sse-starlette's process-wide flag (see test_web_panel)
    seen: dict[str, Any] = {}

    def browse() -> None:
        try:
            while "token=" not in stderr.getvalue():
                threading.Event().wait(0.02)
            page = stderr.getvalue().split("following the store): ")[1].split()[0]
            base, token = page.split("/?token=")

            def get(query: str = "") -> dict[str, Any]:
                return dict(httpx2.get(f"{base}/api/team?token={token}{query}", timeout=30).json())

            def post() -> httpx2.Response:
                return httpx2.post(f"{base}/api/tasks?token={token}", json={"subject": "s", "description": "d"},
                                   headers={"Origin": base}, timeout=30)  # fmt: skip

            seen["start"] = get()
            seen["live"] = post()
            builder = store.create(recorded.builder[0])
            _extend(builder, recorded.builder)
            _extend(lead, recorded.lead)
            deadline = time.monotonic() + 30
            while (doc := get())["at"] < len(recorded.lead[1]) or not doc["writes"]:
                assert time.monotonic() < deadline, doc["at"]
                threading.Event().wait(0.05)
            seen["end"] = doc
            seen["past"] = get(f"&at={recorded.before_spawn + 2}")
            builder.close()
            lead.close()
            seen["free"] = post()
        finally:
            os.kill(os.getpid(), signal.SIGINT)

    browser = threading.Thread(target=browse)
    browser.start()
    try:
        status = main(["team", "serve", "--store", url])
    finally:
        browser.join(30)
        store.close()
    assert status == 130
    assert [t.name for t in threading.enumerate() if t.name == "dsh-store-follower"] == []  # the follower stopped
    start, end, past = seen["start"], seen["end"], seen["past"]
    assert start["following"] is True and start["at"] == recorded.before_spawn + 2
    assert [m["usage"] for m in start["members"] if m["name"] == "builder"] == [None]  # no log to read yet
    assert seen["live"].status_code == 409 and "machine-b:7:abc" in seen["live"].json()["error"]["message"]
    assert seen["free"].status_code == 405 and seen["free"].json()["error"]["code"] == "WEB_READ_ONLY"
    assert end["at"] == len(recorded.lead[1]) and [w["path"] for w in end["writes"]] == ["src/a.py"]
    builder_usage = next(m["usage"] for m in end["members"] if m["name"] == "builder")
    assert builder_usage == msgspec.to_builtins(fold_usage(recorded.builder[1]))
    assert past["at"] == recorded.before_spawn + 2 and past["writes"] == []


def test_a_member_spawned_after_the_start_is_followed_once_a_document_names_it(url: str, recorded: Recorded) -> None:
    store = PostgresStore(url)
    lead = _copy(store, recorded.lead, upto=recorded.before_spawn)
    reader = BackendReader(PostgresStore(url))

    async def follow() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        run = FollowedRun(reader.read(recorded.lead[0].id), reader)
        feed = Feed(run)
        run.start(feed.poke)
        queue = feed.open(None)
        messages = [await queue.get()]
        try:
            await asyncio.to_thread(_extend, lead, recorded.lead)
            builder = await asyncio.to_thread(store.create, recorded.builder[0])
            await asyncio.to_thread(_extend, builder, recorded.builder)
            while (message := await asyncio.wait_for(queue.get(), 30)) is not None:
                messages.append(message)
                if int(message["id"]) == len(recorded.lead[1]):
                    break
            while not run.writes(feed.fold().state, None):  # type: ignore[union-attr]
                await asyncio.sleep(0.02)  # the builder's log arrives on its own
            await asyncio.to_thread(builder.close)
            return [json.loads(m["data"]) | {"kind": m["event"]} for m in messages], feed.document() or {}
        finally:
            feed.close_all()
            await asyncio.to_thread(run.close)

    try:
        messages, doc = asyncio.run(follow())
        again = FollowedRun(reader.read(recorded.lead[0].id), reader)  # a panel started now reads the logs once
        fresh = Feed(again).document() or {}
        again.close()
    finally:
        lead.close()
        store.close()
        reader.store.close()
    assert fresh["writes"] == doc["writes"] and fresh["members"] == doc["members"]
    assert messages[0]["kind"] == "snapshot" and [m["name"] for m in messages[0]["members"]] == ["lead"]
    assert [w["member"] for w in doc["writes"]] == ["builder"]
    assert next(m["usage"] for m in doc["members"] if m["name"] == "builder") == msgspec.to_builtins(
        fold_usage(recorded.builder[1]))
