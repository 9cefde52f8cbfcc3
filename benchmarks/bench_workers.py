"""Members on several workers: one Team's members run by ``dsh worker`` processes (a real server, ``fsync`` on).

X2: 16 members, each running 5 workspace commands of 100 ms (what a model call or
    a test run costs a member in wall time, not the coordinator's CPU), through a
    Lead process and 4 worker processes (4 members each), against one member
    running the same 80 commands through the Lead and one worker. Each side's
    time is the members' work window, from the first call posted to the desk to
    the last one answered (the server's clock; process start-up is left out).
    Goal >= 4.
X3t: cross-process pickup in that run: from a call posted by the Lead's process
    (the member's turn start in its log) until a worker has taken it, woken by
    NOTIFY; p50 and p99 in milliseconds, goal p99 <= 50 ms.

The server is started by ``tests/kit_postgres.py``; when none can start the
bench prints why and reports nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MEMBERS = 16
WORKERS = 4
COMMANDS = 5
COMMAND = "sleep 0.1"


def _script(members: int, commands: int) -> dict[str, Any]:
    spawns = [{"name": "spawn_teammate", "arguments": {"name": f"m{i}", "description": "runs commands",
                                                      "context": "fresh", "prompt": "run your commands"}}
              for i in range(members)]
    script: dict[str, Any] = {"lead": [{"text": "Spawning.", "tool_calls": spawns}, {"text": "Spawned."}]}
    for i in range(members):
        steps = [{"text": "", "tool_calls": [{"name": "bash", "arguments": {"command": COMMAND}}]} for _ in range(commands)]
        script[f"m{i}"] = [*steps, {"text": "done"}]
    return script


def _dsh(*args: str) -> list[str]:
    return [sys.executable, "-m", "host_spec.host.cli.main", *args]


def wait_for_workers(url: str, count: int) -> None:
    """Return once ``count`` workers hold their presence lease on the store at ``url`` (``RuntimeError`` after 60 s)."""
    import psycopg

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with psycopg.connect(url) as conn:
                row = conn.execute("SELECT count(*) FROM dsh_leases WHERE key LIKE 'worker:%' "
                                   "AND holder IS NOT NULL AND expires_at > now()").fetchone()
            if row and row[0] >= count:
                return
        except psycopg.errors.UndefinedTable:
            pass  # no worker has created the tables yet
        time.sleep(0.1)
    raise RuntimeError(f"{count} workers did not come up")


def _run_team(url: str, work: Path, members: int, commands: int, workers: int, per_worker: int) -> tuple[float, list[float]]:
    """Run one Team to quiescence; the members' work window (s) and every call's pickup latency (ms)."""
    import psycopg

    script = work / f"team-{members}.json"
    script.write_text(json.dumps(_script(members, commands)))
    workspace = work / f"ws-{members}"
    workspace.mkdir()
    profile = work / "team16.toml"  # the built-in profile allows 8 teammates
    profile.write_text(f'extends = "agent-teams"\n[plugins.dsh-team]\nmax_members = {MEMBERS}\n')
    env = {**os.environ, "DSH_LEASE_SECONDS": "5"}
    env.pop("DSH_DATA_DIR", None)
    procs = [subprocess.Popen(_dsh("worker", "--store", url, "--max-members", str(per_worker)), env=env, cwd=work,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(workers)]
    try:
        wait_for_workers(url, workers)
        subprocess.run(_dsh("run", "--store", url, "--profile", str(profile), "--model", f"scripted:{script}",
                            "--workspace", str(workspace), "go"), env=env, cwd=work, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(60)
    with psycopg.connect(url) as conn:
        window = conn.execute("SELECT extract(epoch FROM max(answered_at) - min(posted_at))::float8, count(*), "
                              "count(*) FILTER (WHERE holder IS NULL) FROM dsh_work").fetchone()
        pickups = conn.execute("SELECT extract(epoch FROM taken_at - posted_at)::float8 * 1000 FROM dsh_work "
                               "WHERE taken_at IS NOT NULL").fetchall()
    assert window is not None and window[1] == members * (commands * 2 + 1), window  # every call went to a worker
    return float(window[0]), [float(row[0]) for row in pickups]


def run() -> list[tuple[str, float, float]]:
    """Print the lines and return ``(id, measured, goal)`` per goal (none without a server)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    try:
        from kit_postgres import PostgresServer, PostgresUnavailable
    except ImportError as exc:
        print(f"workers: skipped: {exc} (pip install 'dsh-team[postgres]')")
        return []
    try:
        server = PostgresServer(durable=True)
        server.start()
    except PostgresUnavailable as exc:
        print(f"workers: skipped: no PostgreSQL server could start: {exc}")
        return []
    try:
        with tempfile.TemporaryDirectory(prefix="dsh-bench-workers-") as tmp:
            work = Path(tmp)
            serial, _ = _run_team(server.new_database(), work, 1, MEMBERS * COMMANDS, 1, 1)
            spread, pickups = _run_team(server.new_database(), work, MEMBERS, COMMANDS, WORKERS, MEMBERS // WORKERS)
    finally:
        server.destroy()
    pickups.sort()
    p50 = pickups[len(pickups) // 2]
    p99 = pickups[min(len(pickups) - 1, round(0.99 * (len(pickups) - 1)))]
    x2 = serial / spread
    print(f"workers: 1 member, {MEMBERS * COMMANDS} commands of 100 ms on 1 worker        {serial:6.2f} s of work window")
    print(f"workers: {MEMBERS} members x {COMMANDS} commands on {WORKERS} workers ({MEMBERS // WORKERS} members each) "
          f"{spread:6.2f} s  (X2 {x2:.2f}x)")
    print(f"workers: post -> taken by a worker (NOTIFY), {len(pickups)} calls: p50 {p50:.2f} ms, p99 {p99:.2f} ms")
    return [("X2", x2, 4.0), ("X3tp50", p50, 50.0), ("X3tp99", p99, 50.0)]


if __name__ == "__main__":
    from benchmarks._common import report

    for bench_id, measured, goal in run():
        report(bench_id, measured, goal)
