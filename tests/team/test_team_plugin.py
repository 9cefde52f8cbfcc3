"""Plugin ``dsh-team``: config validation on load, the provided service, hooks, teardown."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dsh_team.api import TeamServiceAPI
from dsh_team.errors import TeamConfigError
from dsh_team.service import TeamService
from host_spec import hookimpl
from host_spec.errors import ServiceNotFoundError
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel

from kit_waits import until
from roster_kit import restored_modules
from team_host import hold_open, lead, open_host, service


class TestLoad:
    @pytest.mark.parametrize(("config", "path"), [({"max_tasks": 0}, "max_tasks"), ({"max_tasks": 1.5}, "max_tasks"), ({"bogus": 1}, "bogus")])
    async def test_bad_config_fails_the_load_naming_the_field(self, tmp_path: Path, config: dict[str, object], path: str) -> None:
        """TEAM_INVALID_CONFIG names the field; nothing stays loaded or provided."""
        host = await Host.open(tmp_path, None, ScriptedModel.from_mapping({}))
        with pytest.raises(TeamConfigError) as caught:
            host.plugins.load("dsh-team", config)
        assert (caught.value.code, caught.value.path) == ("TEAM_INVALID_CONFIG", path)
        assert host.find_service(TeamServiceAPI) is None and host.plugins.hook_objects("dsh-team") == []
        assert "dsh-team" not in host.plugins.names()
        await host.close()

    async def test_an_in_memory_host_is_refused_unless_a_test_opts_in(self) -> None:
        """TEAM_STORAGE_NOT_DURABLE and nothing loaded; ``allow_volatile_store`` is the test-only opt-in."""
        from dsh_team.errors import TeamError

        host = await Host.open(None, None, ScriptedModel.from_mapping({}))
        assert host.sessions.durable is False
        with pytest.raises(TeamError) as caught:
            host.plugins.load("dsh-team", {})
        assert caught.value.code == "TEAM_STORAGE_NOT_DURABLE"
        assert host.find_service(TeamServiceAPI) is None and "dsh-team" not in host.plugins.names()
        host.plugins.load("dsh-team", {"allow_volatile_store": True})
        assert isinstance(host.service(TeamServiceAPI), TeamService)
        await host.close()

    async def test_the_agent_teams_profile_loads_the_service(self, tmp_path: Path) -> None:
        """The built-in profile provides the service with its configured limits."""
        host = await Host.open(tmp_path, "agent-teams", ScriptedModel.from_mapping({}))
        teams = host.service(TeamServiceAPI)
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
        """Unloading tears the service down, withdraws it and unregisters its hooks."""
        host = await open_host(tmp_path)
        root = await lead(host)
        teams = service(host)
        await hold_open(host, root)
        waiting = asyncio.ensure_future(teams.wait_for_change(root, 10_000))
        await until(lambda: teams.activity.waiting("lead") == 1, what="the wait to be registered")
        await host.plugins.unload("dsh-team")
        assert (await waiting).timed_out is False and (await waiting).reason is None
        assert host.find_service(TeamServiceAPI) is None and host.plugins.hook_objects("dsh-team") == []
        assert all(plugin is not teams for plugin in host.plugins.pm.get_plugins())
        journal = teams.journals.find("lead")
        assert journal is not None and journal.position == root.session.last_seq
        held = journal.position
        event = root.session.append("team/task", {"version": 2, "team_id": "lead", "task": {
            "id": "task-1", "revision": 1, "subject": "s", "description": "d", "status": "pending",
            "blocked_by": [], "write_scopes": []}})
        await root.session.flush()
        assert root.session.durable_seq == event.seq
        assert journal.position == held  # no flush hook reached the old service: nothing announced
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
        await until(lambda: teams.activity.waiting("lead") == 1, what="the wait to be registered")
        host.plugins.notify("dsh_agent_status", host=host, agent=root, status="running")
        assert (await waiting).timed_out is False
        stranger = await host.create_session("stranger")
        teams.journals.drop(stranger)
        event = stranger.append("team/task", {"version": 2, "team_id": "stranger"})
        teams.session_event(stranger, event)
        teams.session_flushed(stranger, 1)
        assert teams.journals.find("stranger") is None
        Journal(stranger)  # folding it later still works (the record is invalid -> failure)
        assert Journal(stranger).state.failure.message == "persisted Agent Teams team/task payload is invalid"
        await host.close()


class Panel:
    """A third-party plugin's per-host object that uses the Team service by type (the README's example)."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.statuses: list[str] = []

    def members(self, agent: object) -> list[str]:
        return [view.name for view in self.host.service(TeamServiceAPI).list_members(agent)]

    @hookimpl
    def dsh_agent_status(self, agent: object, status: str) -> None:
        self.statuses.append(status)


class PanelPlugin:
    @hookimpl
    def dsh_plugin_loaded(self, host: Host, ctx: object) -> None:
        ctx.register(Panel(host))  # type: ignore[attr-defined]


class TestAnotherPlugin:
    async def test_finds_the_service_by_type_across_a_reload(self, tmp_path: Path) -> None:
        """A plugin listed after dsh-team reaches the service by its API type; a reload is seen at once."""
        host = await open_host(tmp_path)
        host.plugins.load("panel", plugin=PanelPlugin())
        try:
            root = await lead(host)
            (panel,) = host.plugins.hook_objects("panel")
            assert panel.members(root) == ["lead"]
            host.plugins.notify("dsh_agent_status", host=host, agent=root, status="running")
            assert panel.statuses == ["running"]  # its own hooks, on this host
            before = host.service(TeamServiceAPI)
            with restored_modules("dsh_team"):
                await host.plugins.reload("dsh-team")
                after = host.service(TeamServiceAPI)  # the API class imported before the reload
                assert after is not before and type(after) is not type(before)
                assert panel.members(root) == ["lead"]
            await host.plugins.unload("dsh-team")
            with pytest.raises(ServiceNotFoundError):
                panel.members(root)
        finally:
            await host.close()
