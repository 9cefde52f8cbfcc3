"""Roles: a preset's instructions, allowlist and model reach the member; bad roles are refused at spawn.

A real host with the Agent Teams profile (workspace tools, Team tools), real JSONL
files, scripted models given as spec files, so a role's model spec really routes
the member to another script.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_team.config import TeamConfig
from dsh_team.core.fold import replay
from dsh_team.errors import TeamConfigError, TeamError
from dsh_team.roster.roles import TEAM_ROLE, RoleSpec, check_model, check_roles, find_role, with_instructions
from dsh_team.service import TeamService
from host_spec.events import EventType
from host_spec.host.app import Host
from host_spec.host.store.jsonl import JsonlStore
from host_spec.messages import text_block

from roster_kit import of_type, teams_of, until

WORKER_SCRIPT = {
    "worker": [
        {"text": "trying", "tool_calls": [{"name": "bash", "arguments": {"command": "echo hi"}},
                                          {"name": "list_dir", "arguments": {"path": "."}}]},
        {"text": "reviewed"},
        {"when": "again", "text": "still reviewing"},
    ],
}  # fmt: skip


def role_file(workspace: Path, name: str, text: str) -> None:
    folder = workspace / ".dsh" / "roles"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.toml").write_text(text)


async def team_host(tmp_path: Path, lead_steps: list[Any], config: dict[str, Any] | None = None) -> tuple[Host, Path]:
    lead_script = tmp_path / "lead.json"
    lead_script.write_text(json.dumps({"lead": lead_steps}))
    (tmp_path / "worker.json").write_text(json.dumps(WORKER_SCRIPT))
    profile = tmp_path / "profile.toml"
    profile.write_text('extends = "agent-teams"\n')
    if config:
        lines = [f'[plugins.dsh-team.roles.{name}]\n' + "".join(f"{k} = {json.dumps(v)}\n" for k, v in spec.items())
                 for name, spec in config.items()]
        profile.write_text('extends = "agent-teams"\n\n' + "\n".join(lines))
    host = await Host.open(tmp_path / "data", profile, f"scripted:{lead_script}")
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return host, workspace


def spawn_step(**arguments: Any) -> dict[str, Any]:
    return {"text": "spawning", "tool_calls": [{"name": "spawn_teammate", "arguments": arguments}]}


class TestRoleAtSpawn:
    async def test_a_file_role_gives_instructions_allowlist_and_model(self, tmp_path: Path) -> None:
        host, workspace = await team_host(tmp_path, [spawn_step(name="worker", description="", prompt="review a.py", role="reviewer"),
                                                     {"text": "spawned"}])
        role_file(workspace, "reviewer", f'description = "Reviews code"\ninstructions = "Never run commands."\n'
                                         f'tools = ["list_dir", "read_file"]\nmodel = "scripted:{tmp_path / "worker.json"}"\n')
        root = await host.run("go", cwd=str(workspace))
        service = teams_of(host)
        worker = next(row for row in service.list_members(root) if row.name == "worker")
        await until(lambda: host.agents.get(worker.id) is None, what="the worker asleep")
        assert worker.description == "Reviews code"  # the role's description stands in
        await host.close()
        store = JsonlStore(tmp_path / "data")
        lead = store.read(root.id)[1]
        roles = of_type(lead, TEAM_ROLE)
        assert roles == [{"version": 1, "team_id": root.id, "member_id": worker.id, "role": "reviewer", "spec": {
            "description": "Reviews code", "instructions": "Never run commands.", "tools": ["list_dir", "read_file"],
            "model": f"scripted:{tmp_path / 'worker.json'}"}}]
        assert replay(lead, root.id).failure is None
        events = store.read(worker.id)[1]
        first = of_type(events, EventType.USER_MESSAGE)[0]
        assert first["content"][-1]["text"].endswith("Role instructions:\nNever run commands.")
        results = {r["name"]: r for r in of_type(events, EventType.TOOL_RESULT)}
        assert results["bash"].get("is_error") and results["bash"]["error"]["code"] == "UNKNOWN_TOOL"
        assert not results["list_dir"].get("is_error")
        descriptor = of_type(events, EventType.SUBAGENT_DESCRIPTOR)[0]
        assert descriptor["agent_model"] == f"scripted:{tmp_path / 'worker.json'}"
        assert any("reviewed" in json.dumps(a) for a in of_type(events, EventType.ASSISTANT_MESSAGE))

    async def test_the_allowlist_holds_after_a_cold_resume(self, tmp_path: Path) -> None:
        host, workspace = await team_host(tmp_path, [spawn_step(name="worker", description="w", prompt="go",
                                                                role="reviewer"), {"text": "spawned"}],
                                          config={"reviewer": {"tools": ["list_dir"],
                                                               "model": f"scripted:{tmp_path / 'worker.json'}"}})
        root = await host.run("go", cwd=str(workspace))
        service = teams_of(host)
        worker_id = next(row.id for row in service.list_members(root) if row.name == "worker")
        await until(lambda: host.agents.get(worker_id) is None, what="the worker asleep")
        assert service.tool_allowlist(root) is None
        await host.close()
        host, _ = await team_host(tmp_path, [{"text": "resumed"}])
        session = await host.resume_session(root.id)
        lead = host.start_agent(session, name="lead", source="resume")
        await teams_of(host).send_message(lead, target="worker", content=[text_block("again")])
        await until(lambda: host.agents.get(worker_id) is not None, what="the worker resumed")
        worker = host.agents.get(worker_id)
        assert teams_of(host).tool_allowlist(worker) == frozenset({"list_dir"})
        visible = {tool.name for tool in host.tools.visible(worker)}
        assert "list_dir" in visible and "bash" not in visible and "read_file" not in visible
        assert "send_message" in visible  # the Team's own tools always stay
        await host.close()

    async def test_bad_roles_are_refused_and_nothing_is_written(self, tmp_path: Path) -> None:
        host, workspace = await team_host(tmp_path, [{"text": "idle"}])
        root = await host.run("go", cwd=str(workspace))
        service = teams_of(host)
        role_file(workspace, "typo", 'tools = ["bsh"]\n')
        role_file(workspace, "broken", "tools = [\n")
        role_file(workspace, "extra", 'colour = "red"\n')
        role_file(workspace, "badmodel", 'model = "nocolon"\n')
        role_file(workspace, "nosuch", 'model = "nosuch:thing"\n')
        before = len(root.session.events)
        for role, code, words in (
            ("nobody", "TEAM_ROLE_NOT_FOUND", "no role"), ("typo", "TEAM_ROLE_INVALID", "unknown tools bsh"),
            ("broken", "TEAM_ROLE_INVALID", "not TOML"), ("extra", "TEAM_ROLE_INVALID", "colour"),
            ("badmodel", "TEAM_ROLE_INVALID", "KIND:MODEL"), ("../x", "TEAM_INVALID_ARGUMENT", "role must be"),
            # A spec the host cannot serve: refused before a member exists (no name, no slot), the host's code quoted.
            ("nosuch", "TEAM_ROLE_INVALID", "model 'nosuch:thing' cannot be used: MODEL_UNKNOWN: unknown model"),
        ):
            with pytest.raises(TeamError) as refused:
                await service.spawn_teammate(root, name="w", description="d", prompt=[text_block("p")],
                                             provider="spawn", role=role)
            assert refused.value.code == code and words in refused.value.message
        assert len(root.session.events) == before and service.list_members(root)[1:] == []
        # A role without a model leaves the choice to the host: nothing to ask it.
        check_model(RoleSpec(tools=("grep",)), host.continuations, '"plain"')
        check_roles({"plain": {"tools": ["grep"]}}, host.continuations)
        await host.close()


class TestRoleRules:
    def test_the_file_wins_over_the_table_and_an_unreadable_file_is_named(self, tmp_path: Path) -> None:
        role_file(tmp_path, "r", 'description = "from file"\n')
        assert find_role("r", cwd=str(tmp_path), table={"r": {"description": "table"}}).description == "from file"
        assert find_role("r", cwd=str(tmp_path), table={"r": {"description": "table"}}, files=False).description == "table"
        (tmp_path / ".dsh" / "roles" / "bin.toml").write_bytes(b"\xff\xfe")
        with pytest.raises(TeamError) as unreadable:
            find_role("bin", cwd=str(tmp_path), table={})
        assert unreadable.value.code == "TEAM_ROLE_INVALID" and "unreadable" in unreadable.value.message

    def test_instructions_are_appended_only_when_given(self) -> None:
        prompt = [text_block("p")]
        assert with_instructions(prompt, RoleSpec()) is prompt
        assert with_instructions(prompt, RoleSpec(instructions="  ")) is prompt
        assert with_instructions(prompt, RoleSpec(instructions="x"))[-1]["text"] == "\n\nRole instructions:\nx"

    def test_profile_roles_are_checked_when_the_service_is_built(self) -> None:
        check_roles({"ok": {"tools": ["grep"]}})
        with pytest.raises(TeamConfigError) as bad:
            check_roles({"bad": {"tools": "grep"}})
        assert bad.value.path == "roles.bad"
        with pytest.raises(TeamConfigError) as not_table:
            TeamConfig.from_mapping({"roles": ["x"]})
        assert not_table.value.path == "roles"
        with pytest.raises(TeamConfigError):
            TeamService(None, TeamConfig.from_mapping({"roles": {"Bad Name": {}}}))  # type: ignore[arg-type]

    async def test_a_profile_role_with_a_model_the_host_cannot_serve_is_refused_at_load(self, tmp_path: Path) -> None:
        from host_spec.errors import DshError

        lead_script = tmp_path / "lead.json"
        lead_script.write_text(json.dumps({"lead": []}))
        profile = tmp_path / "profile.toml"
        profile.write_text('extends = "agent-teams"\n\n[plugins.dsh-team.roles.reviewer]\nmodel = "nosuch:thing"\n')
        with pytest.raises(DshError) as refused:
            await Host.open(tmp_path / "data", profile, f"scripted:{lead_script}")
        assert "roles.reviewer" in refused.value.message and "MODEL_UNKNOWN" in refused.value.message
        assert not list((tmp_path / "data").glob("**/*.jsonl"))  # nothing was created

    async def test_the_role_book_folds_each_event_once_and_forgets_a_left_session(self, tmp_path: Path) -> None:
        from roster_kit import lead, open_team

        host = await open_team(tmp_path)
        root = await lead(host)
        book = teams_of(host).coordination.roles
        await teams_of(host).set_enabled(root, True)  # one event to fold
        assert dict(book.roles(root.session)) == {}
        assert dict(book.roles(root.session)) == {}  # nothing new: nothing folded again
        book.forget(root.session)
        book.forget(root.session)  # twice: nothing left to drop
        await host.close()

    async def test_an_unreadable_record_is_logged_and_skipped(self, tmp_path: Path) -> None:
        import structlog

        from roster_kit import lead, open_team
        from dsh_team.roster.shutdown import TEAM_SHUTDOWN

        host = await open_team(tmp_path)
        root = await lead(host)
        root.session.append(TEAM_ROLE, {"version": 1, "member_id": 5})
        root.session.append(TEAM_SHUTDOWN, {"phase": "gone"})
        service = teams_of(host)
        with structlog.testing.capture_logs() as logs:
            assert dict(service.coordination.roles.roles(root.session)) == {}
            assert dict(service.coordination.shutdowns.book.latest(root.session)) == {}
        assert [entry["type"] for entry in logs if entry["event"] == "team.record_unreadable"] == [TEAM_ROLE, TEAM_SHUTDOWN]
        await host.close()

    async def test_another_teams_records_are_not_this_teams(self, tmp_path: Path) -> None:
        """A fork's inherited prefix carries its parent's role and shutdown records: the books skip them."""
        from roster_kit import lead, open_team
        from dsh_team.roster.shutdown import TEAM_SHUTDOWN

        host = await open_team(tmp_path)
        root = await lead(host)
        spec = {"description": "reviews"}
        root.session.append(TEAM_ROLE, {"version": 1, "team_id": "parent", "member_id": "m", "role": "r", "spec": spec})
        root.session.append(TEAM_SHUTDOWN, {"version": 1, "team_id": "parent", "member_id": "m", "phase": "released"})
        root.session.append(TEAM_ROLE, {"version": 1, "team_id": root.id, "member_id": "n", "role": "r", "spec": spec})
        service = teams_of(host)
        assert list(service.coordination.roles.roles(root.session)) == ["n"]
        assert dict(service.coordination.shutdowns.book.latest(root.session)) == {}
        await host.close()
