"""The scripted demo team, shipped inside the package so ``dsh demo`` needs nothing else.

``team_demo.json`` is the scripted model's script (no API key, no network): a Lead
puts two tasks on the board, spawns a builder that writes ``src/greet.py`` and
forks a reviewer that reviews it, while the builder's stale edit is refused with
``FILE_STALE`` and redone. It runs under the built-in ``agent-teams`` profile;
``team_demo_worktrees.json`` and ``worktrees.toml`` are the same team with each
teammate in its own git worktree (``dsh demo --worktrees``).
:mod:`host_spec.host.cli.demo` runs it; ``make demo`` calls that command, and the
repository's tests, benchmarks and reliability sweep use these same constants, so
there is one copy of the script and of its prompt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

__all__ = ["PROFILE", "PROMPT", "SCRIPT", "WORKTREE_PROFILE", "WORKTREE_SCRIPT"]

#: The demo's scripted model file (package data next to this module).
SCRIPT: Final = Path(__file__).resolve().with_name("team_demo.json")
#: The built-in profile the demo runs.
PROFILE: Final = "agent-teams"
#: ``dsh demo --worktrees``: the same team with each teammate in its own git worktree. Its
#: builder resolves a merge conflict with the reviewer's change instead of meeting ``FILE_STALE``.
WORKTREE_SCRIPT: Final = Path(__file__).resolve().with_name("team_demo_worktrees.json")
#: The profile of ``--worktrees`` (``agent-teams`` with ``workspace_mode = "worktree"``).
WORKTREE_PROFILE: Final = str(Path(__file__).resolve().with_name("worktrees.toml"))
#: The user's request to the Lead.
PROMPT: Final = (
    "Use an Agent Team for this: have a builder write src/greet.py and a reviewer review it, "
    "then give me a summary."
)
