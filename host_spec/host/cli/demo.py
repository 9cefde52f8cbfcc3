"""``dsh demo [DIR]``: run the scripted Agent Teams demo shipped in the package, then show what it did.

::

    dsh demo                      # in a new temporary directory (its path is printed)
    dsh demo ./my-demo            # in ./my-demo (new or empty; one an earlier demo made is reset)
    dsh demo --worktrees          # each teammate in its own git worktree, merged when its task is done

It drives the real command line, exactly as a user would type it (no API key: the
model is the scripted adapter reading the packaged script,
:data:`host_spec.host.demo.SCRIPT`)::

    dsh run --profile agent-teams --model scripted:<script> --data-dir DIR --workspace DIR/workspace "<prompt>"
    dsh team show --data-dir DIR

then prints the files the team wrote in the workspace and how to look further
(``dsh team show --at``, the panel with ``dsh team serve``). Each command runs as
a child process of this interpreter, so its transcript reaches the terminal as it
is committed. ``make demo`` runs ``dsh demo .dsh-demo``; ``make mcp-demo`` passes
``--profile`` and ``--script`` to show the same team shape on a real MCP server.

``--worktrees`` makes the workspace a git repository (one empty commit on ``main``)
and runs the same team with each teammate on its own branch in its own worktree
(:data:`~host_spec.host.demo.WORKTREE_PROFILE`): every completed task is merged into
``main``, and the builder, instead of meeting ``FILE_STALE``, meets a merge
conflict with the reviewer's merged change and resolves it in its worktree. The final files are the same; the demo ends with the git
log (each completed task committed and merged by its member).

The directory is kept. A directory is reset only when a demo made it (a marker
file says so); any other non-empty directory is refused before anything is
written, with ``DEMO_DIR_NOT_EMPTY``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Final

from host_spec.extras import install_command

from host_spec.host.cli.usage import CliError
from host_spec.host.demo import PROFILE, PROMPT, SCRIPT, WORKTREE_PROFILE, WORKTREE_SCRIPT

__all__ = ["MARKER", "WORKSPACE", "add_parser", "dsh_command", "fresh_data_dir", "run"]

#: The file that marks a directory as made by a demo (so a later demo may reset it).
MARKER: Final = ".dsh-demo"
#: The team's workspace, inside the demo directory so that a reset starts from an empty checkout.
WORKSPACE: Final = "workspace"
#: What the banners are drawn with.
RULE: Final = "=" * 78


def dsh_command() -> list[str]:
    """The ``dsh`` CLI of this interpreter (works inside a virtual environment without activating it).

    ``-P``: the working directory is not put on ``sys.path``, so the installed
    package runs even from inside a checkout of another version.
    """
    return [sys.executable, "-P", "-m", "host_spec.host.cli.main"]


def fresh_data_dir(path: Path) -> Path:
    """Create ``path`` empty, resetting it only if an earlier demo made it.

    Raises:
        CliError: ``DEMO_DIR_NOT_EMPTY`` when ``path`` is a file, or a non-empty
            directory no demo made; nothing is changed then.
    """
    if path.exists():
        if not path.is_dir():
            raise CliError(f"{path} exists and is not a directory", code="DEMO_DIR_NOT_EMPTY")
        if (path / MARKER).exists():
            shutil.rmtree(path)
        elif any(path.iterdir()):
            raise CliError(f"{path} is not empty and was not made by a demo; name a new or empty directory",
                           code="DEMO_DIR_NOT_EMPTY")
    path.mkdir(parents=True, exist_ok=True)
    (path / MARKER).write_text("made by dsh demo; safe to delete\n")
    return path


def git_init(workspace: Path) -> None:
    """Make ``workspace`` a git repository on ``main`` with one empty commit (members branch from it)."""
    identity = ["-c", "user.name=dsh demo", "-c", "user.email=demo@dsh.invalid"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=workspace, check=True)
    subprocess.run(["git", *identity, "commit", "-q", "--allow-empty", "-m", "empty start"], cwd=workspace, check=True)


def workspace_files(workspace: Path) -> list[Path]:
    """The files the team wrote (git's own directory left out)."""
    return sorted(p for p in workspace.rglob("*") if p.is_file() and ".git" not in p.relative_to(workspace).parts)


def add_parser(commands: Any) -> None:
    """Register the ``demo`` subcommand on the ``dsh`` parser."""
    demo = commands.add_parser(
        "demo", help="run the scripted Agent Teams demo (no API key, no network)",
        description="Run the scripted demo team in a new directory, then show the Team and the files it wrote.")
    demo.add_argument("dir", nargs="?", type=Path, default=None, metavar="DIR",
                      help="where the logs and the workspace go (default: a new temporary directory)")
    demo.add_argument("--script", type=Path, default=None, help="scripted model file (default: the packaged demo)")
    demo.add_argument("--profile", default=None, help=f"profile to run (default: {PROFILE})")
    demo.add_argument("--worktrees", action="store_true",
                      help="each teammate in its own git worktree (the workspace becomes a git repository)")
    demo.add_argument("--prompt", default=PROMPT, help="the user's request to the Lead")


def _banner(title: str) -> None:
    print(RULE)
    print(title)
    print(RULE, flush=True)


async def run(args: argparse.Namespace) -> int:
    """Run the demo; returns 0, else the exit status of the first command that failed.

    Raises:
        CliError: ``DEMO_DIR_NOT_EMPTY`` (see :func:`fresh_data_dir`).
    """
    if args.dir is None:
        data_dir = Path(tempfile.mkdtemp(prefix="dsh-demo-"))
        print(f"dsh demo: running in {data_dir} (a new temporary directory)", flush=True)
    else:
        data_dir = args.dir
    if args.profile is None:
        args.profile = WORKTREE_PROFILE if args.worktrees else PROFILE
    if args.script is None:
        args.script = WORKTREE_SCRIPT if args.worktrees else SCRIPT
    data_dir = fresh_data_dir(data_dir)
    workspace = data_dir / WORKSPACE
    workspace.mkdir()
    if args.worktrees:
        git_init(workspace)
    common = ["--data-dir", str(data_dir)]
    # The demo is self-contained: its logs go to DIR, whatever store the caller's environment names.
    env = {key: value for key, value in os.environ.items() if key not in ("DSH_STORE", "DSH_DATA_DIR")}
    env["DSH_PYTHON"] = sys.executable  # an MCP server in the profile runs with this interpreter

    _banner(f"dsh run --profile {args.profile} --model scripted:{args.script} {' '.join(common)} "
            f"--workspace {workspace}\nprompt: {args.prompt}")
    command = [*dsh_command(), "run", "--profile", str(args.profile), "--model", f"scripted:{args.script}",
               *common, "--workspace", str(workspace), args.prompt]
    status = subprocess.run(command, check=False, env=env).returncode
    if status != 0:
        print(f"dsh demo: dsh run exited with {status}", file=sys.stderr)
        return status

    print()
    _banner("dsh team show  (final roster, board and pending mail)")
    status = subprocess.run([*dsh_command(), "team", "show", *common], check=False, env=env).returncode
    if status != 0:
        print(f"dsh demo: dsh team show exited with {status}", file=sys.stderr)
        return status

    print()
    _banner(f"files in {workspace}")
    for path in workspace_files(workspace):
        print(f"--- {path.relative_to(workspace)}")
        print(path.read_text(), end="")
    print()
    if args.worktrees:
        _banner(f"git log of {workspace}  (each completed task committed by its member)")
        subprocess.run(["git", "log", "--format=%h %an: %s", "main"], cwd=workspace, check=False)
        print()
    print(f"Logs are in {data_dir}/. Try: dsh team show --data-dir {data_dir} --at 20")
    panel = f"dsh team serve --data-dir {data_dir}  (then open the printed URL)"
    if find_spec("uvicorn") is None:
        panel += f"; the panel needs the web extra: {install_command('web')}"
    print(f"Open this run in the browser: {panel}")
    return 0
