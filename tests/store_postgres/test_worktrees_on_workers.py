"""Worktree mode across machines: members on ``dsh worker`` processes, each with its own clone of the Lead's repository.

Real parts throughout: a PostgreSQL server, a Lead process (``dsh run --store``)
in its git repository, and worker processes (``dsh worker --store --workspace
CLONE --lead-repo LEAD``) whose checkouts are separate ``git clone``\\ s of it.
Two members edit the same line of the same file: one merges, the other meets
``TEAM_MERGE_CONFLICT``, resolves git's markers in its worktree *on its worker*
and completes again. Git (the Lead's repository and the clones) and the work desk
(who ran each call) are the oracles.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from kit_postgres import shared_server
from kit_worktree_teams import CONFLICTING_TEAM, one_member_team

from host_spec.host.store.postgres import PostgresStore

from test_members_on_workers import Workers, work_rows

pytestmark = pytest.mark.timeout_s(240)

#: Lease seconds: short enough that a dead worker's member is taken back soon, long enough that a Lead
#: process slowed down by a busy machine keeps its Team (the members-on-workers suite's 2 s is tight here).
LEASE = "5"


def env(lease: str) -> dict[str, str]:
    """This process's environment for a Lead or worker on the shared store, with ``lease`` seconds per lease."""
    variables = {key: value for key, value in os.environ.items() if key not in ("DSH_DATA_DIR", "DSH_STORE")}
    variables["DSH_LEASE_SECONDS"] = lease
    return variables


def git(repo: Path | str, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    pool = Workers(shared_server().new_database(), tmp_path, lease=LEASE)
    yield pool
    pool.stop()


def lead_repository(tmp_path: Path) -> Path:
    lead = tmp_path / "lead"
    lead.mkdir()
    git(lead, "init", "-q", "-b", "main")
    git(lead, "config", "user.name", "Test User")
    git(lead, "config", "user.email", "test@example.invalid")
    (lead / "shared.txt").write_text("base\n")
    git(lead, "add", "-A")
    git(lead, "commit", "-q", "-m", "initial")
    return lead


def run_lead(workers: Workers, tmp_path: Path, lead: Path) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "teams-worktree.toml"
    profile.write_text('extends = "agent-teams"\n\n[plugins.dsh-team]\nworkspace_mode = "worktree"\n')
    script = tmp_path / "team.json"
    script.write_text(json.dumps(CONFLICTING_TEAM))
    return subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", "run", "--store", workers.url,
                           "--profile", str(profile), "--model", f"scripted:{script}", "--workspace", str(lead),
                           "go"], cwd=tmp_path, env=env(LEASE), text=True, capture_output=True, timeout=200)  # fmt: skip


def member_ids(url: str) -> dict[str, str]:
    """Member name -> session id, from the store (a member's recorded workspace is its worktree, named after it)."""
    store = PostgresStore(url)
    try:
        headers = [store.header(sid) for sid in store.list_ids()]
        return {Path(str(h.cwd)).name: h.id for h in headers if h.parent_session is not None}
    finally:
        store.close()


