"""The demo in ``worktree`` mode ends with the same files as in ``shared`` mode (real ``dsh``, real git).

``dsh demo`` runs the packaged scripted team twice: as ``make demo`` does (one
shared checkout, the builder meets ``FILE_STALE``) and with ``--worktrees`` (``make
worktree-demo``: each teammate on its own branch, every completed task merged into
``main``). The files of the two workspaces are compared byte for byte, and git shows
each completed task committed by the member that did it (task-3 twice: its
change, then its resolution of the conflict with the reviewer's docstring).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from wt_kit import git

pytestmark = [pytest.mark.slow, pytest.mark.timeout_s(240)]

DEMO = [sys.executable, "-m", "host_spec.host.cli.main", "demo"]


def files(workspace: Path) -> dict[str, bytes]:
    return {p.relative_to(workspace).as_posix(): p.read_bytes() for p in workspace.rglob("*")
            if p.is_file() and ".git" not in p.relative_to(workspace).parts}


def demo(data: Path, *flags: str) -> str:
    done = subprocess.run([*DEMO, str(data), *flags], capture_output=True, text=True, timeout=200)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_worktree_mode_gives_the_same_files_as_shared_mode(tmp_path: Path) -> None:
    shared_out = demo(tmp_path / "shared")
    worktree_out = demo(tmp_path / "worktree", "--worktrees")
    shared, worktree = files(tmp_path / "shared" / "workspace"), files(tmp_path / "worktree" / "workspace")
    assert sorted(shared) == ["docs/review.md", "src/greet.py"]
    assert worktree == shared
    assert b"def greet(name: str) -> str:" in shared["src/greet.py"] and b'"""Return the greeting' in shared["src/greet.py"]
    assert "FILE_STALE" in shared_out and "Worktrees:" not in shared_out
    repo = tmp_path / "worktree" / "workspace"
    assert git(repo, "log", "--format=%an|%s", "main").splitlines() == [
        "builder (dsh)|task-3: Add type hints to greet (the Lead's branch merged in)",
        "builder (dsh)|task-3: Add type hints to greet",
        "reviewer (dsh)|task-2: Review the greeting module",
        "builder (dsh)|task-1: Write the greeting module",
        "dsh demo|empty start",
    ]
    assert git(repo, "status", "--porcelain") == "" and git(repo, "worktree", "list").count("\n") == 0
    assert "merge of task-3 by builder: done" in worktree_out
    assert "TEAM_MERGE_CONFLICT" not in shared_out and "conflicts in src/greet.py" in worktree_out
