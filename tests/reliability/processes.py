"""Two (or more) processes on one data dir: own sessions and records, and one process per Team.

* ``concurrent``: ``dsh run`` processes started together, each with its own
  script: every run gets its own session, and every run record names the script
  that session actually ran (no shared temp name, no record written for a session
  another run holds).
* ``live team``: a process keeps a Team live (a Lead and its teammate asleep on
  disk); ``dsh resume`` of each of its sessions from another process must be
  refused with ``SESSION_LOCKED`` and change nothing, and once the holder exits
  the same resume must work.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from crash_sweep import Demo
from figures import Figures

from host_spec.host.cli.run_settings import lookup
from host_spec.host.store.jsonl import JsonlStore

__all__ = ["concurrent_runs", "live_team_refusals"]

#: Keeps a Team live in its own process (see the script's docstring).
HOLD_TEAM = Path(__file__).resolve().parents[1] / "hold_team.py"


def _session(stderr: str) -> str | None:
    lines = [line for line in stderr.splitlines() if line.startswith("dsh: session ")]
    return lines[-1].removeprefix("dsh: session ") if lines else None


def concurrent_runs(demo: Demo, rounds: int, width: int) -> Figures:
    """``rounds`` times, ``width`` ``dsh run`` processes started together on one fresh data dir."""
    figures = Figures("concurrent runs")
    for round_ in range(rounds):
        data = demo.scratch / f"concurrent-{round_}"
        data.mkdir()
        scripts = []
        for n in range(width):
            path = demo.scratch / f"marker-{round_}-{n}.json"
            path.write_text(json.dumps({"lead": [{"text": path.stem}]}))
            scripts.append(path)
        runs = [subprocess.Popen([sys.executable, "-m", "host_spec.host.cli.main", "run", "--data-dir", str(data),
                                  "--profile", "headless", "--model", f"scripted:{path}", "go"], env=demo.env,
                                 cwd=demo.scratch, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for path in scripts]  # fmt: skip
        seen: list[str] = []
        for process, path in zip(runs, scripts, strict=True):
            _, err = process.communicate(timeout=120)
            problems = [] if process.returncode == 0 else [f"exit {process.returncode}: {err.strip()[-300:]}"]
            session = _session(err)
            if session is not None:
                seen.append(session)
                recorded = lookup(data, session)
                if recorded is None or recorded.model != f"scripted:{path}":
                    problems.append(f"{session}'s record names {recorded}")
                _, events = JsonlStore(data).read(session)
                texts = [b["text"] for e in events if e.type == "assistant/message" for b in e.value()["content"]]
                if texts != [path.stem]:
                    problems.append(f"{session} ran {texts}, not {path.stem}")
            figures.record(f"round {round_} run {path.stem}", problems)
        leftovers = [p.name for p in (data / "runs").iterdir() if not p.name.endswith(".json")]
        figures.record(f"round {round_} distinct sessions, no temp files",
                       ([] if len(set(seen)) == width else [f"sessions {seen}"])
                       + ([f"left {leftovers}"] if leftovers else []))  # fmt: skip
    return figures


def live_team_refusals(demo: Demo, rounds: int) -> Figures:
    """``rounds`` times: every session of a live Team refused to another process, then resumable."""
    figures = Figures("one process per Team")
    for round_ in range(rounds):
        data = demo.scratch / f"live-{round_}"
        holder = subprocess.Popen([sys.executable, str(HOLD_TEAM), str(data)], env=demo.env, cwd=demo.scratch,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert holder.stdout is not None
        sessions: list[str] = []
        for raw in holder.stdout:
            if raw.startswith("ready"):
                sessions = raw.split()[1:]
                break
        try:
            for session in sessions:
                before = JsonlStore(data).path(session).read_bytes()
                result = demo.dsh("resume", "--data-dir", str(data), "--profile", "agent-teams", session)
                problems = [] if result.returncode == 2 and "SESSION_LOCKED" in result.stderr else [
                    f"not refused: exit {result.returncode} {result.stderr.strip()[-200:]}"]
                if JsonlStore(data).path(session).read_bytes() != before:
                    problems.append("its log changed")
                figures.record(f"round {round_} resume {session} while its Team is live", problems)
        finally:
            holder.communicate("", timeout=120)
        for session in sessions:
            result = demo.dsh("resume", "--data-dir", str(data), "--profile", "agent-teams", session)
            figures.record(f"round {round_} resume {session} after the holder exited",
                           [] if result.returncode in (0, 1) else [f"exit {result.returncode}: {result.stderr[-200:]}"])
        if len(sessions) < 2:
            figures.record(f"round {round_} holder", [f"holder reported {sessions}"])
    return figures