def worker_holders(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT holder FROM dsh_leases WHERE key LIKE 'worker:%' AND holder IS NOT NULL").fetchall()
    return {str(holder) for (holder,) in rows}


def tool_results(url: str, session_id: str) -> list[dict[str, Any]]:
    store = PostgresStore(url)
    try:
        return [e.value() for e in store.read(session_id)[1] if e.type == "tool/result"]
    finally:
        store.close()


def test_members_on_two_workers_merge_and_resolve_a_conflict_through_the_leads_repository(
    workers: Workers, tmp_path: Path
) -> None:
    lead = lead_repository(tmp_path)
    base = git(lead, "rev-parse", "main")
    clones = [tmp_path / "clone-a", tmp_path / "clone-b"]
    for clone in clones:
        git(tmp_path, "clone", "-q", str(lead), str(clone))
        workers.start("--workspace", str(clone), "--lead-repo", str(lead), "--max-members", "1")
    workers.wait_present(2)

    done = run_lead(workers, tmp_path, lead)
    assert done.returncode == 0, done.stderr[-3000:]

    # Every file and shell call of both members ran on a worker, none in the Lead's process.
    ids = member_ids(workers.url)
    assert set(ids) == {"alice", "bob"}
    rows = [row for row in work_rows(workers.url) if row[0] in ids.values() and row[1] == "tool"]
    assert all(state == "settled" and holder in worker_holders(workers.url) for _, _, state, holder in rows), rows
    # Per member: 3 file calls, then the completion's steps (pending, commit); the loser's conflict adds the
    # merge step, its resolution 2 file calls, and its second completion pending and commit again.
    counts = sorted(sum(1 for row in rows if row[0] == sid) for sid in ids.values())
    assert counts == [5, 10], rows
    # One member per worker (--max-members 1): the two clones each ran one of them.
    assert len({holder for _, _, _, holder in rows}) == 2
    # The Lead's main holds both members' work, the loser's resolution, and a clean checkout.
    assert (lead / "alice.txt").read_text() == "by alice\n" and (lead / "bob.txt").read_text() == "by bob\n"
    authors = git(lead, "log", "--format=%an", f"{base}..main").splitlines()
    assert {"alice (dsh)", "bob (dsh)"} <= set(authors)
    merge = git(lead, "log", "--merges", "--format=%an|%s", f"{base}..main").splitlines()
    assert len(merge) == 1 and "the Lead's branch merged in" in merge[0]
    loser = merge[0].split(" (dsh)|")[0]
    assert (lead / "shared.txt").read_text() == f"{loser}\n"
    assert git(lead, "status", "--porcelain") == ""
    conflict = [r for r in tool_results(workers.url, ids[loser]) if "TEAM_MERGE_CONFLICT" in json.dumps(r)]
    assert len(conflict) == 1 and "shared.txt" in json.dumps(conflict[0])
    # Each member worked in its own worktree of a worker's clone, on its branch; the loser's merge of main
    # (the markers it edited away) happened there, and its head is what main points at now.
    heads: dict[str, str] = {}
    for clone in clones:
        for name in ("alice", "bob"):
            path = clone / ".git" / "dsh-worktrees" / "session-1" / name
            if path.is_dir():
                assert (path / f"{name}.txt").read_text() == f"by {name}\n"
                assert git(path, "rev-parse", "--abbrev-ref", "HEAD") == f"dsh/session-1/{name}"
                heads[name] = git(path, "rev-parse", "HEAD")
        assert not (clone / "alice.txt").exists() and not (clone / "bob.txt").exists()  # never the clone's own files
    assert set(heads) == {"alice", "bob"}
    assert heads[loser] == git(lead, "rev-parse", "main")
    # A clean end on the Lead's side: its worktrees, branches and pushed heads are gone.
    assert git(lead, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert git(lead, "branch", "--list", "dsh/*") == "" and git(lead, "for-each-ref", "refs/dsh-pushed/") == ""


def one_member_script(tmp_path: Path, when: str = "stopped before it answered") -> Path:
    """:func:`kit_worktree_teams.one_member_team` written to a script file."""
    script = tmp_path / "one.json"
    script.write_text(json.dumps(one_member_team(when)))
    return script


def run_one(workers: Workers, tmp_path: Path, lead: Path) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "teams-worktree.toml"
    profile.write_text('extends = "agent-teams"\n\n[plugins.dsh-team]\nworkspace_mode = "worktree"\n')
    return subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", "run", "--store", workers.url,
                           "--profile", str(profile), "--model", f"scripted:{one_member_script(tmp_path)}",
                           "--workspace", str(lead), "go"], cwd=tmp_path, env=env(LEASE), text=True,
                          capture_output=True, timeout=200)  # fmt: skip


#: A hook of the Lead's repository: SIGKILL the ``dsh worker`` whose push just landed (once), before it answers.
KILL_THE_PUSHER = f"""#!{sys.executable}
import os, signal, sys
marker = os.path.join(os.environ.get("GIT_DIR", "."), "killed-a-worker")
if os.path.exists(marker):
    sys.exit(0)
pid = os.getppid()
while pid > 1:
    with open(f"/proc/{{pid}}/cmdline", "rb") as f:
        argv = f.read().split(b"\\0")
    if b"host_spec.host.cli.main" in argv and b"worker" in argv:
        open(marker, "w").close()
        os.kill(pid, signal.SIGKILL)
        break
    with open(f"/proc/{{pid}}/stat") as f:
        pid = int(f.read().rsplit(")", 1)[1].split()[1])
"""


