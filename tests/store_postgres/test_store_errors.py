"""Honest store errors, against a real server: a refusal fails at once with its code, an outage is told once.

Real subprocesses of the ``dsh`` command and a real PostgreSQL server (a role
that needs a password, a database that does not exist, a role whose connection
limit fills). What must hold: a permanent refusal (wrong password, unknown
database, a URL libpq cannot use, another scheme) ends the command at once, exit
2, on one ``dsh: CODE: ...`` line, and the password is nowhere in its output or
in anything written; a lost or refused connection is retried and told on one
line per change of state (lost, restored), with the server's own reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest
import structlog
from kit_postgres import shared_server

from host_spec.errors import ConfigError, StoreUnavailableError
from host_spec.host.store.postgres.link import Link

#: The real password of the role the tests create, and the wrong one they give.
PASSWORD = "right-horse-battery-9"
WRONG = "wrong-staple-pw-7"
#: Longer than any case may take: a refusal retried as an outage would run into it (the retry window is 30 s).
PROMPT_SECONDS = 20


def _start(*args: str, cwd: Path) -> subprocess.Popen[str]:
    variables = {key: value for key, value in os.environ.items() if key not in ("DSH_DATA_DIR", "DSH_STORE")}
    return subprocess.Popen([sys.executable, "-m", "host_spec.host.cli.main", *args], cwd=cwd, env=variables,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def _finish(process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    try:
        out, err = process.communicate(timeout=PROMPT_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def dsh(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return _finish(_start(*args, cwd=cwd))


@pytest.fixture(scope="module")
def password_url() -> str:
    """The URL of a role that needs :data:`PASSWORD` (the password in the URL)."""
    return shared_server().password_role("pw_alice", PASSWORD)


def _script(tmp_path: Path) -> Path:
    script = tmp_path / "s.json"
    script.write_text('{"lead": [{"text": "done"}]}')
    return script


def _cases(password_url: str) -> dict[str, tuple[str, str]]:
    server = shared_server()
    return {
        "wrong password": (password_url.replace(PASSWORD, WRONG), "STORE_AUTH"),
        "unknown database": (server.url("no_such_db").replace("user=postgres", f"user=postgres&password={WRONG}"),
                             "STORE_NOT_FOUND"),
        "non-numeric port": (f"postgresql://u:{WRONG}@localhost:54x2/db", "STORE_INVALID"),
        "malformed URL": (f"postgresql://u:{WRONG}@[::1/db", "STORE_INVALID"),
        "another scheme": (f"mysql://u:{WRONG}@db-host/db", "STORE_INVALID"),
    }


class TestARefusalFailsAtOnce:
    @pytest.mark.parametrize("case", ["wrong password", "unknown database", "non-numeric port", "malformed URL",
                                      "another scheme"])
    def test_every_command_ends_on_one_line_with_its_code_and_never_shows_the_password(
            self, tmp_path: Path, password_url: str, case: str) -> None:
        url, code = _cases(password_url)[case]
        script = _script(tmp_path)
        commands = (["run", "--store", url, "--model", f"scripted:{script}", "go"],
                    ["team", "show", "--store", url], ["log", "--store", url, "session-1"], ["worker", "--store", url])
        started = [(command, _start(*command, cwd=tmp_path)) for command in commands]  # at once: each must end soon
        for command, process in started:
            result = _finish(process)
            assert result.returncode == 2, (command, result.stderr)
            assert result.stderr.splitlines() == [result.stderr.strip()], (command, result.stderr)  # one line
            assert result.stderr.startswith(f"dsh: {code}: "), (command, result.stderr)
            assert WRONG not in result.stdout + result.stderr
            assert "is watching the store" not in result.stderr  # a worker never says it is ready
        assert not (tmp_path / ".dsh-data").exists()  # nothing went anywhere else either

    def test_a_profile_store_url_with_another_scheme_hides_its_password(self, tmp_path: Path) -> None:
        profile = tmp_path / "p.toml"
        profile.write_text(f'extends = "headless"\n[store]\nurl = "mysql://u:{WRONG}@db-host/db"\n')
        result = dsh("run", "--profile", str(profile), "--model", f"scripted:{_script(tmp_path)}", "go", cwd=tmp_path)
        assert result.returncode == 2 and "STORE_INVALID" in result.stderr and "mysql://u:***@db-host/db" in result.stderr
        assert WRONG not in result.stdout + result.stderr

    def test_a_role_that_may_not_create_the_tables_is_refused_at_once(self, tmp_path: Path, password_url: str) -> None:
        result = dsh("run", "--store", password_url, "--model", f"scripted:{_script(tmp_path)}", "go", cwd=tmp_path)
        assert result.returncode == 2 and result.stderr.startswith("dsh: STORE_AUTH: "), result.stderr
        assert "permission denied for schema public" in result.stderr and len(result.stderr.splitlines()) == 1
        assert PASSWORD not in result.stdout + result.stderr

    def test_the_right_password_works_and_is_stored_nowhere(self, tmp_path: Path, password_url: str) -> None:
        # the role may create its tables in a database it owns
        with psycopg.connect(shared_server().url(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE pw_alice_db OWNER pw_alice")
        url = password_url.replace("/postgres?", "/pw_alice_db?")
        result = dsh("run", "--store", url, "--model", f"scripted:{_script(tmp_path)}", "go", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert PASSWORD not in result.stdout + result.stderr
        with psycopg.connect(url) as conn:  # the run record, the leases, the logs: no password in any row
            for table in ("dsh_runs", "dsh_sessions", "dsh_events", "dsh_leases"):
                rows = conn.execute(f"SELECT * FROM {table}").fetchall()
                assert rows and PASSWORD not in repr(rows)


@pytest.fixture
def crowded() -> tuple[str, str]:
    """A role with room for one connection, and the URL of a database it owns: ``(role, url)``."""
    server = shared_server()
    role = f"crowd_{os.getpid()}_{time.monotonic_ns() % 10**6}"
    with psycopg.connect(server.url(), autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT 1')
        conn.execute(f'CREATE DATABASE "{role}" OWNER "{role}"')
    return role, server.url(role).replace("user=postgres", f"user={role}")


class TestAnOutageIsToldOncePerChange:
    def test_a_full_server_is_retried_told_once_with_its_reason_and_once_restored(self, crowded: tuple[str, str]) -> None:
        role, url = crowded
        holding = psycopg.connect(url)  # the role's one connection
        link = Link(url, retry_seconds=20)
        done: list[object] = []
        with structlog.testing.capture_logs() as logs:
            runner = threading.Thread(target=lambda: done.append(link.run(lambda conn, _: conn.execute("SELECT 1").fetchone())))
            runner.start()
            deadline = time.monotonic() + 10
            while not logs and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(0.5)  # many more attempts, each refused
            holding.close()
            runner.join(20)
        link.close()
        assert done == [(1,)]
        assert [line["event"] for line in logs] == ["store.connection_lost", "store.connection_restored"]
        assert f'too many connections for role "{role}"' in logs[0]["reason"]

    def test_past_the_retry_window_the_error_quotes_the_server(self, crowded: tuple[str, str]) -> None:
        role, url = crowded
        with psycopg.connect(url), structlog.testing.capture_logs() as logs:
            link = Link(url, retry_seconds=1.0)
            with pytest.raises(StoreUnavailableError) as caught:
                link.run(lambda conn, _: conn.execute("SELECT 1"))
        assert f'too many connections for role "{role}"' in caught.value.message and "\n" not in caught.value.message
        assert [line["event"] for line in logs] == ["store.connection_lost"]  # not one per attempt

    def test_a_refusal_is_not_retried(self, password_url: str) -> None:
        link = Link(password_url.replace(PASSWORD, WRONG), retry_seconds=30)
        with structlog.testing.capture_logs() as logs, pytest.raises(ConfigError) as caught:
            link.run(lambda conn, _: conn.execute("SELECT 1"))
        assert caught.value.code == "STORE_AUTH" and 'password authentication failed for user "pw_alice"' in caught.value.message
        assert WRONG not in caught.value.message and logs == []


class TestTheWorkerIsReadyWhenConnected:
    def test_the_readiness_line_comes_after_the_store_answers(self, tmp_path: Path, crowded: tuple[str, str]) -> None:
        role, url = crowded
        with psycopg.connect(shared_server().url(), autocommit=True) as conn:
            conn.execute(f'ALTER ROLE "{role}" CONNECTION LIMIT 0')  # refused (a full server) until let in
        worker = subprocess.Popen([sys.executable, "-m", "host_spec.host.cli.main", "worker", "--store", url],
                                  cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        try:
            assert worker.stderr is not None
            first = worker.stderr.readline()
            assert "store.connection_lost" in first and "too many connections" in first, first
            time.sleep(1.0)  # still refused: it has not said it is ready (it is not)
            with psycopg.connect(shared_server().url(), autocommit=True) as conn:
                conn.execute(f'ALTER ROLE "{role}" CONNECTION LIMIT -1')
            lines = [worker.stderr.readline(), worker.stderr.readline()]
        finally:
            worker.terminate()
            _, rest = worker.communicate(timeout=30)
        assert "store.connection_restored" in lines[0], lines
        assert "is connected to" in lines[1] and "watching the store" in lines[1], lines
        assert worker.returncode == 0, rest
        assert "Traceback" not in rest and "never retrieved" not in rest
