"""The demo team on a shared PostgreSQL store: takeover after SIGKILL, a fenced stale process, a database outage.

(The cases with ``dsh worker`` processes are in :mod:`shared_workers`.)

Every case is real processes against a real server (:mod:`kit_postgres`):

* **takeover after SIGKILL**: ``dsh run --store`` killed by its own process right
  after its *n*-th durable write (the ``reliability-probe`` plugin); a second
  process runs ``dsh resume --store``, which claims the Team's lease once the dead
  holder's lease expires and cold-resumes it from the database.
* **fenced stale process**: the run is frozen (SIGSTOP) once the database holds
  *n* events, as a process presumed dead; another process takes the Team over and
  finishes it; then the frozen one is let go (SIGCONT). Its next append must be
  refused (``SESSION_FENCED``) and it must exit, having stored nothing.
* **database outage**: the server is stopped (``immediate``, as a crash) once it
  holds *n* events and started again a moment later; the run must carry on.

What must hold in every case: the checks of :func:`exactly_once.violations` on
the database (every accepted message in its target's history exactly once, no
member left provisioning, contiguous seqs, no tool call twice), and the board
must equal, task by task, an independent oracle: for a takeover, the board a
``dsh resume`` on the embedded JSONL store reaches from a copy of exactly the
logs the killed (or frozen) process left (the shared store must change nothing
a resume does); for an outage, the board of an uncrashed run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))  # kit_postgres, when run by driver.py

import psycopg  # noqa: E402
from crash_sweep import SCRIPT, TIMEOUT_S, Demo  # noqa: E402
from exactly_once import violations  # noqa: E402
from figures import Figures  # noqa: E402
from kit_postgres import PostgresServer  # noqa: E402

from host_spec.host.store.jsonl import JsonlStore  # noqa: E402
from host_spec.host.store.postgres import PostgresStore  # noqa: E402

__all__ = ["SharedStoreDemo", "events_of_epoch", "fenced_stale_processes", "lease_of", "outages", "takeovers", "until"]

#: The lease of the processes under test: a dead holder's Team is free again after this long.
LEASE_SECONDS = "1.0"


class SharedStoreDemo:
    """The demo's processes on databases of one server (a fresh database per case)."""

    def __init__(self, demo: Demo, server: PostgresServer) -> None:
        self.demo = demo
        self.server = server
        self.env = {**demo.env, "DSH_LEASE_SECONDS": LEASE_SECONDS}
        self.env.pop("DSH_STORE", None)
        self._cases = 0
        self._clean: list[dict[str, Any]] | None = None

    def argv(self, command: str, url: str, **probe: object) -> list[str]:
        common = ["--store", url, "--profile", str(self.demo.profile(**probe)), "--model", f"scripted:{SCRIPT}"]
        if command == "resume":
            return [sys.executable, "-m", "host_spec.host.cli.main", "resume", *common]
        self._cases += 1
        workspace = self.demo.scratch / f"shared-workspace-{self._cases}"
        workspace.mkdir(exist_ok=True)
        return [sys.executable, "-m", "host_spec.host.cli.main", "run", *common, "--workspace", str(workspace),
                self.demo.prompt]

    def run(self, command: str, url: str, **probe: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(command, url, **probe), env=self.env, cwd=self.demo.scratch,
                              capture_output=True, text=True, timeout=TIMEOUT_S)  # fmt: skip

    def start(self, url: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.argv("run", url), env=self.env, cwd=self.demo.scratch, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip

    def board(self, url: str) -> list[dict[str, Any]]:
        shown = subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", "team", "show", "--store", url,
                                "--json"], env=self.env, capture_output=True, text=True, timeout=TIMEOUT_S)  # fmt: skip
        if shown.returncode != 0:
            return [{"team show failed": shown.stderr[-300:]}]
        return [{key: value for key, value in task.items() if key != "owner_id"} for task in json.loads(shown.stdout)["tasks"]]

    def clean(self) -> tuple[int, list[dict[str, Any]]]:
        """Durable writes and board of an uncrashed run on the shared store (run once)."""
        count = self.demo.scratch / "shared-clean.count"
        if self._clean is None:
            url = self.server.new_database()
            result = self.run("run", url, count_out=str(count))
            assert result.returncode == 0, result.stderr
            self._clean = self.board(url)
        return int(count.read_text()), self._clean

    def checks(self, url: str, expected: list[dict[str, Any]] | None = None) -> list[str]:
        store = PostgresStore(url, retry_seconds=5)
        try:
            problems = violations(store)
        finally:
            store.close()
        board = self.board(url)
        if board != (self.clean()[1] if expected is None else expected):
            problems.append(f"board differs from the oracle's: {board}")
        return problems

    def jsonl_resume_board(self, url: str, name: str) -> list[dict[str, Any]]:
        """The board ``dsh resume`` reaches on the JSONL store from a copy of the logs stored at ``url`` now."""
        data = self.demo.scratch / name
        shared, files = PostgresStore(url, retry_seconds=5), JsonlStore(data)
        try:
            for session_id in shared.list_ids():
                header, events = shared.read(session_id)
                log = files.create(header)
                log.append(events, expected_seq=0)
                log.sync()
                log.close()
        finally:
            shared.close()
        resumed = self.demo.resume(data)
        if resumed.returncode != 0:
            return [{"jsonl resume failed": resumed.stderr[-300:]}]
        shown = self.demo.dsh("team", "show", "--data-dir", str(data), "--json")
        return [{key: value for key, value in task.items() if key != "owner_id"} for task in json.loads(shown.stdout)["tasks"]]


