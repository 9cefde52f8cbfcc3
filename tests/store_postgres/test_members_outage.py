"""The database stopped and restarted while a member's call runs on a worker (a server of this module's own).

The Lead process, the worker and the member all lose their connections at once,
as in a network cut to the database. The oracle: the Team still ends with its
task completed, every call on the desk answered once, and the member's report in
the Lead's log exactly once.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from kit_postgres import PostgresServer, own_server, running_database

from host_spec.host.store.postgres import PostgresStore

from test_cli_store import dsh
from test_members_on_workers import SLOW_TEAM, Workers, run_until_the_command_runs, work_rows

server = pytest.fixture(scope="module", name="server")(own_server)
LEASE = "6"  # longer than the outage: the worker keeps its member across it


class TestAnOutageWhileMembersRunOnWorkers:
    def test_the_team_carries_on_after_the_server_comes_back(self, server: PostgresServer, tmp_path: Path) -> None:
        url = running_database(server)
        team = json.loads(json.dumps(SLOW_TEAM))
        team["runner"][1]["tool_calls"][0]["arguments"]["command"] = "echo started > ran.txt; sleep 2"
        pool = Workers(url, tmp_path, lease=LEASE)
        try:
            pool.start()
            _, lead = run_until_the_command_runs(pool, tmp_path, team, lease=LEASE)
            server.stop("immediate")  # every connection of every process is cut
            restart = threading.Thread(target=lambda: (time.sleep(1.5), server.start()))
            restart.start()
            out, err = lead.communicate(timeout=120)
            restart.join()
        finally:
            pool.stop()
        assert lead.returncode == 0, err
        show = json.loads(dsh("team", "show", "--store", url, "--json", cwd=tmp_path).stdout)
        assert [(t["subject"], t["status"]) for t in show["tasks"]] == [("Slow work", "completed")]
        rows = work_rows(url)
        assert rows and {state for _, _, state, _ in rows} == {"settled"}
        assert len({holder for *_, holder in rows}) == 1  # the worker kept its member across the outage
        lead_log = PostgresStore(url).read("session-1")[1]
        reports = [e for e in lead_log if e.type == "user/message" and "runner finished" in json.dumps(e.value())]
        assert len(reports) == 1
        assert "runner finished" in out
