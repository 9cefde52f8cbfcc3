"""Plugin ``dsh-team``: config validation on load, the provided service, hooks, teardown."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dsh_team import plugin
from dsh_team.errors import TeamConfigError
from dsh_team.service import TeamService
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel

from team_host import lead, open_host, service


class TestLoad:
    @pytest.mark.parametrize(("config", "path"), [({"max_tasks": 0}, "max_tasks"), ({"max_tasks": 1.5}, "max_tasks"), ({"bogus": 1}, "bogus")])
    async def test_bad_config_fails_the_load_naming_the_field(self, tmp_path: Path, config: dict[str, object], path: str) -> None:
        """TEAM_INVALID_CONFIG names the field; nothing stays loaded or provided."""
        host = await Host.open(tmp_path, None, ScriptedModel.from_mapping({}))
        with pytest.raises(TeamConfigError) as caught:
            host.plugins.load("dsh-team", config)
        assert (caught.value.code, caught.value.path) == ("TEAM_INVALID_CONFIG", path)
        assert host.service("agent_teams") is None and plugin.service_for(host) is None
        assert "dsh-team" not in host.plugins.names()
        await host.close()

    async def test_the_agent_teams_profile_loads_the_service(self, tmp_path: Path) -> None:
        """The built-in profile provides the service with its configured limits."""
        host = await Host.open(tmp_path, "agent-teams", ScriptedModel.from_mapping({}))
        teams = host.service("agent_teams")
        assert isinstance(teams, TeamService) and teams.config.max_members == 8
        root = await lead(host)
        assert (await teams.create_task(root, subject="s", description="d")).revision == 1
        await host.close()

    async def test_sessions_live_before_the_load_are_folded(self, tmp_path: Path) -> None:
        """Loading into a host with live sessions folds them at once."""
        host = await Host.open(tmp_path, None, ScriptedModel.from_mapping({}))
        root = await lead(host)
        root.session.append("team/task", {"version": 2, "team_id": "lead", "task": {
            "id": "task-1", "revision": 1, "subject": "s", "description": "d", "status": "pending",
            "blocked_by": [], "write_scopes": []}})  # fmt: skip
        host.plugins.load("dsh-team", {})
        teams = service(host)
        assert teams.journals.find("lead") is not None
        assert [v.id for v in teams.list_tasks(root)] == ["task-1"]
        await host.close()


class TestHooksAndTeardown:
    async def test_unload_disposes_the_service_and_releases_waits(self, tmp_path: Path) -> None:
        """Unloading tears the service down, removes it, and later hook calls are no-ops."""
        host = await open_host(tmp_path)
        root = await lead(host)
        teams = service(host)
        waiting = asyncio.ensure_future(teams.wait_for_change(root, 10_000))
        await asyncio.sleep(0)
        await host.plugins.unload("dsh-team")
        assert (await waiting).timed_out is False
        assert host.service("agent_teams") is None and plugin.service_for(host) is None
        plugin.dsh_session_created(host, root.session)
        plugin.dsh_session_event(host, root.session, root.session.append("turn/start", {"turn": 1}))
        plugin.dsh_session_flushed(host, root.session, 1)
        plugin.dsh_session_disposed(host, root.session)
        plugin.dsh_agent_status(host, root, "idle")
        plugin.dsh_plugin_unload(host, None)
        await plugin.dsh_plugin_teardown(host, None)
        await host.close()

    async def test_session_disposal_forgets_the_journal(self, tmp_path: Path) -> None:
        """A disposed Lead session's journal is dropped; a resumed one gets a fresh journal."""
        host = await open_host(tmp_path)
        root = await lead(host)
        teams = service(host)
        await teams.create_task(root, subject="s", description="d")
        old = teams.journals.find("lead")
        await host.dispose_agent(root)
        assert teams.journals.find("lead") is None
        session = await host.resume_session("lead")
        again = host.start_agent(session, name="lead", source="resume")
        assert teams.journals.find("lead") is not old
        assert teams.get_task(again, "task-1").revision == 1
        await host.close()


class TestFeed:
    async def test_hooks_feed_the_service(self, tmp_path: Path) -> None:
        """Status hooks wake waiters; events and flushes of unknown sessions are ignored."""
        from dsh_team.log.journal import Journal

        host = await open_host(tmp_path)
        root = await lead(host)
        teams = service(host)
        waiting = asyncio.ensure_future(teams.wait_for_change(root, 10_000))
        await asyncio.sleep(0)
        plugin.dsh_agent_status(host, root, "running")
        assert (await waiting).timed_out is False
        stranger = await host.create_session("stranger")
        teams.journals.drop(stranger)
        event = stranger.append("team/task", {"version": 2, "team_id": "stranger"})
        teams.session_event(stranger, event)
        teams.session_flushed(stranger, 1)
        assert teams.journals.find("stranger") is None
        Journal(stranger)  # folding it later still works (the record is invalid -> failure)
        assert Journal(stranger).state.failure == "persisted Agent Teams team/task payload is invalid"
        await host.close()