def lease_of(url: str) -> tuple[str | None, int]:
    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            row = conn.execute("SELECT holder, epoch FROM dsh_leases WHERE key = 'session-1'").fetchone()
            return (row[0], int(row[1])) if row else (None, 0)
    except psycopg.Error:
        return None, 0


def events_of_epoch(url: str, epoch: int) -> int:
    with psycopg.connect(url, connect_timeout=2) as conn:
        row = conn.execute("SELECT count(*) FROM dsh_events WHERE epoch = %s", (epoch,)).fetchone()
        return int(row[0]) if row else 0


def _events(url: str) -> int:
    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            row = conn.execute("SELECT count(*) FROM dsh_events").fetchone()
            return int(row[0]) if row else 0
    except psycopg.Error:
        return 0  # not created yet, or the server is down


def _when_events(url: str, count: int, process: subprocess.Popen[str]) -> bool:
    """Wait until the database holds ``count`` events; ``False`` when the process ended first."""
    while _events(url) < count:
        if process.poll() is not None:
            return False
        time.sleep(0.005)
    return True


def _resume_until_taken(shared: SharedStoreDemo, url: str) -> subprocess.CompletedProcess[str]:
    """``dsh resume`` from another process, retried while the old holder's lease is live."""
    deadline = time.monotonic() + 30
    while True:
        result = shared.run("resume", url)
        if "SESSION_LOCKED" not in result.stderr or time.monotonic() > deadline:
            return result
        time.sleep(0.2)


def _finished(result: subprocess.CompletedProcess[str], what: str) -> list[str]:
    return [] if result.returncode == 0 else [f"{what} exited {result.returncode}: {result.stderr.strip()[-400:]}"]


def takeovers(shared: SharedStoreDemo, points: Sequence[int]) -> Figures:
    """SIGKILL after each durable write in ``points``; another process takes the Team over."""
    figures = Figures("shared: takeover")
    for point in points:
        url = shared.server.new_database()
        killed = shared.run("run", url, kill_at=point)
        if killed.returncode != -signal.SIGKILL:
            figures.record(f"kill at write {point}", [f"not killed (exit {killed.returncode})"])
            continue
        oracle = shared.jsonl_resume_board(url, f"shared-oracle-{point}")
        resumed = _resume_until_taken(shared, url)
        figures.record(f"kill at write {point}", _finished(resumed, "takeover resume") + shared.checks(url, oracle))
    return figures


def fenced_stale_processes(shared: SharedStoreDemo, points: Sequence[int]) -> Figures:
    """Freeze the run at ``points`` events, take the Team over, thaw the stale process: it must be fenced."""
    figures = Figures("shared: fenced stale")
    for point in points:
        url = shared.server.new_database()
        stale = shared.start(url)
        try:
            if not _when_events(url, point, stale):
                stale.communicate()
                figures.record(f"freeze at {point} events", [] if stale.returncode == 0 else ["run failed"])
                continue
            os.kill(stale.pid, signal.SIGSTOP)
            time.sleep(float(LEASE_SECONDS) * 1.5)
            stored = _events(url)
            oracle = shared.jsonl_resume_board(url, f"fenced-oracle-{point}")  # the logs the new holder starts from
            taken = _resume_until_taken(shared, url)
            os.kill(stale.pid, signal.SIGCONT)
            _, err = stale.communicate(timeout=TIMEOUT_S)
        finally:
            if stale.poll() is None:
                stale.kill()
                stale.wait()
        problems = _finished(taken, "takeover resume") + shared.checks(url, oracle)
        if stale.returncode == 0 and _events(url) > stored:
            problems.append("the stale process finished normally after its Team was taken over")
        if stale.returncode != 0 and "SESSION_FENCED" not in err:
            problems.append(f"the stale process failed without SESSION_FENCED: {err.strip()[-300:]}")
        figures.record(f"freeze at {point} events", problems)
    return figures


def outages(shared: SharedStoreDemo, points: Sequence[int], *, down_seconds: float = 1.5) -> Figures:
    """Stop the server once it holds ``points`` events, start it ``down_seconds`` later; the run carries on."""
    figures = Figures("shared: db outage")
    for point in points:
        url = shared.server.new_database()
        run = shared.start(url)
        cut = _when_events(url, point, run)
        if cut:
            shared.server.stop("immediate")
            restart = threading.Timer(down_seconds, shared.server.start)
            restart.start()
        out, err = run.communicate(timeout=TIMEOUT_S)
        if cut:
            restart.join()
        result = subprocess.CompletedProcess(run.args, run.returncode, out, err)
        figures.record(f"outage at {point} events", _finished(result, "run") + shared.checks(url))
    return figures


def until(condition: Any, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
