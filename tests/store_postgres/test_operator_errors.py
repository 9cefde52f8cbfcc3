"""Errors an operator can act on, against real servers: the server's own reason, and a Lead that lost its Team.

A full server (``too many clients already``, a server of this module's own with
a handful of connection slots) and a server shutting down are outages: retried,
told once with the server's words, and quoted in the one-line error once the
retry window is spent. A Lead whose connections the server refused long enough
for its lease to expire is taken over by a real ``dsh worker``; when the server
lets it back in, it exits ``SESSION_FENCED`` naming that worker, with no
traceback. The oracles: the server's refusal text, and the Team lease row.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import structlog
from kit_postgres import PostgresServer, shared_server

from host_spec.errors import StoreUnavailableError
from host_spec.host.store.postgres.link import Link

FULL = "too many clients already"
_roles = itertools.count(1)


@pytest.fixture(scope="module")
def small() -> Iterator[PostgresServer]:
    """A server of this module's own with five connection slots, none reserved for superusers."""
    server = PostgresServer(settings={"max_connections": "5", "superuser_reserved_connections": "0"})
    server.start()
    yield server
    server.destroy()


def _fill(url: str) -> list[psycopg.Connection[Any]]:
    """Every free connection slot of the server, held (the next client is refused: the server is full)."""
    held: list[psycopg.Connection[Any]] = []
    try:
        while len(held) < 50:
            held.append(psycopg.connect(url, autocommit=True))
    except psycopg.OperationalError as exc:
        assert FULL in str(exc), exc
        return held
    raise AssertionError("the server never filled")


def _env(lease: str) -> dict[str, str]:
    variables = {key: value for key, value in os.environ.items() if key not in ("DSH_DATA_DIR", "DSH_STORE")}
    variables["DSH_LEASE_SECONDS"] = lease
    return variables


