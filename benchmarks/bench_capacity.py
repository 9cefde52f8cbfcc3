"""Many Teams on one PostgreSQL server: throughput and connections as the number of Teams grows.

N Teams start at once (N = 1, 8, 32), each a ``dsh run --store`` Lead process with
three teammates whose work is workspace commands of fixed length (``sleep``: what
a model call or a test run costs a member in wall time, not the coordinator's
CPU), on one durable server (``fsync`` on) with its ``max_connections`` left at
PostgreSQL's default (100), and two ``dsh worker`` processes at default flags.
Each N gets a fresh database, fresh workers and fresh workspaces.

* ``T8``: Teams finished per second at N = 32 over at N = 1. One Team alone
  leaves the CPUs mostly idle (its members wait on their commands), so a system
  whose only limits are the machine's should finish many Teams in the time of
  one. Goal >= 5 on the 2-core machine, with every Team finished (exit 0) and
  none fenced.
* ``T8c``: the peak number of server connections (``pg_stat_activity`` of the
  database, the sampler's own left out, sampled every 20 ms) per live Team during
  the N = 32 run. Goal <= 1.2.

Also printed: each N's wall time, Teams per second, the calls the workers took and
the calls their Leads ran themselves, and the peak connections. The server is
started by ``tests/kit_postgres.py``; when none can start the bench prints why and
reports nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_workers import wait_for_workers  # noqa: E402

TEAMS = tuple(int(n) for n in os.environ.get("DSH_BENCH_TEAMS", "1,8,32").split(","))
MEMBERS = 3  # teammates per Team
COMMANDS = 3  # workspace commands per teammate
COMMAND = "sleep 1"
WORKERS = 2
TIMEOUT_S = 600
T8_GOAL, T8C_GOAL = 5.0, 1.2


def team_script() -> dict[str, Any]:
    """The scripted Team: the Lead spawns its members and ends its turn; each runs its commands (the run ends quiet)."""
    spawns = [{"name": "spawn_teammate", "arguments": {"name": f"m{i}", "description": "runs commands",
                                                      "context": "fresh", "prompt": "run your commands"}}
              for i in range(MEMBERS)]
    script: dict[str, Any] = {"lead": [{"text": "Spawning.", "tool_calls": spawns}, {"text": "Spawned."}]}
    for i in range(MEMBERS):
        steps = [{"text": "", "tool_calls": [{"name": "bash", "arguments": {"command": COMMAND}}]}
                 for _ in range(COMMANDS)]
        script[f"m{i}"] = [*steps, {"text": "done"}]
    return script


def _dsh(*args: str) -> list[str]:
    return [sys.executable, "-m", "host_spec.host.cli.main", *args]


def _env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in ("DSH_DATA_DIR", "DSH_STORE")}
    env["DSH_LEASE_SECONDS"] = "5"
    return env


class Sampler:
    """Samples the database's connections (``pg_stat_activity``) on its own thread; keeps the peak."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        query = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                 "AND pid <> pg_backend_pid()")
        while not self._stop.is_set():
            row = self.conn.execute(query).fetchone()
            self.peak = max(self.peak, int(row[0]) if row else 0)
            self._stop.wait(0.02)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.conn.close()


def run_teams(url: str, work: Path, teams: int) -> dict[str, Any]:
    """Start ``teams`` Leads at once with two workers; their wall time, exits, desk counts and peak connections."""
    import psycopg

    work.mkdir()
    script = work / "team.json"
    script.write_text(json.dumps(team_script()))
    env = _env()
    workers = [subprocess.Popen(_dsh("worker", "--store", url), env=env, cwd=work, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL) for _ in range(WORKERS)]  # fmt: skip
    failures: list[str] = []
    try:
        wait_for_workers(url, WORKERS)
        with Sampler(url) as sampler:
            started = time.perf_counter()
            leads = []
            for index in range(teams):
                workspace = work / f"ws-{index}"
                workspace.mkdir()
                err = open(work / f"lead-{index}.err", "w")
                leads.append((subprocess.Popen(
                    _dsh("run", "--store", url, "--profile", "agent-teams", "--model", f"scripted:{script}",
                         "--workspace", str(workspace), "go"),
                    env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=err), err))
            for index, (lead, err) in enumerate(leads):
                code = lead.wait(TIMEOUT_S)
                err.close()
                text = (work / f"lead-{index}.err").read_text(errors="replace")
                if code != 0 or "SESSION_FENCED" in text:
                    failures.append(f"team {index}: exit {code}: {text.strip().splitlines()[-1:] or ''}")
            wall = time.perf_counter() - started
    finally:
        for proc in workers:
            proc.terminate()
        for proc in workers:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
    with psycopg.connect(url) as conn:
        taken, here = conn.execute("SELECT count(*) FILTER (WHERE holder IS NOT NULL), "
                                   "count(*) FILTER (WHERE holder IS NULL) FROM dsh_work").fetchone() or (0, 0)
    return {"teams": teams, "wall": wall, "rate": teams / wall, "failures": failures, "peak": sampler.peak,
            "taken": int(taken), "unplaced": int(here)}


def run() -> list[tuple[str, float, float]]:
    """Print one line per N and return ``T8`` and ``T8c`` (nothing without a server)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    try:
        import psycopg  # noqa: F401
        from kit_postgres import PostgresServer, PostgresUnavailable
    except ImportError as exc:
        print(f"capacity: skipped: {exc} (pip install 'dsh-team[postgres]')")
        return []
    try:
        server = PostgresServer(durable=True, settings={"max_connections": "100"})  # PostgreSQL's default
        server.start()
    except PostgresUnavailable as exc:
        print(f"capacity: skipped: no PostgreSQL server could start: {exc}")
        return []
    results: dict[int, dict[str, Any]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="dsh-bench-capacity-") as tmp:
            for teams in TEAMS:
                figures = results[teams] = run_teams(server.new_database(), Path(tmp) / f"n{teams}", teams)
                print(f"capacity: {teams:2d} Teams at once: {figures['wall']:6.2f} s, {figures['rate']:5.2f} Teams/s, "
                      f"peak {figures['peak']:3d} connections ({figures['peak'] / teams:.2f} per Team), "
                      f"{figures['taken']} calls on workers, {figures['unplaced']} run by their Leads, "
                      f"{len(figures['failures'])} failed", flush=True)
                for failure in figures["failures"][:5]:
                    print(f"capacity:   {failure}")
    finally:
        server.destroy()
    first, last = results[TEAMS[0]], results[TEAMS[-1]]
    t8 = last["rate"] / first["rate"] if not last["failures"] else 0.0  # a failed or fenced Team fails the goal
    return [("T8", t8, T8_GOAL), ("T8c", last["peak"] / last["teams"], T8C_GOAL)]


if __name__ == "__main__":
    from benchmarks._common import report

    for bench_id, measured, goal in run():
        report(bench_id, measured, goal)
