"""A role's sandbox policy holds on a ``dsh worker`` as in the Lead's process: the role travels with each call.

Real subprocesses on a real PostgreSQL server: a Lead (``dsh run --store``) and
one worker (``dsh worker --store``), both with a profile whose
``[sandbox.roles.reviewer]`` is ``read-only``. ``rita`` (role ``reviewer``) and
``bob`` (no role) each run one ``bash`` call on the worker; the oracles are the
workspace and the work desk's table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from test_members_on_workers import LEASE, Workers, work_rows, workers  # noqa: F401 (the fixture)

from host_spec.host.store.postgres import PostgresStore

PROFILE = """extends = "agent-teams"

[plugins.dsh-team.roles.reviewer]
description = "Reviews, never writes"

[sandbox.roles.reviewer]
policy = "read-only"
"""

TEAM = {
    "lead": [
        {"text": "Two members.", "tool_calls": [
            {"name": "spawn_teammate", "arguments": {"name": "rita", "description": "", "prompt": "review",
                                                     "role": "reviewer"}},
            {"name": "spawn_teammate", "arguments": {"name": "bob", "description": "builds", "prompt": "build"}}]},
        {"text": "Spawned."},
    ],
    "rita": [{"text": "Writing.", "tool_calls": [{"name": "bash", "arguments": {"command": "echo r > rita.txt"}}]},
             {"text": "Done."}],
    "bob": [{"text": "Writing.", "tool_calls": [{"name": "bash", "arguments": {"command": "echo b > bob.txt"}}]},
            {"text": "Done."}],
}  # fmt: skip


def lead_env() -> dict[str, str]:
    """The Lead's environment: no data dir or store of the caller's, the workers' lease time."""
    env = {key: value for key, value in os.environ.items() if key not in ("DSH_DATA_DIR", "DSH_STORE")}
    env["DSH_LEASE_SECONDS"] = LEASE
    return env


def test_a_reviewers_commands_on_a_worker_are_read_only(workers: Workers, tmp_path: Path) -> None:
    profile = tmp_path / "profile.toml"
    profile.write_text(PROFILE)
    workers.start("--profile", str(profile))
    workers.wait_present(1)
    (tmp_path / "team.json").write_text(json.dumps(TEAM))
    ws = tmp_path / "ws"
    ws.mkdir()
    lead = subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", "run", "--store", workers.url,
                           "--profile", str(profile), "--model", f"scripted:{tmp_path / 'team.json'}",
                           "--workspace", str(ws), "go"], cwd=tmp_path, env=lead_env(), capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert lead.returncode == 0, lead.stderr[-2000:]
    assert (ws / "bob.txt").read_text() == "b\n" and not (ws / "rita.txt").exists()
    tools = [(member, holder) for member, kind, _, holder in work_rows(workers.url) if kind == "tool"]
    assert len(tools) == 2 and all(holder is not None for _, holder in tools)  # both ran on the worker
    store = PostgresStore(workers.url)
    try:
        rita = next(s for s in store.list_ids() if "rita" in json.dumps([e.value() for e in store.read(s)[1][:2]]))
        (result,) = [e.value() for e in store.read(rita)[1] if e.type == "tool/result"]
    finally:
        store.close()
    assert "Read-only file system" in json.dumps(result["content"])