def test_a_worker_killed_right_after_its_push_is_replaced_and_the_merge_happens_once(
    workers: Workers, tmp_path: Path
) -> None:
    lead = lead_repository(tmp_path)
    base = git(lead, "rev-parse", "main")
    hook = lead / ".git" / "hooks" / "post-receive"
    hook.write_text(KILL_THE_PUSHER)
    hook.chmod(0o755)
    clones = [tmp_path / "clone-a", tmp_path / "clone-b"]
    for clone in clones:
        git(tmp_path, "clone", "-q", str(lead), str(clone))
        workers.start("--workspace", str(clone), "--lead-repo", str(lead), "--max-members", "1")
    workers.wait_present(2)

    done = run_one(workers, tmp_path, lead)
    assert done.returncode == 0, done.stderr[-3000:]

    # One worker died mid-step (its push had landed); the other took the member over from the pushed head.
    assert sorted(proc.poll() or 0 for proc in workers.procs) == [-9, 0]
    (dana,) = member_ids(workers.url).values()
    texts = [json.dumps(r) for r in tool_results(workers.url, dana)]
    blocked = [t for t in texts if "TEAM_MERGE_BLOCKED" in t]
    assert len(blocked) == 1 and "stopped before it answered the commit step" in blocked[0]
    # The member's commit is on main exactly once, its file in the Lead's clean checkout.
    assert git(lead, "log", "--format=%an", f"{base}..main").splitlines() == ["dana (dsh)"]
    assert (lead / "dana.txt").read_text() == "by dana\n" and git(lead, "status", "--porcelain") == ""
    survivor = clones[[proc.poll() for proc in workers.procs].index(None)]
    path = survivor / ".git" / "dsh-worktrees" / "session-1" / "dana"
    assert git(path, "rev-parse", "HEAD") == git(lead, "rev-parse", "main")


async def test_a_worker_on_the_leads_machine_leaves_the_worktree_steps_to_the_lead(
    workers: Workers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSH_LEASE_SECONDS", LEASE)
    lead = lead_repository(tmp_path)
    workers.start()  # no --workspace: it acts in the paths the members' sessions record
    workers.wait_present(1)
    profile = tmp_path / "teams-worktree.toml"
    profile.write_text('extends = "agent-teams"\n\n[plugins.dsh-team]\nworkspace_mode = "worktree"\n')

    await lead_in_process(workers.url, lead, profile, one_member_script(tmp_path))  # the Lead's side measured

    (dana,) = member_ids(workers.url).values()
    rows = [row for row in work_rows(workers.url) if row[0] == dana and row[1] == "tool"]
    assert len(rows) == 3  # its write, then the steps pending and commit, each answered "do it yourself"
    assert (lead / "dana.txt").read_text() == "by dana\n"
    assert git(lead, "log", "-1", "--format=%an", "main") == "dana (dsh)"
    assert git(lead, "for-each-ref", "refs/dsh-pushed/") == ""  # nothing was pushed: one repository


def test_a_lead_repo_that_reads_as_an_option_is_refused(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", "worker", "--store",
                             "postgresql:///x?host=/nowhere", "--lead-repo=--upload-pack=x"], cwd=tmp_path,
                            env=env(LEASE), text=True, capture_output=True, timeout=60)  # fmt: skip
    assert result.returncode == 2 and "CLI_USAGE" in result.stderr and "--lead-repo" in result.stderr


