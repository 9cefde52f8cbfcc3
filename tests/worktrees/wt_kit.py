"""Real git repositories and Team runs in ``worktree`` mode for the worktree suites.

Every repository is a fresh ``git init`` in a temp directory with one commit;
every run is the real reference host (JSONL store, the Agent Teams profile, the
scripted model) with ``workspace_mode = "worktree"``. Git is asked directly
(``git(...)``) as the independent oracle of what the Team did.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from host_spec.host.app import Host
from host_spec.host.store.jsonl import JsonlStore


def git(repo: Path | str, *args: str, check: bool = True) -> str:
    """Run git in ``repo`` and return its stripped stdout."""
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
    return done.stdout.strip()


def make_repo(path: Path, files: Mapping[str, str] | None = None) -> Path:
    """A repository on ``main`` with ``files`` (default one ``shared.txt``) in its first commit."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Test User")
    git(path, "config", "user.email", "test@example.invalid")
    for name, text in (files or {"shared.txt": "base\n"}).items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def write_profile(directory: Path, mode: str = "worktree", extra: str = "") -> Path:
    """A profile file: Agent Teams with ``workspace_mode`` set (and ``extra`` lines in the dsh-team table)."""
    profile = directory / f"teams-{mode}.toml"
    profile.write_text(
        f'extends = "agent-teams"\n\n[plugins.dsh-team]\nworkspace_mode = "{mode}"\n{extra}\n'
    )
    return profile


def write_script(directory: Path, script: Mapping[str, Any]) -> Path:
    path = directory / "script.json"
    path.write_text(json.dumps(script))
    return path


async def run_team(data: Path, repo: Path, script: Path, profile: Path, prompt: str = "go") -> str:
    """Run a Team to quiescence in ``repo`` and close the host; returns the Lead's session id."""
    host = await Host.open(data, str(profile), f"scripted:{script}")
    try:
        agent = await host.run(prompt, cwd=str(repo))
        return str(agent.id)
    finally:
        await host.close()


def lead_events(data: Path, lead_id: str) -> list[Any]:
    """The stored events of the Lead log (read-only, as ``dsh team show`` reads them)."""
    return JsonlStore(data).read(lead_id)[1]


def records(data: Path, lead_id: str, kind: str) -> list[dict[str, Any]]:
    """The payloads of ``kind`` records in the Lead log, in order."""
    return [event.value() for event in lead_events(data, lead_id) if event.type == kind]


def tool_results(data: Path, session_id: str) -> list[str]:
    """Every tool result text of one session (the model's view), in order."""
    out = []
    for event in JsonlStore(data).read(session_id)[1]:
        if event.type == "tool/result":
            out.append(json.dumps(event.value()))
    return out
