"""The ``dsh`` command on a shared store: ``--store``, ``DSH_STORE`` and the profile's ``[store] url``.

Real subprocesses against a real server. The oracle for the demo team is the
same demo run on the embedded JSONL store: both boards must agree task by task
(owners' ids aside, which are fresh per run).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psycopg
from kit_postgres import shared_server

from host_spec.host.demo import SCRIPT as DEMO
from host_spec.host.store.postgres import PostgresStore

ROOT = Path(__file__).resolve().parents[2]

#: Holds the lease of an existing root (resumed, not written) until stdin closes.
HOLD_ROOT = textwrap.dedent(
    """
    import sys
    from host_spec.host.store.postgres import PostgresStore
    store = PostgresStore(sys.argv[1])
    log, _ = store.resume(sys.argv[2])
    print("ready", flush=True)
    sys.stdin.read()
    log.close()
    store.close()
    """
)


def dsh(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    variables = {key: value for key, value in os.environ.items() if key not in ("DSH_DATA_DIR", "DSH_STORE")}
    variables.update(env or {})
    return subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", *args], cwd=cwd, env=variables,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def board(show: str) -> list[dict[str, Any]]:
    return [{key: value for key, value in task.items() if key != "owner_id"} for task in json.loads(show)["tasks"]]


def run_demo(tmp_path: Path, name: str, *where: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    workspace = tmp_path / name
    workspace.mkdir()
    return dsh("run", *where, "--profile", "agent-teams", "--model", f"scripted:{DEMO}", "--workspace", str(workspace),
               "Build the greeting module", cwd=tmp_path, env=env)


class TestTheDemoTeamOnPostgres:
    def test_the_demo_completes_and_every_read_command_takes_the_store(self, tmp_path: Path) -> None:
        url = shared_server().new_database()
        shared = run_demo(tmp_path, "shared", "--store", url)
        assert shared.returncode == 0, shared.stderr
        assert not (tmp_path / ".dsh-data").exists()  # nothing went to the embedded store
        assert (tmp_path / "shared" / "src" / "greet.py").is_file()
        embedded = run_demo(tmp_path, "embedded", "--data-dir", str(tmp_path / "data"))
        assert embedded.returncode == 0, embedded.stderr
        show = dsh("team", "show", "--store", url, "--json", cwd=tmp_path)
        reference = dsh("team", "show", "--data-dir", str(tmp_path / "data"), "--json", cwd=tmp_path)
        assert show.returncode == 0 and reference.returncode == 0, show.stderr + reference.stderr
        assert board(show.stdout) == board(reference.stdout) and len(board(show.stdout)) == 2
        assert {task["status"] for task in board(show.stdout)} == {"completed"}
        log = dsh("log", "--json", "session-1", cwd=tmp_path, env={"DSH_STORE": url})
        stored = PostgresStore(url).read("session-1")[1]
        assert log.returncode == 0 and len(log.stdout.splitlines()) == 1 + len(stored)
        trace = dsh("trace", "export", "--store", url, cwd=tmp_path)
        assert trace.returncode == 0 and json.loads(trace.stdout)["resourceSpans"]
        resumed = dsh("resume", cwd=tmp_path, env={"DSH_STORE": url})  # settings come from the store
        assert resumed.returncode == 0, resumed.stderr
        assert "dsh: session session-1" in resumed.stderr

    def test_a_profile_can_name_the_store(self, tmp_path: Path) -> None:
        url = shared_server().new_database()
        profile = tmp_path / "shared.toml"
        profile.write_text(f'extends = "agent-teams"\n[store]\nurl = "{url}"\n')
        script = tmp_path / "s.json"
        script.write_text(json.dumps({"lead": [{"text": "done"}]}))
        result = dsh("run", "--profile", str(profile), "--model", f"scripted:{script}", "go", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert PostgresStore(url).roots() == ["session-1"]

    def test_a_bad_store_is_a_usage_error_naming_it(self, tmp_path: Path) -> None:
        result = dsh("team", "show", "--store", "sqlite:///x", cwd=tmp_path)
        assert result.returncode != 0 and "STORE_INVALID" in result.stderr
        profile = tmp_path / "bad.toml"
        profile.write_text('extends = "headless"\n[store]\nurl = "/a/path"\n')
        result = dsh("run", "--profile", str(profile), "--model", "scripted:x.json", "go", cwd=tmp_path)
        assert result.returncode != 0 and "store.url" in result.stderr


class TestOneLeadProcessPerTeam:
    def test_a_team_held_by_a_live_process_is_refused_to_another(self, tmp_path: Path) -> None:
        url = shared_server().new_database()
        script = tmp_path / "s.json"
        script.write_text(json.dumps({"lead": [{"text": "done"}]}))
        assert dsh("run", "--store", url, "--model", f"scripted:{script}", "go", cwd=tmp_path).returncode == 0
        holder = subprocess.Popen([sys.executable, "-c", HOLD_ROOT, url, "session-1"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)  # fmt: skip
        try:
            assert holder.stdout is not None
            assert any(line.startswith("ready") for line in holder.stdout)
            refused = dsh("resume", "--store", url, "session-1", cwd=tmp_path)
            assert refused.returncode != 0 and "SESSION_LOCKED" in refused.stderr
        finally:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait(30)
        assert dsh("resume", "--store", url, "session-1", cwd=tmp_path).returncode == 0  # released: free again


class TestWorker:
    def test_a_worker_needs_a_shared_store(self, tmp_path: Path) -> None:
        result = dsh("worker", cwd=tmp_path)
        assert result.returncode == 2 and "CLI_USAGE" in result.stderr
        result = dsh("worker", "--store", "postgresql:///x?host=/nowhere", "--max-teams", "0", cwd=tmp_path)
        assert result.returncode == 2 and "--max-teams" in result.stderr

    def test_a_team_that_closed_cleanly_is_not_taken_over(self, tmp_path: Path) -> None:
        url = shared_server().new_database()
        script = tmp_path / "s.json"
        script.write_text(json.dumps({"lead": [{"text": "done"}]}))
        variables = {**os.environ, "DSH_LEASE_SECONDS": "0.5"}
        worker = subprocess.Popen([sys.executable, "-m", "host_spec.host.cli.main", "worker", "--store", url,
                                   "--poll", "0.1"], env=variables, cwd=tmp_path, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        try:
            assert dsh("run", "--store", url, "--model", f"scripted:{script}", "go", cwd=tmp_path,
                       env={"DSH_LEASE_SECONDS": "0.5"}).returncode == 0
            time.sleep(1.5)  # three lease times and many polls
        finally:
            worker.send_signal(signal.SIGTERM)
            out, err = worker.communicate(timeout=30)
        assert worker.returncode == 0, err
        assert "is watching the store" in err and "taking over" not in err
        with psycopg.connect(url) as conn:
            rows = conn.execute("SELECT key, holder, epoch FROM dsh_leases WHERE key NOT LIKE 'worker:%'").fetchall()
            assert rows == [("session-1", None, 1)]
            # the worker's presence lease is released when it stops: Leads stop handing it work
            assert conn.execute("SELECT holder FROM dsh_leases WHERE key LIKE 'worker:%'").fetchall() == [(None,)]


class TestInProcess:
    """The same commands through ``main()`` in this process (the subprocess tests cover the real CLI)."""

    def test_run_show_log_resume_and_worker_usage(self, tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
        from host_spec.host.cli.main import main

        monkeypatch.delenv("DSH_STORE", raising=False)
        monkeypatch.chdir(tmp_path)
        url = shared_server().new_database()
        script = tmp_path / "s.json"
        script.write_text(json.dumps({"lead": [{"text": "first"}, {"text": "second"}]}))
        assert main(["run", "--store", url, "--model", f"scripted:{script}", "go"]) == 0
        capsys.readouterr()
        assert main(["team", "show", "--store", url, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["session_id"] == "session-1"
        assert main(["log", "--store", url, "session-1"]) == 0
        assert "session session-1" in capsys.readouterr().out
        monkeypatch.setenv("DSH_STORE", url)
        assert main(["resume"]) == 0  # profile and model from the store's run record
        assert main(["team", "show", "nope"]) == 2
        assert "SESSION_NOT_FOUND" in capsys.readouterr().err
        monkeypatch.delenv("DSH_STORE")
        assert main(["worker"]) == 2
        assert "CLI_USAGE" in capsys.readouterr().err
        assert not (tmp_path / ".dsh-data").exists()
