"""Run the scripted controls demo: a plan approved before the first write, a failing check sending a teammate back.

``python examples/run_controls_demo.py`` drives the real ``dsh`` command (no API
key: the scripted model reads ``examples/controls_demo.json``) under the profile
``examples/controls.toml`` (the Agent Teams profile plus one named quality check,
``greets``)::

    dsh run --profile examples/controls.toml --model scripted:examples/controls_demo.json \\
        --data-dir .dsh-controls-demo --workspace .dsh-controls-demo/workspace "<prompt>"

What happens: the Lead creates ``task-1`` with the check ``greets`` and spawns
``builder`` with ``plan_approval``. The builder's first ``write_file`` is refused
(``TEAM_PLAN_NOT_APPROVED``); it submits a plan, the Lead approves it; it claims
the task, writes ``src/greet.py`` and completes -- the check runs in the workspace
and fails (``TEAM_TASK_CHECK_FAILED`` with the assertion in the output tail), the
task stays in progress; the builder fixes the file and completes again: the check
passes and the task is completed. Then ``dsh team show`` lists both check runs
and the plan. Options: ``--data-dir DIR`` (default ``./.dsh-controls-demo``, reset
only if this script created it).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from host_spec.host.cli.demo import dsh_command, fresh_data_dir

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "controls_demo.json"
PROFILE = HERE / "controls.toml"
PROMPT = "Use an Agent Team: build src/greet.py behind a quality check, and have the builder plan first."


def run(argv: list[str] | None = None) -> int:
    """Run the demo and show the Team; returns the first failing command's exit status."""
    parser = argparse.ArgumentParser(description="Run the scripted controls demo.")
    parser.add_argument("--data-dir", type=Path, default=Path(".dsh-controls-demo"), help="where the logs go")
    args = parser.parse_args(argv)
    data_dir = fresh_data_dir(args.data_dir)
    workspace = data_dir / "workspace"
    workspace.mkdir()
    common = ["--data-dir", str(data_dir)]
    steps = [
        [*dsh_command(), "run", "--profile", str(PROFILE), "--model", f"scripted:{SCRIPT}", *common,
         "--workspace", str(workspace), PROMPT],
        [*dsh_command(), "team", "show", *common],
    ]
    for command in steps:
        print("=" * 78, flush=True)
        status = subprocess.run(command, check=False).returncode
        if status != 0:
            print(f"run_controls_demo: {' '.join(command[2:4])} exited with {status}", file=sys.stderr)
            return status
    print("=" * 78)
    print((workspace / "src" / "greet.py").read_text(), end="")
    print(f"Logs are in {data_dir}/. Try: dsh trace export --data-dir {data_dir} --out trace.json")
    return 0


if __name__ == "__main__":
    sys.exit(run())
