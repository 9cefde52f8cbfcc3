"""Outages of the shared store with a takeover in between, while workers run the members.

Real processes against a real server (:mod:`kit_postgres`): a Lead process
(``dsh run --store``) and two ``dsh worker`` processes, each worker holding one
of the Lead's two teammates (``--max-members 1``). The teammates' steps are shell
commands that each append a unique line to ``effects.txt`` in the workspace (so a
command run twice shows twice), and each teammate ends by messaging the Lead.

Once the work desk holds *n* answered calls the server is stopped
(``immediate``, as a crash) and started again after ``down`` seconds:

* **short** (``down`` < the lease): every lease survives; the Lead must finish (exit 0).
* **long** (``down`` > the lease): every lease expires; after the restart a worker
  may claim the orphaned Team and fence the live Lead, or the Lead's renewal wins.
* **takeover**: as *long*, and the Lead is frozen (SIGSTOP) through the outage and
  until a worker has claimed its Team (epoch 2), then let go (SIGCONT): a takeover
  certainly happens while a worker may still hold a member under the old epoch.

What must hold on every run, whatever happened:

* :func:`exactly_once.violations` on the database (every accepted message
  delivered exactly once, no ``tool/call`` or ``tool/result`` id twice in a log,
  contiguous seqs, no member left provisioning);
* every command's line is in ``effects.txt`` at most once;
* the Lead's exit status matches what became of its Team: a Lead whose Team was
  taken over (the lease epoch moved past 1) exits non-zero naming
  ``SESSION_FENCED``; one that kept it exits 0;
* the Team ends released (quiescent), and the desk holds nothing open: every row is
  ``settled`` or ``withdrawn`` (the rows of a fenced Lead were settled by the holder
  that took the Team over).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import psycopg
from crash_sweep import TIMEOUT_S
from figures import Figures
from shared_store import SharedStoreDemo, lease_of, until
from shared_workers import present_workers, start_workers, stop_workers

__all__ = ["EFFECT_STEPS", "effects_script", "outage_takeovers"]

#: Shell commands each teammate runs (each appends one unique line to ``effects.txt``).
EFFECT_STEPS = 6
#: The lease of the processes under test here: long enough that a short outage is really shorter.
LEASE_SECONDS = 2.0


def effects_script(path: Path) -> Path:
    """Write the script: the Lead spawns ``alpha`` and ``beta``; each runs its commands and reports."""

    def member(name: str) -> list[dict[str, object]]:
        steps: list[dict[str, object]] = [
            {"text": f"step {i}", "tool_calls": [{"name": "bash", "arguments": {
                "command": f"echo {name}-{i} >> effects.txt && sleep 0.2"}}]}
            for i in range(1, EFFECT_STEPS + 1)
        ]  # fmt: skip
        steps.append({"text": "reporting", "tool_calls": [{"name": "send_message", "arguments": {
            "target": "lead", "message": f"{name} finished its commands"}}]})  # fmt: skip
        steps.append({"text": f"{name} is done."})
        return steps

    spawn = [{"name": "spawn_teammate", "arguments": {"name": name, "description": f"runs {name}'s commands",
                                                      "context": "fresh", "prompt": "Run your commands."}}
             for name in ("alpha", "beta")]  # fmt: skip
    script = {"lead": [{"text": "Two teammates run the commands.", "tool_calls": spawn},
                       {"text": "Waiting for their reports."}],
              "alpha": member("alpha"), "beta": member("beta")}  # fmt: skip
    path.write_text(json.dumps(script))
    return path


def _answered(url: str) -> int:
    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            row = conn.execute("SELECT count(*) FROM dsh_work WHERE state IN ('done', 'settled')").fetchone()
            return int(row[0]) if row else 0
    except psycopg.Error:
        return 0


def _open_rows(url: str) -> list[str]:
    with psycopg.connect(url, connect_timeout=5) as conn:
        rows = conn.execute("SELECT DISTINCT state FROM dsh_work WHERE state NOT IN ('settled', 'withdrawn')").fetchall()
    return sorted(str(row[0]) for row in rows)


def _effects(workspace: Path) -> list[str]:
    path = workspace / "effects.txt"
    lines = path.read_text().split() if path.exists() else []
    return [f"command {line} ran {n} times" for line, n in Counter(lines).items() if n > 1]


def _lead_argv(shared: SharedStoreDemo, url: str, script: Path, workspace: Path) -> list[str]:
    return [sys.executable, "-m", "host_spec.host.cli.main", "run", "--store", url, "--profile",
            str(shared.demo.profile()), "--model", f"scripted:{script}", "--workspace", str(workspace),
            "Use an Agent Team: run the teammates' commands."]  # fmt: skip


def outage_case(shared: SharedStoreDemo, script: Path, kind: str, point: int, down: float, case: int) -> list[str]:
    """One run: the server stopped for ``down`` s once ``point`` calls were answered (``kind``: short, long, takeover)."""
    url = shared.server.new_database()
    env = {**shared.env, "DSH_LEASE_SECONDS": str(LEASE_SECONDS)}
    workspace = shared.demo.scratch / f"outage-{kind}-{case}"
    workspace.mkdir()
    workers = start_workers(shared, url, "--max-members", "1", "--linger", "3", "--poll", "0.2", env=env)
    problems: list[str] = []
    lead: subprocess.Popen[str] | None = None
    try:
        if not until(lambda: present_workers(url) >= 2):
            return ["the workers never came up"]
        lead = subprocess.Popen(_lead_argv(shared, url, script, workspace), env=env, cwd=shared.demo.scratch,
                                text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        while lead.poll() is None and _answered(url) < point:
            time.sleep(0.005)
        cut = lead.poll() is None
        if cut:
            if kind == "takeover":
                os.kill(lead.pid, signal.SIGSTOP)
            shared.server.stop("immediate")
            time.sleep(down)
            shared.server.start()
            if kind == "takeover":
                if not until(lambda: lease_of(url)[1] >= 2, 30):
                    problems.append("no worker took the frozen Lead's Team over")
                os.kill(lead.pid, signal.SIGCONT)
        try:
            _, err = lead.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            lead.kill()
            _, err = lead.communicate()
            problems.append("the Lead never finished")
        _, epoch = lease_of(url)
        if epoch > 1 and (lead.returncode == 0 or "SESSION_FENCED" not in err):
            problems.append(f"the Lead lost its Team (epoch {epoch}) but exited {lead.returncode}: {err.strip()[-300:]}")
        if epoch <= 1 and lead.returncode != 0:
            problems.append(f"the Lead kept its Team but exited {lead.returncode}: {err.strip()[-400:]}")
        if not until(lambda: lease_of(url)[0] is None, 60):
            problems.append("the Team was never finished (its lease is still held)")
        problems += _effects(workspace)
        left = _open_rows(url)
        if left:
            problems.append(f"rows left open on the desk: {left}")
        problems += shared.checks(url, expected=shared.board(url))
    finally:
        if lead is not None and lead.poll() is None:
            lead.kill()
            lead.wait()
        problems += stop_workers(workers)
    return problems


def outage_takeovers(shared: SharedStoreDemo, points: Sequence[int], *, kinds: Sequence[str] = ("short", "long", "takeover"),
                     repeat: int = 1) -> Figures:
    """Every ``kind`` of outage at every count of answered calls in ``points``, ``repeat`` times."""
    figures = Figures("shared: outage+takeover")
    script = effects_script(shared.demo.scratch / "effects.json")
    downs = {"short": LEASE_SECONDS * 0.4, "long": LEASE_SECONDS * 2.5, "takeover": LEASE_SECONDS * 2.5}
    case = 0
    for _ in range(repeat):
        for point in points:
            for kind in kinds:
                case += 1
                figures.record(f"{kind} outage ({downs[kind]:.1f} s) after {point} answered calls",
                               outage_case(shared, script, kind, point, downs[kind], case))
    return figures
