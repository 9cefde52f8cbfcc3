"""The invariant vets ``team/worktree`` and ``team/merge`` before they enter a Lead log (real host, agent-teams).

The books skip a record they cannot read; so such a record must never be written:
an unreadable one or one of another version is refused inside ``append`` and the
log does not grow. A well-formed one is accepted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from host_spec.errors import InvariantError
from host_spec.host.app import Host
from wt_kit import write_script


@pytest.mark.parametrize("kind", ["team/worktree", "team/merge"])
async def test_unreadable_or_unknown_versions_are_vetoed(tmp_path: Path, kind: str) -> None:
    host = await Host.open(tmp_path / "data", "agent-teams", f"scripted:{write_script(tmp_path, {})}")
    try:
        session = await host.create_session("lead")
        before = session.last_seq
        with pytest.raises(InvariantError) as caught:
            session.append(kind, {"version": 1, "team_id": "lead"})
        assert kind in " ".join(caught.value.reasons)
        good = {"version": 1, "team_id": "lead", "member_id": "m", "member": "m", "root": "/r", "path": "/p",
                "branch": "dsh/lead/m"}
        if kind == "team/merge":
            good = {"version": 1, "team_id": "lead", "member_id": "m", "merge_id": "x", "phase": "intent",
                    "task_id": "task-1", "revision": 2, "member": "m", "target": "refs/heads/main", "old": "a",
                    "new": "b", "source": "c"}
        with pytest.raises(InvariantError):
            session.append(kind, {**good, "version": 2})
        assert session.last_seq == before
        session.append(kind, good)
        assert session.last_seq == before + 1
    finally:
        await host.close()
