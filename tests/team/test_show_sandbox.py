"""``dsh team show`` ends with each member's sandbox policy and names who runs unsandboxed."""

from __future__ import annotations

from dsh_team.views.cli import sandbox_line


def test_the_line_names_every_member_and_the_unsandboxed_ones() -> None:
    assert sandbox_line({"lead": "workspace-write", "ops": "full", "rev": "read-only"}) == (
        "Sandbox: lead workspace-write, ops full, rev read-only; UNSANDBOXED: ops")
    assert sandbox_line({"lead": "workspace-write"}) == "Sandbox: lead workspace-write; UNSANDBOXED: none"
    assert sandbox_line(None) == "Sandbox: unknown (the run recorded no profile)"