class TestAFullServer:
    def test_the_one_line_error_and_the_log_line_quote_the_server(self, small: PostgresServer) -> None:
        url = small.new_database()
        held = _fill(url)
        try:
            with structlog.testing.capture_logs() as logs:
                with pytest.raises(StoreUnavailableError) as caught:
                    Link(url, retry_seconds=1.0).run(lambda conn, _: conn.execute("SELECT 1"))
        finally:
            for conn in held:
                conn.close()
        assert caught.value.code == "STORE_UNAVAILABLE" and FULL in caught.value.message
        assert "\n" not in caught.value.message
        assert [line["event"] for line in logs] == ["store.connection_lost"]
        assert FULL in logs[0]["reason"]

    def test_a_worker_says_why_it_waits_then_that_it_is_connected(self, small: PostgresServer, tmp_path: Path) -> None:
        url = small.new_database()
        held = _fill(url)
        worker = subprocess.Popen([sys.executable, "-m", "host_spec.host.cli.main", "worker", "--store", url,
                                   "--max-members", "2"], cwd=tmp_path, env=_env("5"), text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        try:
            assert worker.stderr is not None
            first = worker.stderr.readline()
            held.pop().close()  # one slot free: the worker gets in
            for conn in held:
                conn.close()
            lines = [worker.stderr.readline(), worker.stderr.readline()]
        finally:
            for conn in held:
                conn.close()
            worker.terminate()
            _, rest = worker.communicate(timeout=30)
        assert "store.connection_lost" in first and FULL in first, first
        assert "store.connection_restored" in lines[0], lines
        assert "watching the store; it holds up to 2 members at once (--max-members)" in lines[1], lines
        assert "Traceback" not in rest, rest


class TestAServerShuttingDown:
    def test_its_refusal_is_an_outage_quoted_in_the_error(self) -> None:
        server = PostgresServer()
        server.start()
        try:
            url = server.new_database()
            staying = psycopg.connect(url)  # a smart shutdown waits for this client
            try:
                server.begin_shutdown()
                with structlog.testing.capture_logs() as logs:
                    with pytest.raises(StoreUnavailableError) as caught:
                        Link(url, retry_seconds=1.0).run(lambda conn, _: conn.execute("SELECT 1"))
            finally:
                staying.close()
        finally:
            server.destroy()
        assert "the database system is shutting down" in caught.value.message
        assert "the database system is shutting down" in logs[0]["reason"]


#: A Lead with one runner whose shell command waits for ``release.txt`` (the Lead meanwhile only waits).
WAITING_TEAM: dict[str, Any] = {
    "lead": [
        {"text": "A runner.", "tool_calls": [{"name": "spawn_teammate", "arguments": {
            "name": "runner", "description": "Waits", "context": "fresh", "prompt": "Run the command."}}]},
        {"when": "runner finished", "text": "Done."},
    ],
    "runner": [
        {"text": "Running it.", "tool_calls": [{"name": "bash", "arguments": {
            "command": "echo started > ran.txt; while [ ! -f release.txt ]; do sleep 0.05; done"}}]},
        {"text": "Reporting.", "tool_calls": [{"name": "send_message", "arguments": {
            "target": "lead", "message": "runner finished"}}]},
        {"text": "Done."},
    ],
}


def _lease(admin: str) -> tuple[str | None, int]:
    with psycopg.connect(admin) as conn:
        row = conn.execute("SELECT holder, epoch FROM dsh_leases WHERE key = 'session-1'").fetchone()
    return (row[0], int(row[1])) if row else (None, 0)


def _wait(what: str, ready: Any, *procs: subprocess.Popen[str], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline or any(proc.poll() is not None for proc in procs):
            raise AssertionError(f"{what} did not happen")
        time.sleep(0.05)


class TestALeadRefusedUntilItsTeamWasTakenOver:
    def test_it_exits_fenced_naming_the_worker_that_took_it_with_no_traceback(self, tmp_path: Path) -> None:
        server = shared_server()
        admin_db = server.new_database()
        database = admin_db.split("///")[1].split("?")[0]
        role = f"lead_{os.getpid()}_{next(_roles)}"
        with psycopg.connect(server.url(), autocommit=True) as conn:
            conn.execute(f'CREATE ROLE "{role}" LOGIN')
            conn.execute(f'ALTER DATABASE "{database}" OWNER TO "{role}"')
        lead_url = admin_db.replace("user=postgres", f"user={role}")
        script = tmp_path / "team.json"
        script.write_text(json.dumps(WAITING_TEAM))
        workspace = tmp_path / "ws"
        workspace.mkdir()
        lead = subprocess.Popen([sys.executable, "-m", "host_spec.host.cli.main", "run", "--store", lead_url,
                                 "--profile", "agent-teams", "--model", f"scripted:{script}", "--workspace",
                                 str(workspace), "go"], cwd=tmp_path, env=_env("2"), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        worker: subprocess.Popen[str] | None = None
        try:
            _wait("the runner's command", (workspace / "ran.txt").exists, lead)
            first_holder, first_epoch = _lease(admin_db)
            with psycopg.connect(server.url(), autocommit=True) as conn:  # the server refuses the Lead's role
                conn.execute(f'ALTER ROLE "{role}" CONNECTION LIMIT 0')
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))
            worker = subprocess.Popen([sys.executable, "-m", "host_spec.host.cli.main", "worker", "--store", admin_db,
                                       "--poll", "0.2"], cwd=tmp_path, env=_env("2"), text=True,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
            _wait("the takeover", lambda: _lease(admin_db)[1] > first_epoch, lead, worker)
            thief, _ = _lease(admin_db)
            with psycopg.connect(server.url(), autocommit=True) as conn:  # let the Lead back in
                conn.execute(f'ALTER ROLE "{role}" CONNECTION LIMIT -1')
            (workspace / "release.txt").write_text("go\n")
            _, err = lead.communicate(timeout=120)
        finally:
            if lead.poll() is None:
                lead.kill()
                lead.wait()
            if worker is not None:
                worker.terminate()
                worker.communicate(timeout=60)
        assert thief is not None and thief != first_holder
        assert lead.returncode == 2, err
        assert "Traceback" not in err and "never retrieved" not in err, err
        assert "store.connection_lost" in err and f'too many connections for role "{role}"' in err, err
        last = err.strip().splitlines()[-1]
        assert last.startswith(f"dsh: SESSION_FENCED: team session-1 was taken over by holder {thief}"), last
