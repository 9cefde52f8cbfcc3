"""SIGKILL after durable writes of the demo run (and of its resume), then ``dsh resume``, then the checks.

Every case is real: a ``dsh`` subprocess on the demo script with the
``reliability-probe`` plugin, which kills its own process right after the chosen
durable write (any session's flush: the Lead's or a teammate's log). The disk then
holds exactly the state that write left; ``dsh resume`` must finish the run and
:func:`exactly_once.violations` must find nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from exactly_once import violations
from figures import Figures

from host_spec.host.demo import PROMPT, SCRIPT

HERE = Path(__file__).resolve().parent
#: Generous per-command bound (the demo takes about a second on an idle machine).
TIMEOUT_S = 120

__all__ = ["Demo", "crash_sweep", "resume_kill_sweep", "spread"]


def spread(total: int, count: int) -> list[int]:
    """``count`` points of ``1..total`` spread evenly, first and last included."""
    if count >= total:
        return list(range(1, total + 1))
    if count <= 1:
        return [total]
    return sorted({1 + round(i * (total - 1) / (count - 1)) for i in range(count)})


class Demo:
    """Runs the demo and its resumes in subprocesses under a scratch directory."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.prompt = PROMPT  # the prompt ``make demo`` sends
        site = scratch / "site"
        dist = site / "dsh_reliability_probe-0.1.dist-info"
        dist.mkdir(parents=True, exist_ok=True)
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dsh-reliability-probe\nVersion: 0.1\n")
        (dist / "entry_points.txt").write_text("[dsh]\nreliability-probe = reliability_probe\n")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), str(HERE), env.get("PYTHONPATH", "")) if p)
        env.pop("DSH_DATA_DIR", None)
        self.env = env
        self.workspace = scratch / "workspace"
        self.workspace.mkdir(exist_ok=True)
        self._profiles = 0

    def profile(self, **config: object) -> Path:
        self._profiles += 1
        lines = ['extends = "agent-teams"', "", "[plugins.reliability-probe]"]
        lines += [f"{key} = {json.dumps(value)}" for key, value in config.items()]
        path = self.scratch / f"probe-{self._profiles}.toml"
        path.write_text("\n".join(lines) + "\n")
        return path

    def dsh(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", *args], env=self.env,
                              cwd=self.scratch, capture_output=True, text=True, timeout=TIMEOUT_S)  # fmt: skip

    def run(self, data: Path, **probe: object) -> subprocess.CompletedProcess[str]:
        return self.dsh("run", "--profile", str(self.profile(**probe)), "--model", f"scripted:{SCRIPT}",
                        "--workspace", str(self.workspace), "--data-dir", str(data), self.prompt)  # fmt: skip

    def resume(self, data: Path, **probe: object) -> subprocess.CompletedProcess[str]:
        return self.dsh("resume", "--profile", str(self.profile(**probe)), "--model", f"scripted:{SCRIPT}",
                        "--data-dir", str(data))  # fmt: skip

    def writes_of_run(self) -> tuple[int, Path]:
        """Durable writes of a clean demo run, and its data dir (one run, shared by every part)."""
        data, count = self.scratch / "clean", self.scratch / "clean.count"
        if not count.exists():
            result = self.run(data, count_out=str(count))
            assert result.returncode == 0, result.stderr
        return int(count.read_text()), data


def _killed(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [] if result.returncode == -signal.SIGKILL else [f"not killed (exit {result.returncode}): {result.stderr[-300:]}"]


def _kill_case(command: Callable[..., subprocess.CompletedProcess[str]], data: Path, point: int,
               then: Callable[[], list[str]]) -> tuple[str, list[str]]:
    """Run ``command`` killed after durable write ``point``, then ``then()``; returns (what happened, problems).

    How many durable writes a run makes depends on how its group commits batch the
    flushes, so a run may finish before reaching ``point``. That is no violation:
    the finished run's data is checked as it is (it must hold no duplicate and no
    loss either), and the case says so instead of claiming a kill.
    """
    count = data.parent / f"{data.name}.writes"
    result = command(data, kill_at=point, count_out=str(count))
    if result.returncode == -signal.SIGKILL:
        return "killed", then()
    writes = int(count.read_text()) if count.exists() else 0
    count.unlink(missing_ok=True)
    if writes < point and not _finished(result, "run"):
        return f"ended after {writes} writes", violations(data)
    return "not killed", _killed(result)


def _finished(result: subprocess.CompletedProcess[str], what: str) -> list[str]:
    if result.returncode in (0, 1) and "Traceback" not in result.stderr:
        return []
    return [f"{what} exited {result.returncode}: {result.stderr.strip()[-400:]}"]


def crash_sweep(demo: Demo, points: Sequence[int] | None = None, *, keep: Path | None = None) -> Figures:
    """SIGKILL after each chosen durable write of the run (default: every one), resume, check."""
    figures = Figures("crash+resume")
    total, _ = demo.writes_of_run()
    for point in points if points is not None else range(1, total + 1):
        data = demo.scratch / f"crash-{point}"
        what, problems = _kill_case(demo.run, data, point,
                                    lambda: _finished(demo.resume(data), "resume") or violations(data))
        figures.record(f"kill after write {point}/{total} ({what})", problems)
        if keep is None or problems:
            shutil.rmtree(data, ignore_errors=True)
    return figures


def resume_kill_sweep(demo: Demo, crash_points: Sequence[int], resume_points: int | None = None) -> Figures:
    """Kill the run at each crash point, then kill its *resume* after its writes (spread), resume again, check."""
    figures = Figures("resume killed")
    for point in crash_points:
        base = demo.scratch / f"base-{point}"
        if _killed(demo.run(base, kill_at=point)):
            figures.record(f"run kill {point}", ["the run was not killed"])
            continue
        probe_dir, count = demo.scratch / f"count-{point}", demo.scratch / f"count-{point}.n"
        shutil.copytree(base, probe_dir)
        demo.resume(probe_dir, count_out=str(count))
        writes = int(count.read_text()) if count.exists() else 0
        chosen = range(1, writes + 1) if resume_points is None else spread(writes, resume_points)
        for second in chosen:
            data = demo.scratch / f"crash-{point}-{second}"
            shutil.copytree(base, data)
            what, problems = _kill_case(demo.resume, data, second,
                                        lambda: _finished(demo.resume(data), "second resume") or violations(data))
            figures.record(f"run killed after write {point}, resume after write {second}/{writes} ({what})", problems)
            shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(probe_dir, ignore_errors=True)
    return figures
