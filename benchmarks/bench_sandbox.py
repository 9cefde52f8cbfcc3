"""SB1 and SB2: what the sandbox costs a member's commands.

Both run real commands through the workspace's shell (the ``bash`` tool's and the
check runner's code path) twice in the same process and directory: in the
default ``workspace-write`` bubblewrap sandbox, and unsandboxed (``full``).

* ``SB1``: wall time of a trivial ``bash`` call (``true``) sandboxed over
  unsandboxed. Goal: at most 1.5, and under 20 ms added per call (both printed).
* ``SB2``: the demo workspace's checks (the controls demo's named check, a Python
  import and assertion of the ``src/greet.py`` the demo's builder writes, with the
  same system interpreter on both sides) sandboxed over unsandboxed. Goal: at most 1.1.

Calls alternate between the two policies so load on a shared machine hits both
alike; the figure is the median ratio of paired rounds.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
import tomllib
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import report  # noqa: E402
from host_spec.host.sandbox.policy import load_settings  # noqa: E402
from host_spec.host.sandbox.service import Sandbox  # noqa: E402
from host_spec.host.workspace.config import WorkspaceConfig  # noqa: E402
from host_spec.host.workspace.shell import ShellTool  # noqa: E402

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SB1_GOAL, SB1_MAX_ADDED_MS, SB2_GOAL = 1.5, 20.0, 1.1


def demo_workspace(root: Path) -> list[str]:
    """Lay out the demo's passing ``src/greet.py`` (its builder's fix) and return the demo's check commands."""
    script = json.loads((EXAMPLES / "controls_demo.json").read_text())
    text = ""
    for steps in script.values():  # the builder's writes and its fix, in order
        for call in (call for step in steps for call in step.get("tool_calls", [])):
            arguments = call["arguments"]
            if call["name"] == "write_file" and arguments["path"] == "src/greet.py":
                text = arguments["content"]
            elif call["name"] == "edit_file" and arguments["path"] == "src/greet.py":
                text = text.replace(arguments["old_string"], arguments["new_string"])
    (root / "src").mkdir()
    (root / "src" / "greet.py").write_text(text)
    checks = tomllib.loads((EXAMPLES / "controls.toml").read_text())["plugins"]["dsh-team"]["checks"]
    # One interpreter for both sides: the host's PATH may start in the home (pyenv shims), which the
    # sandbox empties, so "python3" alone would compare two different programs.
    python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or "python3"
    return [command.replace("python3 ", f"{python} ", 1) for command in checks.values()]


async def paired(shells: dict[str, ShellTool], root: str, commands: list[str], rounds: int) -> dict[str, list[float]]:
    """Seconds per round of ``commands`` for each shell, rounds interleaved."""
    times: dict[str, list[float]] = {name: [] for name in shells}
    for _ in range(rounds):
        for name, shell in shells.items():
            started = time.perf_counter()
            for command in commands:
                outcome = await shell.run_command(root, command, timeout_ms=60_000, member="lead")
                assert outcome.passed, (name, command, outcome.output)
            times[name].append(time.perf_counter() - started)
    return times


async def _measure() -> tuple[float, float, float, float]:
    config = WorkspaceConfig()
    shells = {"sandboxed": ShellTool(config, Sandbox(load_settings({}))),
              "full": ShellTool(config, Sandbox(load_settings({"policy": "full"})))}
    with tempfile.TemporaryDirectory(prefix="dsh-bench-sandbox-") as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        checks = demo_workspace(root)
        await paired(shells, str(root), ["true"], 5)  # warm-up: the probe, page cache
        trivial = await paired(shells, str(root), ["true"], 60)
        suite = await paired(shells, str(root), checks, 30)
    ratios = [s / f for s, f in zip(trivial["sandboxed"], trivial["full"])]
    added_ms = (statistics.median(trivial["sandboxed"]) - statistics.median(trivial["full"])) * 1000
    sb2 = statistics.median(s / f for s, f in zip(suite["sandboxed"], suite["full"]))
    full_ms = statistics.median(trivial["full"]) * 1000
    return statistics.median(ratios), added_ms, sb2, full_ms


def run() -> list[tuple[str, float, float]]:
    sb1, added_ms, sb2, full_ms = asyncio.run(_measure())
    print(f"sandbox: trivial bash {full_ms:.1f} ms unsandboxed, +{added_ms:.1f} ms sandboxed "
          f"(ratio {sb1:.2f}; goal <= {SB1_GOAL} and < {SB1_MAX_ADDED_MS:g} ms added)")
    print(f"sandbox: the demo workspace's checks sandboxed / unsandboxed = {sb2:.2f} (goal <= {SB2_GOAL})")
    return [("SB1", sb1, SB1_GOAL), ("SB1ms", round(added_ms, 1), SB1_MAX_ADDED_MS), ("SB2", sb2, SB2_GOAL)]


if __name__ == "__main__":
    for bench_id, value, goal in run():
        report(bench_id, value, goal)
