"""The demo team's members on two ``dsh worker`` processes, one of them SIGKILLed mid-run.

Each case: two workers, one member each (``--max-members 1``), and a Lead
process on a fresh database. Once the work desk holds *n* answered calls, the
worker holding the newest taken call (else the newest answered one) is
SIGKILLed. Its member's lease expires; its calls are recovered (a model call
asked again, a tool call answered ``TOOL_OUTCOME_UNKNOWN``) by the surviving
worker or, when that one is busy with the other member, by the Lead's own
process after the grace time. The Lead must finish.

What must hold: the Lead exits 0; the checks of :func:`exactly_once.violations`
on the database (every accepted message delivered exactly once, contiguous seqs,
no tool call twice, nobody left provisioning); every call on the desk answered
and collected by the Lead, or withdrawn; none left queued, taken or uncollected; the board equal to the uncrashed run's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

import psycopg
from figures import Figures
from shared_store import SharedStoreDemo

from crash_sweep import TIMEOUT_S

__all__ = ["member_takeovers"]


def _desk(url: str) -> list[tuple[str, str | None]]:
    """``(state, holder)`` of every call on the desk, newest taken first ([] before the tables exist)."""
    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            return conn.execute("SELECT state, holder FROM dsh_work ORDER BY taken_at DESC NULLS LAST").fetchall()
    except psycopg.Error:
        return []


def _present(url: str) -> int:
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
        argv = [sys.executable, "-m", "host_spec.host.cli.main", "worker", "--store", url, "--max-members", "1",
                "--linger", "3", "--profile", str(shared.demo.profile())]
        workers = {}
        for _ in range(2):
            process = subprocess.Popen(argv, env=shared.env, cwd=shared.demo.scratch, text=True,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
            workers[process.pid] = process
        problems: list[str] = []
        try:
            deadline = time.monotonic() + 60
            while _present(url) < 2 and time.monotonic() < deadline:
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
            for process in workers.values():
                process.send_signal(signal.SIGTERM)
            for process in workers.values():
                try:
                    _, werr = process.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    werr = process.communicate()[1]
                    problems.append("a worker ignored SIGTERM")
                if process.returncode != 0:
                    problems.append(f"a worker exited {process.returncode}: {werr[-300:]}")
        figures.record(f"worker killed after {point} answered calls", problems)
    return figures, kills