def test_a_remote_members_task_checks_run_on_its_worker_against_its_current_files(
    workers: Workers, tmp_path: Path
) -> None:
    """The check needs dana's uncommitted file: it can only pass in dana's worktree on the worker."""
    lead = lead_repository(tmp_path)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(lead), str(clone))
    workers.start("--workspace", str(clone), "--lead-repo", str(lead))
    workers.wait_present(1)
    profile = tmp_path / "checked.toml"
    profile.write_text('extends = "agent-teams"\n\n[plugins.dsh-team]\nworkspace_mode = "worktree"\n\n'
                       "[plugins.dsh-team.checks]\nmine = \"grep -q 'by dana' dana.txt && pwd > where.txt\"\n")
    script = one_member_script(tmp_path)
    team = json.loads(script.read_text())
    team["lead"][0]["tool_calls"][0]["arguments"]["checks"] = ["mine"]
    script.write_text(json.dumps(team))
    done = subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", "run", "--store", workers.url,
                           "--profile", str(profile), "--model", f"scripted:{script}", "--workspace", str(lead),
                           "go"], cwd=tmp_path, env=env(LEASE), text=True, capture_output=True, timeout=200)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]

    (dana,) = member_ids(workers.url).values()
    assert not [r for r in tool_results(workers.url, dana) if "TEAM_TASK_CHECK_FAILED" in json.dumps(r)]
    rows = [row for row in work_rows(workers.url) if row[0] == dana and row[1] == "tool"]
    assert len(rows) == 4  # its write, then the check, pending and commit steps, all on the worker
    # The check ran in dana's worktree of the worker's clone (what it wrote there was committed with its work).
    worktree = (clone / ".git" / "dsh-worktrees" / "session-1" / "dana").resolve()
    assert (lead / "where.txt").read_text().strip() == str(worktree)
    assert (lead / "dana.txt").read_text() == "by dana\n"


async def lead_in_process(url: str, lead: Path, profile: Path, script: Path) -> None:
    """The Lead's run in this process (so its side of the steps is measured), its members on the workers."""
    from host_spec.host.app import Host
    from host_spec.host.cli.run_commands import claim_root
    from host_spec.host.cli.run_settings import RunSettings, encode_settings

    model = f"scripted:{script}"
    host = await Host.open(url, str(profile), model)
    try:
        session = await claim_root(host, str(lead))
        host.store.put_run(session.id, encode_settings(RunSettings(str(profile), model)))  # the workers read it
        await host.run("go", session=session)
    finally:
        await host.close()


async def test_in_process_lead_a_checked_task_and_a_worker_that_cannot_reach_the_lead(
    workers: Workers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """First a worker whose --lead-repo is wrong: the member's calls fail there naming the flag, nothing is
    merged; then, with a worker that reaches the Lead's repository, the checked task completes from its worktree."""
    monkeypatch.setenv("DSH_LEASE_SECONDS", LEASE)
    lead = lead_repository(tmp_path)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(lead), str(clone))
    profile = tmp_path / "checked.toml"
    profile.write_text('extends = "agent-teams"\n\n[plugins.dsh-team]\nworkspace_mode = "worktree"\n\n'
                       "[plugins.dsh-team.checks]\nmine = \"grep -q 'by dana' dana.txt\"\n")
    script = one_member_script(tmp_path)
    team = json.loads(script.read_text())
    team["lead"][0]["tool_calls"][0]["arguments"]["checks"] = ["mine"]
    script.write_text(json.dumps(team))

    wrong = workers.start("--workspace", str(clone), "--lead-repo", str(tmp_path / "not-the-lead"))
    workers.wait_present(1)
    await lead_in_process(workers.url, lead, profile, script)
    (dana,) = member_ids(workers.url).values()
    store = PostgresStore(workers.url)
    try:
        logged = json.dumps([e.value() for e in store.read(dana)[1]])
    finally:
        store.close()
    assert "cannot make dsh/session-1/dana's worktree from --lead-repo" in logged
    assert git(lead, "log", "--format=%an", "main") == "Test User"  # nothing merged

    wrong.terminate()
    wrong.wait(30)
    workers.start("--workspace", str(clone), "--lead-repo", str(lead))
    workers.wait_present(1)
    await lead_in_process(workers.url, lead, profile, script)  # a second Team (session-2) in the same repository
    store = PostgresStore(workers.url)
    try:
        (again,) = [sid for sid in store.list_ids() if store.header(sid).parent_session == "session-2"]
    finally:
        store.close()
    assert not [r for r in tool_results(workers.url, again) if "TEAM_TASK_CHECK_FAILED" in json.dumps(r)]
    assert (lead / "dana.txt").read_text() == "by dana\n"
    assert git(lead, "log", "-1", "--format=%an", "main") == "dana (dsh)"
    assert (clone / ".git" / "dsh-worktrees" / "session-2" / "dana" / "dana.txt").exists()
