"""SIGKILL of the Lead at every durable point of a merge whose member runs on another machine's worker.

A worktree-mode Lead (:mod:`wt_remote_crash_driver`, a real subprocess on a real
PostgreSQL server) runs one member, ``dana``, whose calls -- and whose completion's
commit and push -- run on a ``dsh worker`` with its own clone of the Lead's
repository. The Lead kills itself at the point; a worker takes the orphaned Team
over (the resume) and runs it to quiescence. Git is the oracle: the Lead's branch
holds dana's commit exactly once, the task is ``completed``, the Lead's checkout is
clean and holds the file, and no ``team/merge`` is left at ``intent``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit_postgres import shared_server

from dsh_team.core.fold import replay
from host_spec.host.store.postgres import PostgresStore

from test_members_on_workers import Workers
from test_worktrees_on_workers import LEASE, env, git, lead_repository, one_member_script

pytestmark = [pytest.mark.slow, pytest.mark.timeout_s(240)]

DRIVER = Path(__file__).with_name("wt_remote_crash_driver.py")
POINTS = ["merge-received", "merge-intent", "ref-moved", "checkout-synced", "task-completed"]


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    pool = Workers(shared_server().new_database(), tmp_path, lease=LEASE)
    yield pool
    pool.stop()


def wait_for(workers: Workers, text: str, seconds: float = 150) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if any(text in workers.stderr(i) for i in range(len(workers.procs))):
            return
        time.sleep(0.2)
    said = " | ".join(workers.stderr(i) for i in range(len(workers.procs)))
    raise AssertionError(f"no worker said {text!r}: {said}")


@pytest.mark.parametrize("point", POINTS)
def test_a_lead_killed_while_merging_a_remote_members_work_merges_it_exactly_once(
    workers: Workers, tmp_path: Path, point: str
) -> None:
    lead = lead_repository(tmp_path)
    base = git(lead, "rev-parse", "main")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(lead), str(clone))
    workers.start("--workspace", str(clone), "--lead-repo", str(lead))
    workers.wait_present(1)
    profile = tmp_path / "teams-worktree.toml"
    profile.write_text('extends = "agent-teams"\n\n[plugins.dsh-team]\nworkspace_mode = "worktree"\n')

    script = one_member_script(tmp_path, "restart")
    killed = subprocess.run([sys.executable, str(DRIVER), workers.url, str(lead), str(script), str(profile), point], cwd=tmp_path, env=env(LEASE), capture_output=True, text=True,
                            timeout=150)  # fmt: skip
    assert killed.returncode == -9, killed.stderr[-3000:]
    pushed = git(lead, "for-each-ref", "--format=%(objectname)", "refs/dsh-pushed/")
    assert pushed  # the member's head came from the worker before the kill
    wait_for(workers, "team session-1 is quiescent")  # the worker took the Team over and resumed it

    store = PostgresStore(workers.url)
    try:
        events = store.read("session-1")[1]
    finally:
        store.close()
    state = replay(events, "session-1")
    assert state.tasks.tasks["task-1"].status == "completed"
    assert git(lead, "log", "--format=%an", f"{base}..main").splitlines().count("dana (dsh)") == 1
    assert (lead / "dana.txt").read_text() == "by dana\n"
    assert git(lead, "status", "--porcelain") == ""
    latest = {e.value()["merge_id"]: e.value()["phase"] for e in events if e.type == "team/merge"}
    assert "intent" not in latest.values() and list(latest.values()).count("done") == 1
    assert git(clone / ".git" / "dsh-worktrees" / "session-1" / "dana", "log", "-1", "--format=%an") == "dana (dsh)"
