"""The built-in profiles register exactly the expected plugins on a real host."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_team.errors import TeamError
from host_spec.errors import DshError
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel


async def registered(profile: str, data_dir: Path | None = None) -> tuple[list[str], list[str]]:
    """(load order, pluggy registrations) of a host opened with ``profile``."""
    host = await Host.open(data_dir, profile, ScriptedModel.from_mapping({}))
    try:
        return host.plugins.names(), sorted(name for name, _ in host.plugins.pm.list_name_plugin())
    finally:
        await host.close()


class TestProfileLoading:
    async def test_headless(self) -> None:
        """headless registers the three legacy delegation plugins and the workspace tools (with its per-host object)."""
        order, names = await registered("headless")
        assert order == ["subagent", "subagent-fork", "subagent-control", "workspace"]
        assert names == sorted([*order, "workspace/Tools"])

    async def test_agent_teams(self, tmp_path: Path) -> None:
        """agent-teams: the workspace tools and the three Team plugins (each with its per-host object), no legacy one."""
        order, names = await registered("agent-teams", tmp_path)
        assert order == ["workspace", "dsh-team", "dsh-team-tools", "dsh-team-invariant"]
        objects = ["workspace/Tools", "dsh-team/TeamService", "dsh-team-tools/Installer",
                   "dsh-team-invariant/TeamStreamInvariant", "dsh-team-invariant/ToolCallsOnce"]
        assert names == sorted(order + objects)

    async def test_agent_teams_refuses_an_in_memory_host(self) -> None:
        """No Team without durable storage: the load fails with its code and nothing stays loaded."""
        with pytest.raises(DshError) as caught:
            await registered("agent-teams")
        error = caught.value if isinstance(caught.value, TeamError) else caught.value.__cause__
        assert isinstance(error, TeamError) and error.code == "TEAM_STORAGE_NOT_DURABLE"
        assert "durable session storage" in error.message

    async def test_agent_teams_shadows_no_legacy_tool(self, tmp_path: Path) -> None:
        """No legacy global delegation tool is visible under agent-teams."""
        host = await Host.open(tmp_path, "agent-teams", ScriptedModel.from_mapping({}))
        try:
            visible = {spec.name for spec in host.tools.visible(None)}
        finally:
            await host.close()
        assert not {"subagent", "subagent_fork", "send_message", "interrupt_agent", "list_agents"} & visible
