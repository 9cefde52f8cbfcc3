"""The panel's lifecycle and its two sources: a live host (plugin ``dsh-team-web``) and stored logs (``dsh team serve``)."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import structlog
from sse_starlette.sse import AppStatus
from starlette.testclient import TestClient

from host_spec.errors import ConfigError, PluginError
from dsh_team.web.plugin import Panel
from host_spec.host.app import Host
from host_spec.host.cli.main import main
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.cli.extensions import StoreReader
from dsh_team.web.app import build_app
from dsh_team.web.sources import StoredRun
from dsh_team.web.stream import Feed
from web_kit import PROMPT, SCRIPT, TOKEN, Dispatch, LoopThread, open_team

AUTH = {"X-Dsh-Token": TOKEN}
POST = {**AUTH, "Origin": "http://testserver"}


@pytest.fixture(autouse=True)
def _logging() -> Iterator[None]:
    """``main()`` configures structlog for the process; undo it for the tests that follow."""
    yield
    structlog.reset_defaults()


def _stored(path: Path, *, finish: bool = False) -> Path:
    """A finished run's data dir (the kit's scripted run, closed; ``finish``: the builder wrote and completed)."""
    thread = LoopThread()
    try:
        team = thread.call(open_team(path))
        if finish:
            thread.call(team.tell("builder", "finish now"))
        thread.call(team.host.close())
    finally:
        thread.stop()
    return path


def _stored_app(path: Path, session: str = "session-1", *, writes: bool = False) -> TestClient:
    reader = StoreReader(JsonlStore(path))
    run = StoredRun(reader.read(session, salvage=True), reader if writes else None)
    return TestClient(build_app(Feed(run), TOKEN))


# ---------------------------------------------------------------- live: the plugin


async def test_the_panel_serves_on_the_hosts_loop_and_stops_with_the_run(tmp_path: Path) -> None:
    team = await open_team(tmp_path)
    url = team.panel.url
    assert url.startswith("http://127.0.0.1:") and url.endswith(f"/?token={TOKEN}")
    async with httpx2.AsyncClient() as client:
        response = await client.get(url.replace("/?", "/api/team?"))
        assert response.status_code == 200 and response.json()["live"] is True
    await team.host.close()
    with pytest.raises(httpx2.ConnectError):
        async with httpx2.AsyncClient() as client:
            await client.get(url)


async def test_a_random_token_is_made_per_run_and_printed_with_the_url(tmp_path: Path, capsys: Any) -> None:
    urls = []
    for name in ("a", "b"):
        host = await Host.open(tmp_path / name, None, ScriptedModel.from_mapping({}))
        host.plugins.load("dsh-team-web")
        urls.append(host.service(Panel).url)
        await host.close()
    first, second = urls
    assert first.split("token=")[1] != second.split("token=")[1] and len(first.split("token=")[1]) >= 32
    assert f"dsh: Team panel: {first}" in capsys.readouterr().err


@pytest.mark.parametrize("config", [{"port": -1}, {"port": "80"}, {"colour": 1}])
async def test_a_bad_config_fails_the_load(tmp_path: Path, config: dict[str, Any]) -> None:
    async with await Host.open(tmp_path, None, ScriptedModel.from_mapping({})) as host:
        with pytest.raises(ConfigError, match="plugins.dsh-team-web"):
            host.plugins.load("dsh-team-web", config)
        assert host.find_service(Panel) is None


async def test_a_port_in_use_fails_the_load_and_nothing_stays(tmp_path: Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()

    async def body() -> None:
        async with await Host.open(tmp_path, None, ScriptedModel.from_mapping({})) as host:
            with pytest.raises(PluginError):
                host.plugins.load("dsh-team-web", {"port": taken.getsockname()[1]})
            assert host.find_service(Panel) is None

    try:
        await body()
    finally:
        taken.close()


def test_before_the_run_starts_the_page_waits_and_then_gets_a_snapshot(tmp_path: Path) -> None:
    dispatch = Dispatch()
    with TestClient(dispatch) as client:
        async def open_host() -> Host:
            host = await Host.open(tmp_path, "agent-teams", ScriptedModel.from_mapping(SCRIPT))
            host.plugins.load("dsh-team-web", {"token": TOKEN})
            return host

        host = client.portal.call(open_host)
        panel = host.service(Panel)
        dispatch.app = panel.app
        early = client.get("/api/team", headers=AUTH)
        assert (early.status_code, early.json()["error"]["code"]) == (503, "WEB_NO_TEAM")
        refused = client.post("/api/tasks", json={"subject": "x", "description": "y"}, headers=POST).json()
        assert refused["ok"] is False and refused["error"]["reason"] == "TEAM_NOT_MEMBER"

        async def run_then_close_streams() -> None:
            while panel.feed.watching == 0:
                await asyncio.sleep(0.01)
            await host.run(PROMPT)
            panel.feed.close_all()

        client.portal.start_task_soon(run_then_close_streams)
        body = client.get("/api/events", headers=AUTH).text
        kinds = [line.split(": ")[1] for line in body.splitlines() if line.startswith("event: ")]
        assert kinds[0] == "snapshot" and "snapshot" not in kinds[1:] and len(kinds) > 1
        client.portal.call(host.close)


def test_without_the_team_service_the_page_shows_the_log_and_refuses_changes(tmp_path: Path) -> None:
    dispatch = Dispatch()
    with TestClient(dispatch) as client:
        async def open_host() -> Host:
            host = await Host.open(tmp_path, None, ScriptedModel.from_mapping({}))
            host.start_agent(await host.create_session("root"), name="lead")
            host.plugins.load("dsh-team-web", {"token": TOKEN})  # the root is live already: the panel follows it
            return host

        host = client.portal.call(open_host)
        dispatch.app = host.service(Panel).app
        doc = client.get("/api/team", headers=AUTH).json()
        assert doc["team_id"] == "root" and doc["enabled"] is None and doc["members"][0]["status"] == "idle"
        for path, body in (("/api/tasks", {"subject": "x", "description": "y"}), ("/api/tasks/task-1", {}),
                           ("/api/mode", {"enabled": False})):
            result = client.post(path, json=body, headers=POST).json()
            assert result["ok"] is False and result["error"]["message"] == "the Team service is not loaded"
        client.portal.call(host.close)


def test_dsh_run_web_serves_during_the_run_and_stops_with_it(tmp_path: Path, capsys: Any) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    (tmp_path / "workspace").mkdir()
    args = ["run", "--profile", "agent-teams", "--model", f"scripted:{script}", "--data-dir", str(tmp_path / "data"),
            "--workspace", str(tmp_path / "workspace"), "--web=0", PROMPT]
    assert main(args) == 0
    err = capsys.readouterr().err
    url = err.split("dsh: Team panel: ")[1].split()[0]
    assert url.startswith("http://127.0.0.1:") and "token=" in url
    with pytest.raises(httpx2.ConnectError):
        httpx2.get(url, timeout=10)
    for bad in ("--web=x", "--web=70000"):
        with pytest.raises(SystemExit) as exited:
            main(["run", "--model", f"scripted:{script}", bad, PROMPT])
        assert exited.value.code == 2
    assert "PORT must be" in capsys.readouterr().err


# ---------------------------------------------------------------- stored: the logs


def test_a_stored_run_is_read_only_with_offline_statuses(tmp_path: Path) -> None:
    with _stored_app(_stored(tmp_path / "data")) as client:
        doc = client.get("/api/team", headers=AUTH).json()
        assert doc["live"] is False and doc["offline"] is True and doc["read_only"] is True
        assert [m["status"] for m in doc["members"]] == ["inactive", "inactive"] and doc["enabled"] is True
        refused = client.post("/api/tasks", json={"subject": "x", "description": "y"}, headers=POST)
        assert (refused.status_code, refused.json()["error"]["code"]) == (405, "WEB_READ_ONLY")
        first = doc["timeline"][0]["seq"]
        assert [m["name"] for m in client.get(f"/api/team?at={first}", headers=AUTH).json()["members"]] == ["lead"]
        feed = client.app.state.feed  # type: ignore[attr-defined]

        async def end_streams() -> None:
            while feed.watching == 0:
                await asyncio.sleep(0.01)
            feed.close_all()

        client.portal.start_task_soon(end_streams)
        stream = client.get("/api/events", headers=AUTH).text
        assert stream.count("event: snapshot") == 1 and f"id: {doc['at']}" in stream


def test_a_stored_run_shows_the_members_audited_writes_at_any_position(tmp_path: Path) -> None:
    with _stored_app(_stored(tmp_path / "data", finish=True), writes=True) as client:
        doc = client.get("/api/team", headers=AUTH).json()
        [write] = doc["writes"]
        assert [m["usage"]["calls"] for m in doc["members"]] == [3, 4]  # every model call, placeholders included
        assert (write["member"], write["path"], write["tool"], write["tasks"], write["in_scope"]) == (
            "builder", "src/a.py", "write_file", ["task-1"], True)
        completed = next(e["seq"] for e in doc["timeline"] if e["summary"].startswith("task-1 completed"))
        assert client.get(f"/api/team?at={doc['timeline'][0]['seq']}", headers=AUTH).json()["writes"] == []
        assert len(client.get(f"/api/team?at={completed}", headers=AUTH).json()["writes"]) == 1  # written just before


def test_a_stored_run_marks_each_send_with_its_status_as_of_the_position_shown(tmp_path: Path) -> None:
    """``message_status`` names every send of the timeline; at an earlier position, the status it had then."""
    with _stored_app(_stored(tmp_path / "data", finish=True)) as client:
        doc = client.get("/api/team", headers=AUTH).json()
        sends = [e for e in doc["timeline"] if e["type"] == "team/message/queued"]
        assert sends and {doc["message_status"][e["message_id"]] for e in sends} == {"read"}
        assert [m["unread_mail"] for m in doc["members"]] == [0, 0]
        then = client.get(f"/api/team?at={sends[0]['seq']}", headers=AUTH).json()
        assert then["message_status"][sends[0]["message_id"]] == "queued"
        assert [m["pending_mail"] for m in then["members"]] == [0, 1]


def test_a_damaged_stored_log_shows_its_last_valid_state_and_the_failure(tmp_path: Path) -> None:
    data = _stored(tmp_path / "data")
    log = data / "sessions" / "session-1" / "session.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    middle = len(lines) // 2
    log.write_bytes(b"".join(lines[:middle] + [b'{"broken\n'] + lines[middle + 1:]))
    with _stored_app(data) as client:
        doc = client.get("/api/team", headers=AUTH).json()
    assert doc["failure"]["source"] == "log" and doc["failure"]["seq"] == doc["log_length"] + 1
    assert doc["at"] == doc["log_length"] < len(lines) - 1


def test_team_serve_serves_the_stored_run_until_interrupted(tmp_path: Path, monkeypatch: Any) -> None:
    data = _stored(tmp_path / "data")
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    # sse-starlette notes uvicorn's exit signal in a process-wide flag; a served process ends there,
    # this test process goes on (the library's documented reset for tests).
    monkeypatch.setattr(AppStatus, "should_exit", False)
    seen: dict[str, Any] = {}

    def browse() -> None:
        try:
            while "token=" not in stderr.getvalue():
                threading.Event().wait(0.02)
            url = stderr.getvalue().split("read-only): ")[1].split()[0]
            seen["doc"] = httpx2.get(url.replace("/?", "/api/team?"), timeout=30).json()
        finally:
            os.kill(os.getpid(), signal.SIGINT)

    browser = threading.Thread(target=browse)
    browser.start()
    status = main(["team", "serve", "--data-dir", str(data)])
    browser.join(30)
    assert status == 130
    assert seen["doc"]["read_only"] is True and [m["name"] for m in seen["doc"]["members"]] == ["lead", "builder"]
    assert "Team panel of session-1 (read-only): http://127.0.0.1:" in stderr.getvalue()


def test_team_serve_reports_what_it_cannot_read(tmp_path: Path, capsys: Any) -> None:
    assert main(["team", "serve", "--data-dir", str(tmp_path / "missing")]) == 2
    assert "DATA_DIR_NOT_FOUND" in capsys.readouterr().err
    data = _stored(tmp_path / "data")
    assert main(["team", "serve", "--data-dir", str(data), "no-such-session"]) == 2
    assert "no-such-session" in capsys.readouterr().err
