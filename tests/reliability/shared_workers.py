"""Workers on the shared store: a Team taken over by workers, and a Team whose members run on workers.

Real processes against a real server (:mod:`kit_postgres`), checked as every
shared-store case is (:meth:`shared_store.SharedStoreDemo.checks`):

* **workers**: two ``dsh worker`` processes watch the store; the Lead process is
  SIGKILLed after its *n*-th durable write and a worker takes the Team over; then
  that worker is SIGKILLed mid-run (a few events after its claim) and the other
  worker takes over again: three processes, two takeovers, one Team.
* **members**: two workers run the demo's two teammates, one each
  (``--max-members 1``), for a Lead process on a fresh database. Once the work
  desk holds *n* answered calls, the worker holding the newest taken call (else the
  newest answered one) is SIGKILLed. Its member's lease expires; its calls are
  recovered (a model call asked again, a tool call answered
  ``TOOL_OUTCOME_UNKNOWN``) by the surviving worker or, when that one is busy with
  the other member, by the Lead's own process after the grace time. The Lead must
  exit 0, every call on the desk must be answered and settled by the Lead, or
  withdrawn (none left queued, taken or unsettled), and the board must equal the
  uncrashed run's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

import psycopg
from crash_sweep import TIMEOUT_S
from figures import Figures
from shared_store import SharedStoreDemo, events_of_epoch, lease_of, until

__all__ = ["member_takeovers", "start_workers", "stop_workers", "worker_takeovers"]


def start_workers(shared: SharedStoreDemo, url: str, *options: str, count: int = 2,
                  env: dict[str, str] | None = None) -> dict[int, subprocess.Popen[str]]:
    """``count`` ``dsh worker`` processes on ``url`` by pid (no kill point: they are killed from outside)."""
    argv = [sys.executable, "-m", "host_spec.host.cli.main", "worker", "--store", url, *options,
            "--profile", str(shared.demo.profile())]
    workers = {}
    for _ in range(count):
        process = subprocess.Popen(argv, env=shared.env if env is None else env, cwd=shared.demo.scratch, text=True,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
        workers[process.pid] = process
    return workers


def stop_workers(workers: dict[int, subprocess.Popen[str]]) -> list[str]:
    """SIGTERM every worker and wait; the problems (one ignored the signal, or exited non-zero)."""
    problems: list[str] = []
    for process in workers.values():
        process.send_signal(signal.SIGTERM)
    for process in workers.values():
        try:
            _, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            err = process.communicate()[1]
            problems.append("a worker ignored SIGTERM")
        if process.returncode != 0:
            problems.append(f"a worker exited {process.returncode}: {err[-300:]}")
    return problems


def worker_takeovers(shared: SharedStoreDemo, points: Sequence[int], *, after: int = 3) -> tuple[Figures, int]:
    """Lead killed at each write in ``points``; a worker takes over and is killed ``after`` events later; the other finishes.

    Returns the figures and how many cases really killed a worker mid-run (a
    worker may finish the Team before it can be killed; that case is checked too).
    """
    figures, kills = Figures("shared: workers"), 0
    for point in points:
        url = shared.server.new_database()
        workers = start_workers(shared, url, "--poll", "0.2")
        problems: list[str] = []
        try:
            lead = shared.run("run", url, kill_at=point)
            if lead.returncode != -signal.SIGKILL:
                figures.record(f"lead killed at write {point}", [f"lead not killed (exit {lead.returncode})"])
                continue
            if not until(lambda: lease_of(url)[1] >= 2 and events_of_epoch(url, 2) >= after):
                problems.append("no worker took the Team over (or it wrote nothing)")
            else:
                holder, epoch = lease_of(url)
                pid = int(str(holder).split(":")[1])
                if epoch == 2 and holder is not None and pid in workers:
                    os.kill(pid, signal.SIGKILL)  # mid-run: the worker dies holding the Team
                    workers.pop(pid).wait()
                    kills += 1
                    oracle = shared.jsonl_resume_board(url, f"workers-oracle-{point}")
                    if not until(lambda: lease_of(url)[1] >= 3):
                        problems.append("the second worker never took the Team over")
                    elif not until(lambda: lease_of(url)[0] is None):  # released: it ran to quiescence
                        problems.append("the second worker never finished the Team")
                    else:
                        problems += shared.checks(url, oracle)
                elif not until(lambda: lease_of(url)[0] is None):
                    problems.append("the worker never finished the Team")
                else:
                    problems += shared.checks(url)  # it finished before it could be killed
        finally:
            problems += stop_workers(workers)
        figures.record(f"lead killed at write {point}", problems)
    return figures, kills


def _desk(url: str) -> list[tuple[str, str | None]]:
    """``(state, holder)`` of every call on the desk, newest taken first ([] before the tables exist)."""
    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            return conn.execute("SELECT state, holder FROM dsh_work ORDER BY taken_at DESC NULLS LAST").fetchall()
    except psycopg.Error:
        return []


def present_workers(url: str) -> int:
    """How many ``dsh worker`` processes hold a live presence lease on the store at ``url`` (0 when unreachable)."""
    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            row = conn.execute("SELECT count(*) FROM dsh_leases WHERE key LIKE 'worker:%' AND holder IS NOT NULL "
                               "AND expires_at > now()").fetchone()
            return int(row[0]) if row else 0
    except psycopg.Error:
        return 0


def _victim(rows: Sequence[tuple[str, str | None]]) -> str | None:
    taken = [holder for state, holder in rows if state == "taken"]
    answered = [holder for state, holder in rows if state in ("done", "settled")]
    return (taken or answered or [None])[0]


def member_takeovers(shared: SharedStoreDemo, points: Sequence[int]) -> tuple[Figures, int]:
    """A worker killed once the desk holds each count of answered calls in ``points``; figures and real kills."""
    figures, kills = Figures("shared: members"), 0
    for point in points:
        url = shared.server.new_database()
        workers = start_workers(shared, url, "--max-members", "1", "--linger", "3")
        problems: list[str] = []
        try:
            deadline = time.monotonic() + 60
            while present_workers(url) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            lead = shared.start(url)
            while lead.poll() is None and sum(state in ("done", "settled") for state, _ in _desk(url)) < point:
                time.sleep(0.005)
            holder = _victim(_desk(url))
            pid = int(str(holder).split(":")[1]) if holder is not None else None
            if lead.poll() is None and pid in workers:
                os.kill(pid, signal.SIGKILL)  # mid-run: the worker dies holding a member
                workers.pop(pid).wait()
                kills += 1
            try:
                _, err = lead.communicate(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                lead.kill()
                _, err = lead.communicate()
                problems.append("the Lead never finished")
            if lead.returncode != 0:
                problems.append(f"the Lead exited {lead.returncode}: {err.strip()[-400:]}")
            left = sorted({state for state, _ in _desk(url)} - {"settled", "withdrawn"})
            if left:
                problems.append(f"calls left on the desk: {left}")
            problems += shared.checks(url)
        finally:
            problems += stop_workers(workers)
        figures.record(f"worker killed after {point} answered calls", problems)
    return figures, kills
