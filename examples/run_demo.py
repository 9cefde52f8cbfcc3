"""Run the scripted Agent Teams demo and show what happened.

``make demo`` runs this file. It drives the real ``dsh`` command (no API key: the
model is the scripted adapter reading ``examples/team_demo.json``)::

    dsh run --profile agent-teams --model scripted:examples/team_demo.json \\
        --data-dir .dsh-demo --workspace .dsh-demo/workspace "<prompt>"

in a fresh, empty workspace, then prints the final Team state with ``dsh team
show`` and the files the team wrote there. The members do real work through the
workspace tools: the builder writes ``src/greet.py``, the reviewer reads it, writes
``docs/review.md`` and adds a docstring to the module, and the builder's next edit,
based on the version it wrote, is refused with ``FILE_STALE`` -- it re-reads the
file and succeeds on top of the reviewer's change. The transcript
lines come from ``dsh run`` itself: one line per message, tool call and tool
result, prefixed with the member that produced it (``[lead]``, ``[builder]``,
``[reviewer]``), in the order they were committed.

The data directory is kept so you can look around afterwards::

    dsh team show --data-dir .dsh-demo            # roster, board, pending mail
    dsh team show --data-dir .dsh-demo --at 20    # the Team as it was at seq 20
    dsh team serve --data-dir .dsh-demo           # the same Team in the browser (time slider included)
    dsh log --data-dir .dsh-demo <session id>     # every event of one session
    ls -R .dsh-demo/workspace                     # what the team wrote

``--worktrees`` (``make worktree-demo``) runs the same team with each teammate in its
own git worktree (``examples/worktrees_profile.toml``, script
``examples/team_demo_worktrees.json``): the workspace becomes a git repository (one
empty commit), every completed task is merged into ``main``, and the builder, instead
of meeting ``FILE_STALE``, rebases its worktree on the reviewer's merged change and
merges its type hints as a task of its own. The final files are the same.

Options: ``--data-dir DIR`` (default ``./.dsh-demo``; a directory this script
created before is reset, any other non-empty directory is refused), ``--script
FILE`` to run your own script, ``--prompt TEXT``, ``--profile PROFILE`` (``make
mcp-demo`` runs ``--profile examples/mcp_profile.toml --script
examples/mcp_demo.json``: the same team shape using a real MCP server's tools).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SCRIPT = HERE / "team_demo.json"
WORKTREE_SCRIPT = HERE / "team_demo_worktrees.json"
WORKTREE_PROFILE = HERE / "worktrees_profile.toml"
DEFAULT_DATA_DIR = Path(".dsh-demo")
MARKER = ".dsh-demo"
#: The team's workspace, inside the data dir so that a reset starts from an empty checkout.
WORKSPACE = "workspace"
PROMPT = (
    "Use an Agent Team for this: have a builder write src/greet.py and a reviewer review it, "
    "then give me a summary."
)


def dsh_command() -> list[str]:
    """The ``dsh`` CLI of this interpreter (works inside the venv without activating it)."""
    return [sys.executable, "-m", "host_spec.host.cli.main"]


def fresh_data_dir(path: Path) -> Path:
    """Create ``path`` empty, resetting it only if an earlier demo run made it.

    Raises:
        SystemExit: ``path`` is a file, or a non-empty directory this script did not create.
    """
    if path.exists():
        if not path.is_dir():
            raise SystemExit(f"run_demo: {path} exists and is not a directory")
        if (path / MARKER).exists():
            shutil.rmtree(path)
        elif any(path.iterdir()):
            raise SystemExit(f"run_demo: {path} is not empty and was not created by this demo; pick another --data-dir")
    path.mkdir(parents=True, exist_ok=True)
    (path / MARKER).write_text("created by examples/run_demo.py; safe to delete\n")
    return path


def git_init(workspace: Path) -> None:
    """Make ``workspace`` a git repository on ``main`` with one empty commit (members start from it)."""
    identity = ["-c", "user.name=dsh demo", "-c", "user.email=demo@dsh.invalid"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=workspace, check=True)
    subprocess.run(["git", *identity, "commit", "-q", "--allow-empty", "-m", "empty start"], cwd=workspace, check=True)


def workspace_files(workspace: Path) -> list[Path]:
    """The files the team wrote (git's own directory left out)."""
    return sorted(p for p in workspace.rglob("*") if p.is_file() and ".git" not in p.relative_to(workspace).parts)


def _shown(path: Path) -> Path:
    """``path`` relative to the working directory when it is below it (shorter to read and copy)."""
    try:
        return path.resolve().relative_to(Path.cwd())
    except ValueError:
        return path


def run(argv: list[str] | None = None) -> int:
    """Run the demo; returns the exit status (the first failing command's)."""
    parser = argparse.ArgumentParser(description="Run the scripted Agent Teams demo.")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="where the session logs go")
    parser.add_argument("--script", type=Path, default=DEFAULT_SCRIPT, help="scripted model file")
    parser.add_argument("--prompt", default=PROMPT, help="the user's request to the Lead")
    parser.add_argument("--profile", default=None, help="profile to run (e.g. examples/mcp_profile.toml)")
    parser.add_argument("--worktrees", action="store_true",
                        help="each teammate in its own git worktree (the workspace becomes a git repository)")
    args = parser.parse_args(argv)
    if args.profile is None:
        args.profile = str(WORKTREE_PROFILE) if args.worktrees else "agent-teams"
    if args.worktrees and args.script == DEFAULT_SCRIPT:
        args.script = WORKTREE_SCRIPT
    data_dir = fresh_data_dir(args.data_dir)
    common = ["--data-dir", str(data_dir)]
    workspace = data_dir / WORKSPACE
    workspace.mkdir()
    if args.worktrees:
        git_init(workspace)

    print("=" * 78)
    print(f"dsh run --profile {args.profile} --model scripted:{_shown(args.script)} --data-dir {data_dir} "
          f"--workspace {workspace}")
    print(f"prompt: {args.prompt}")
    print("=" * 78, flush=True)
    command = [*dsh_command(), "run", "--profile", args.profile, "--model", f"scripted:{args.script}", *common,
               "--workspace", str(workspace), args.prompt]
    # An MCP server in the profile (examples/mcp_profile.toml) runs with this interpreter.
    env = {**os.environ, "DSH_PYTHON": sys.executable}
    status = subprocess.run(command, check=False, env=env).returncode
    if status != 0:
        print(f"run_demo: dsh run exited with {status}", file=sys.stderr)
        return status

    print()
    print("=" * 78)
    print("dsh team show  (final roster, board and pending mail)")
    print("=" * 78, flush=True)
    status = subprocess.run([*dsh_command(), "team", "show", *common], check=False).returncode
    if status != 0:
        print(f"run_demo: dsh team show exited with {status}", file=sys.stderr)
        return status
    print()
    print("=" * 78)
    print(f"files in {workspace}")
    print("=" * 78)
    for path in workspace_files(workspace):
        print(f"--- {path.relative_to(workspace)}")
        print(path.read_text(), end="")
    print()
    if args.worktrees:
        print("=" * 78)
        print(f"git log of {workspace}  (one commit per completed task, by its member)")
        print("=" * 78, flush=True)
        subprocess.run(["git", "log", "--oneline", "--graph", "--format=%h %an: %s"], cwd=workspace, check=False)
        print()
    print(f"Logs are in {data_dir}/. Try: dsh team show --data-dir {data_dir} --at 20")
    print(f"Open this run in the browser: dsh team serve --data-dir {data_dir}  (then open the printed URL)")
    return 0


if __name__ == "__main__":
    sys.exit(run())
