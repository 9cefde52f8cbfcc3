"""A process that lost its Team says so: no traceback, a non-zero exit, the code and the holder that took it.

The takeover is made by hand on the real server (the lease row moves to holder
``thief:1`` under a higher epoch, exactly what another process's claim does), at
several points of the demo Team's run: the Lead's next append is fenced, and
whatever it was doing then (a teammate mid-turn, its own wait), it must end with
one ``dsh: SESSION_FENCED`` line naming the thief and exit 2, with no traceback
anywhere on stderr. The oracle for "lost" is the lease row itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from kit_postgres import shared_server

from host_spec.events import SessionHeader
from host_spec.host.demo import SCRIPT
from host_spec.host.placement.capacity import default_max_members, machine
from host_spec.host.store.postgres import PostgresStore
from host_spec.testing import make_events

ROOT = Path(__file__).resolve().parents[2]
DEMO = SCRIPT
THIEF = "thief:1"
_STEAL = ("UPDATE dsh_leases SET holder = %s, epoch = epoch + 1, expires_at = now() + interval '1 hour' "
          "WHERE key = 'session-1'")


def _events(url: str) -> int:
    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            row = conn.execute("SELECT count(*) FROM dsh_events").fetchone()
            return int(row[0]) if row else 0
    except psycopg.Error:
        return 0  # the tables are not there yet


def _steal(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(_STEAL, (THIEF,))


class TestAFencedLead:
    @pytest.mark.parametrize("point", [10, 45])
    def test_it_exits_with_the_code_and_the_new_holder_and_no_traceback(self, tmp_path: Path, point: int) -> None:
        url = shared_server().new_database()
        workspace = tmp_path / "ws"
        workspace.mkdir()
        variables = {key: value for key, value in os.environ.items() if key not in ("DSH_DATA_DIR", "DSH_STORE")}
        lead = subprocess.Popen([sys.executable, "-m", "host_spec.host.cli.main", "run", "--store", url, "--profile",
                                 "agent-teams", "--model", f"scripted:{DEMO}", "--workspace", str(workspace),
                                 "Build the greeting module"], cwd=tmp_path, env=variables, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        try:
            while _events(url) < point and lead.poll() is None:
                time.sleep(0.005)
            assert lead.poll() is None, "the run ended before the takeover point"
            _steal(url)
            _, err = lead.communicate(timeout=120)
        finally:
            if lead.poll() is None:
                lead.kill()
                lead.wait()
        assert lead.returncode == 2, err
        assert "Traceback" not in err and "never retrieved" not in err, err
        last = err.strip().splitlines()[-1]
        assert last.startswith("dsh: SESSION_FENCED: team session-1 was taken over by holder thief:1"), last
        with psycopg.connect(url) as conn:  # the oracle: the lease is the thief's, at the epoch it took
            assert conn.execute("SELECT holder, epoch FROM dsh_leases WHERE key = 'session-1'").fetchone() == (THIEF, 2)


class TestTheStoreKnowsItLostATeam:
    def test_a_release_that_finds_the_lease_taken_reports_the_takeover(self) -> None:
        url = shared_server().new_database()
        store = PostgresStore(url, lease_seconds=30, retry_seconds=5)
        try:
            log = store.create(SessionHeader(id="session-1", created_at=1, cwd="/"))
            log.append(make_events(1, 1), expected_seq=0)
            log.sync()
            log.close()  # a clean close: nothing lost
            assert store.takeover() is None
            log, _ = store.resume("session-1")
            _steal(url)  # no append is attempted: only the release can tell
            log.close()
            lost = store.takeover()
        finally:
            store.close()
        assert lost is not None and lost.code == "SESSION_FENCED"
        assert "taken over by holder thief:1" in lost.message and "epoch 3" in lost.message
        assert lost.details["holder"] == THIEF and lost.details["epoch"] == 2

    def test_a_holder_that_took_the_team_and_released_it_is_still_named(self) -> None:
        url = shared_server().new_database()
        store, thief = PostgresStore(url, lease_seconds=30, retry_seconds=5), PostgresStore(url, holder="thief:2")
        try:
            log = store.create(SessionHeader(id="session-1", created_at=1, cwd="/"))
            log.append(make_events(1, 1), expected_seq=0)
            log.sync()
            with psycopg.connect(url, autocommit=True) as conn:  # the lease runs out (a Lead refused by its server)
                conn.execute("UPDATE dsh_leases SET expires_at = now() - interval '1 second' WHERE key = 'session-1'")
            taken, _ = thief.resume("session-1")
            taken.close()  # it finished the Team and let it go before the old holder asks
            log.close()
            lost = store.takeover()
        finally:
            store.close()
            thief.close()
        assert lost is not None and lost.code == "SESSION_FENCED"
        assert "taken over by holder thief:2 (lease epoch 2, since released; this process held epoch 1)" in lost.message
        assert lost.details["holder"] == "thief:2" and lost.details["released"] is True


class TestAWorkerTakeoverThatFails:
    def test_its_failure_is_one_line_and_the_worker_keeps_watching(self, tmp_path: Path) -> None:
        url = shared_server().new_database()
        store = PostgresStore(url, lease_seconds=30, retry_seconds=5)
        try:
            log = store.create(SessionHeader(id="session-1", created_at=1, cwd=str(tmp_path)))
            log.append(make_events(1, 1), expected_seq=0)
            log.sync()
            log.close()
        finally:
            store.close()
        with psycopg.connect(url, autocommit=True) as conn:  # its holder died: the lease is held but expired
            conn.execute("UPDATE dsh_leases SET holder = 'dead:1', expires_at = now() - interval '1 second' "
                         "WHERE key = 'session-1'")
        worker = subprocess.Popen([sys.executable, "-m", "host_spec.host.cli.main", "worker", "--store", url,
                                   "--poll", "0.1", "--profile", str(tmp_path / "missing.toml")], cwd=tmp_path,
                                  text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        try:
            assert worker.stderr is not None
            lines = [worker.stderr.readline() for _ in range(3)]
        finally:
            worker.terminate()
            _, rest = worker.communicate(timeout=30)
        assert "watching the store" in lines[0] and "taking over team session-1" in lines[1], lines
        here = machine()  # no --max-members: the room comes from this machine, and the first line says so
        expected = default_max_members(here.cpus, here.memory)
        assert lines[0].rstrip().endswith(f"; it holds up to {expected} members at once (from {here.describe()})"), lines
        assert lines[2].startswith("dsh worker: team session-1: CONFIG_INVALID: "), lines
        assert worker.returncode == 0, rest
        assert "Traceback" not in rest and "never retrieved" not in rest, rest
