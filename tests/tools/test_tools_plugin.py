"""Plugin dsh-team-tools on the reference host: scoped install, removal, rollback, reload.

Real host, real JSONL store, real Team service; nothing of ours is faked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from team_tools_host import TEAM_PLUGINS, installer, is_team_tool, open_host, restored_modules, start_root, team_tools

from dsh_team_tools import schemas as s
from dsh_team_tools.catalog import TOOL_NAMES
from dsh_team.api import TeamServiceAPI
from dsh_team_tools.policy import POLICY_TEXT
from host_spec import hookimpl
from host_spec.errors import ConfigError, DshError, PluginError, RegistrationError
from host_spec.records import AbortSignal, ToolSpec
from host_spec.schema import compact_json


def policy_of(host: Any, agent: Any) -> str:
    return host.prompts.render(agent)


class TestScopedInstall:
    async def test_root_gets_nine_tools_and_policy(self, tmp_path: Path) -> None:
        """A root agent (a Lead) gets the nine tools and the policy in its own scope."""
        async with open_host(tmp_path, profile="agent-teams") as host:
            lead = await start_root(host)
            assert team_tools(host, lead) == list(TOOL_NAMES)
            assert POLICY_TEXT in policy_of(host, lead)

    async def test_never_global(self, tmp_path: Path) -> None:
        """Without an agent no Team tool exists: the call is "unknown tool"."""
        async with open_host(tmp_path, profile="agent-teams") as host:
            await start_root(host)
            assert [spec.name for spec in host.tools.visible(None) if spec.name in TOOL_NAMES] == []
            result = await host.tools.execute(None, "c1", "list_agents", "{}", AbortSignal())
            assert result.error == {"code": "UNKNOWN_TOOL", "message": 'unknown tool "list_agents"'}

    async def test_headless_has_no_team_tools(self, tmp_path: Path) -> None:
        """Under the headless profile no Team tool or policy exists."""
        async with open_host(tmp_path, profile="headless") as host:
            lead = await start_root(host)
            assert team_tools(host, lead) == []
            assert "Agent Team" not in policy_of(host, lead)

    async def test_live_agents_get_installed_on_load(self, tmp_path: Path) -> None:
        """Agents already live when the plugin loads are installed too."""
        async with open_host(tmp_path, plugins=TEAM_PLUGINS[:1]) as host:
            lead = await start_root(host)
            assert team_tools(host, lead) == []
            host.plugins.load("dsh-team-tools", {})
            assert team_tools(host, lead) == list(TOOL_NAMES)

    async def test_disposal_removes_the_install(self, tmp_path: Path) -> None:
        """Disposing an agent removes its install and leaves other members untouched."""
        async with open_host(tmp_path, profile="agent-teams") as host:
            first, second = await start_root(host), await start_root(host, "other")
            installs = installer(host).installs
            assert set(installs) == {first.id, second.id}
            await host.dispose_agent(first)
            assert set(installs) == {second.id}
            assert team_tools(host, second) == list(TOOL_NAMES)

    async def test_stale_object_does_not_uninstall(self, tmp_path: Path) -> None:
        """Only the exact installed agent object removes its install."""
        async with open_host(tmp_path, profile="agent-teams") as host:
            lead = await start_root(host)
            current = installer(host)
            current.uninstall(type("Stale", (), {"id": lead.id})())
            current.install(lead)  # already installed: nothing registered twice
            assert lead.id in current.installs
            assert team_tools(host, lead) == list(TOOL_NAMES)

    async def test_team_tools_shadow_legacy_controls(self, tmp_path: Path) -> None:
        """Inside a member the scoped send_message replaces a global legacy one; elsewhere the legacy stays."""
        async with open_host(tmp_path, profile="headless", plugins=TEAM_PLUGINS) as host:
            lead = await start_root(host)
            mine = {spec.name: spec for spec in host.tools.visible(lead)}
            assert is_team_tool(mine["send_message"]) and is_team_tool(mine["interrupt_agent"])
            assert "target" in mine["send_message"].args_type.__struct_fields__
            legacy = {spec.name: spec for spec in host.tools.visible(None)}
            assert not is_team_tool(legacy["send_message"])
            assert "target" not in legacy["send_message"].args_type.__struct_fields__


    async def test_team_mode_off_leaves_the_legacy_controls_usable(self, tmp_path: Path) -> None:
        """Hidden scoped Team tools shadow nothing: with Team mode off the legacy controls show through."""
        async with open_host(tmp_path, profile="headless", plugins=TEAM_PLUGINS) as host:
            lead = await start_root(host)
            legacy = {spec.name: spec for spec in host.tools.visible(None)}
            await host.service(TeamServiceAPI).set_enabled(lead, False)
            mine = {spec.name: spec for spec in host.tools.visible(lead)}
            assert {"subagent", "send_message", "list_agents", "interrupt_agent"} <= set(mine)
            assert not any(is_team_tool(spec) for spec in mine.values())
            for name in ("send_message", "list_agents", "interrupt_agent"):
                assert mine[name] is legacy[name] and host.tools.get(lead, name) is legacy[name]
            result = await host.tools.execute(lead, "c1", "list_agents", "{}", AbortSignal())
            assert not result.is_error
            await host.service(TeamServiceAPI).set_enabled(lead, True)
            assert is_team_tool(host.tools.get(lead, "send_message"))


class TestRollback:
    async def test_collision_rolls_back_at_load(self, tmp_path: Path) -> None:
        """A same-scope collision fails the load and leaves no partial install in any agent."""
        async with open_host(tmp_path, plugins=TEAM_PLUGINS[:1]) as host:
            clean, clashing = await start_root(host), await start_root(host, "clash")
            taken = ToolSpec("team_task_get", "taken", s.TeamTaskGetArgs, s.TaskRow, _never)
            host.tools.register(taken, scope=clashing.scope)
            with pytest.raises(RegistrationError):
                host.plugins.load("dsh-team-tools", {})
            assert host.plugins.get("dsh-team-tools") is None
            assert team_tools(host, clean) == []
            assert team_tools(host, clashing) == ["team_task_get"]
            assert "Agent Team" not in policy_of(host, clashing)

    async def test_collision_vetoes_agent_creation(self, tmp_path: Path) -> None:
        """A collision while installing a new agent rolls the install back and vetoes the creation."""

        class Squatter:
            @hookimpl(tryfirst=True)
            def dsh_agent_created(self, host: Any, agent: Any) -> None:
                host.tools.register(ToolSpec("wait_agent", "x", s.WaitAgentArgs, s.WaitAgentResult, _never),
                                    scope=agent.scope)

        async with open_host(tmp_path, plugins=TEAM_PLUGINS, extra_plugins=[("squatter", Squatter())]) as host:
            session = await host.create_session()
            with pytest.raises(RegistrationError):
                host.start_agent(session, name="lead")
            assert host.agents.list() == []
            assert installer(host).installs == {}


class TestLifecycle:
    async def test_config_errors_fail_the_load(self, tmp_path: Path) -> None:
        """An unknown config key fails the load with a ConfigError naming the table."""
        async with open_host(tmp_path, plugins=TEAM_PLUGINS[:1]) as host:
            with pytest.raises(ConfigError, match="frsh_provider"):
                host.plugins.load("dsh-team-tools", {"frsh_provider": "spawn"})
            assert host.plugins.get("dsh-team-tools") is None

    async def test_needs_the_team_service(self, tmp_path: Path) -> None:
        """Loading without dsh-team fails with a clear PluginError."""
        async with open_host(tmp_path) as host:
            with pytest.raises(PluginError, match="load dsh-team first"):
                host.plugins.load("dsh-team-tools", {})

    async def test_unload_removes_every_install(self, tmp_path: Path) -> None:
        """Unloading the plugin removes all scoped tools and sections; agents stay live."""
        async with open_host(tmp_path, profile="agent-teams") as host:
            lead = await start_root(host)
            await host.plugins.unload("dsh-team-tools")
            assert team_tools(host, lead) == []
            assert "Agent Team" not in policy_of(host, lead)
            assert installer(host) is None
            assert host.agents.get(lead.id) is lead

    async def test_reload_reinstalls_without_duplicates(self, tmp_path: Path) -> None:
        """A hot reload removes and reinstalls the nine tools exactly once per live member."""
        async with open_host(tmp_path, profile="agent-teams") as host:
            lead = await start_root(host)
            before = {spec.name: spec for spec in host.tools.visible(lead)}
            with restored_modules("dsh_team_tools"):
                await host.plugins.reload("dsh-team-tools")
            after = host.tools.visible(lead)
            names = [spec.name for spec in after]
            assert len(names) == len(set(names))
            assert [n for n in TOOL_NAMES if n in names] == list(TOOL_NAMES)
            assert all(spec is not before[spec.name] for spec in after if spec.name in TOOL_NAMES)
            assert host.prompts.render(lead).count("# Agent Team") == 1
            result = await host.tools.execute(lead, "c1", "team_task_list", "{}", AbortSignal())
            assert result.content[0]["text"] == '{"tasks":[],"position":0}'

    async def test_team_service_unloaded(self, tmp_path: Path) -> None:
        """Without a loaded Team service the tools hide, new agents get none, and calls fail TEAM_DISPOSED."""
        async with open_host(tmp_path, profile="agent-teams") as host:
            lead = await start_root(host)
            await host.plugins.unload("dsh-team")
            assert team_tools(host, lead) == []
            assert "Agent Team" not in policy_of(host, lead)
            newcomer = await start_root(host, "newcomer")
            assert newcomer.id not in installer(host).installs
            with pytest.raises(DshError) as info:
                installer(host).team()
            assert info.value.code == "TEAM_DISPOSED"
            result = await host.tools.execute(lead, "c", "team_task_list", b"{}", AbortSignal())
            assert result.is_error  # the scoped tool was hidden, and a call cannot reach a service either

    async def test_team_mode_off_hides_tools_and_policy(self, tmp_path: Path) -> None:
        """With Team mode switched off the tools are not offered and the policy is dropped."""
        async with open_host(tmp_path, profile="agent-teams") as host:
            lead = await start_root(host)
            await host.service(TeamServiceAPI).set_enabled(lead, False)
            assert team_tools(host, lead) == []
            assert "Agent Team" not in policy_of(host, lead)
            await host.service(TeamServiceAPI).set_enabled(lead, True)
            assert team_tools(host, lead) == list(TOOL_NAMES)


class TestTaskToolsEndToEnd:
    async def test_task_cas_through_the_real_service(self, tmp_path: Path) -> None:
        """Create, list, get, claim and a stale update render compact JSON from the real service."""
        async with open_host(tmp_path, profile="agent-teams") as host:
            lead = await start_root(host)

            async def call(name: str, args: dict[str, Any]) -> Any:
                return await host.tools.execute(lead, "c", name, compact_json(args), AbortSignal())

            created = await call("team_task_create", {"subject": "Parse", "description": "Write the parser",
                                                      "write_scopes": ["./src/"]})
            assert created.content[0]["text"] == (
                '{"id":"task-1","revision":1,"subject":"Parse","description":"Write the parser",'
                '"status":"pending","blocked_by":[],"write_scopes":["src"],"ready":true,"write_scope_warnings":[],"position":1}')
            claimed = await call("team_task_update", {"task_id": "task-1", "expected_revision": 1,
                                                      "action": "claim"})
            assert '"owner_name":"lead"' in claimed.content[0]["text"]
            assert '"owner_id"' not in claimed.content[0]["text"]
            listed = await call("team_task_list", {"owner": "lead"})
            assert '"id":"task-1"' in listed.content[0]["text"]
            stale = await call("team_task_update", {"task_id": "task-1", "expected_revision": 1,
                                                    "action": "delete"})
            assert stale.error["code"] == "TEAM_TASK_STALE_REVISION"
            assert "stale team task" in stale.content[0]["text"]
            got = await call("team_task_get", {"task_id": "task-1"})
            assert '"revision":2' in got.content[0]["text"]


async def _never(args: Any, call: Any) -> Any:
    raise AssertionError("never called")
