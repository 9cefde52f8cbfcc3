"""The distribution declares its plugins as ``dsh`` entry points, loadable by name."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

from host_spec import ENTRY_POINT_GROUP
from host_spec.host.plugins.discovery import discover, new_pluggy_manager, validate_plugin

EXPECTED = {
    "subagent": "host_spec.host.base.subagent",
    "subagent-fork": "host_spec.host.base.subagent_fork",
    "subagent-control": "host_spec.host.base.control",
    "dsh-team": "dsh_team.plugin",
    "dsh-team-tools": "dsh_team_tools.plugin",
    "dsh-team-invariant": "dsh_team_invariant.plugin",
    "workspace": "host_spec.host.workspace.plugin",
    "dsh-team-web": "dsh_team.web.plugin",
    "mcp": "host_spec.host.mcp.plugin",
}


class TestEntryPoints:
    def test_group_dsh_declares_every_plugin(self) -> None:
        """Group ``dsh`` holds exactly our seven plugins with their module targets."""
        declared = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
        assert declared == EXPECTED
        assert {name: ep.value for name, ep in discover().items()} == EXPECTED

    @pytest.mark.parametrize("name", sorted(EXPECTED))
    def test_loadable_by_name_and_valid(self, name: str) -> None:
        """Each entry point imports and registers cleanly on a fresh ``dsh`` manager."""
        plugin = discover()[name].load()
        pm = new_pluggy_manager()
        validate_plugin(pm, plugin, name)
        assert pm.get_plugin(name) is plugin
        assert any(impl.plugin_name == name for impl in pm.hook.dsh_plugin_loaded.get_hookimpls())
