"""The Team tools' closed argument sets at a step, on the real Team service, and as a constrained adapter sends them.

A gated teammate stays live while its sets are read; a teammate whose creation failed
(an unknown fork provider) is never offered as a target; a stale (disposed) agent gets
no sets at all, so its fields stay open.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from team_tools_host import GatedModel, agent_named, call, is_team_tool, open_team, start_root

from host_spec.host.models.adapter import ModelRequest
from host_spec.host.models.openai_adapter import OpenAIModel
from host_spec.host.models.openai_settings import parse_settings

TASK = {"subject": "Write it", "description": "Write the module"}


def specs(host: Any, agent: Any) -> dict[str, Any]:
    return {spec.name: spec for spec in host.tools.visible(agent) if is_team_tool(spec)}


def sets(host: Any, agent: Any) -> dict[str, Any]:
    return {name: dict(spec.choices(agent)) for name, spec in specs(host, agent).items() if spec.choices}


async def team_of_two(host: Any, model: GatedModel) -> tuple[Any, Any]:
    lead = await start_root(host)
    _, error = await call(host, lead, "spawn_teammate", {"name": "writer", "description": "Writes", "prompt": "go"})
    assert error is None
    _, error = await call(host, lead, "spawn_teammate",
                          {"name": "ghost", "description": "Never starts", "prompt": "go", "context": "fork"})
    assert error is not None and error["code"] == "NO_PROVIDER"
    for _ in range(2):
        assert (await call(host, lead, "team_task_create", TASK))[1] is None
    await model.entered["writer"].wait()
    return lead, agent_named(host, "writer")


class TestClosedSets:
    async def test_the_lead_and_a_teammate_see_only_what_they_can_name(self, tmp_path: Path) -> None:
        model = GatedModel({"writer": [{"text": "done"}]}, gated=["writer"])
        async with open_team(tmp_path, model, tools_config={"fork_provider": "no-such-provider"}) as host:
            lead, writer = await team_of_two(host, model)
            tasks = ["task-1", "task-2"]
            everyone = ["lead", "writer"]
            all_actions = ["claim", "release", "edit", "set_dependencies", "complete", "reopen", "reassign", "delete"]
            assert sets(host, lead) == {
                "spawn_teammate": {"role": []},
                "send_message": {"target": ["writer"], "plan": [], "shutdown": ["request"]},
                "interrupt_agent": {"target": ["writer"]},
                "team_task_create": {"blocked_by": tasks},
                "team_task_list": {"owner": [*everyone, "unowned"]},
                "team_task_get": {"task_id": tasks},
                "team_task_update": {"task_id": tasks, "blocked_by": tasks, "owner": everyone, "action": all_actions},
            }
            mine = sets(host, writer)
            assert mine["send_message"] == {"target": ["lead"], "plan": [], "shutdown": []}
            assert mine["team_task_update"]["action"] == [a for a in all_actions if a != "reassign"]
            assert {name for name, spec in specs(host, lead).items() if spec.choices is None} == {
                "list_agents", "wait_agent"}
            model.gates["writer"].set()
            await host.quiesce()

    async def test_an_agent_outside_the_team_gets_open_fields(self, tmp_path: Path) -> None:
        model = GatedModel({"writer": [{"text": "done"}]}, gated=["writer"])
        async with open_team(tmp_path, model, tools_config={"fork_provider": "no-such-provider"}) as host:
            lead, writer = await team_of_two(host, model)
            team_specs = specs(host, writer)
            model.gates["writer"].set()
            await host.quiesce()  # the writer's turn ends and it is released: the old agent is stale
            assert writer not in host.agents.list()
            assert {name: dict(spec.choices(writer)) for name, spec in team_specs.items() if spec.choices} == {
                name: {} for name in ("spawn_teammate", "send_message", "interrupt_agent", "team_task_create", "team_task_list",
                                      "team_task_get", "team_task_update")}


class TestConstrainedRequest:
    async def test_the_wire_schema_narrows_target_and_task_ids_only_in_constrained_mode(self, tmp_path: Path) -> None:
        model = GatedModel({"writer": [{"text": "done"}]}, gated=["writer"])
        async with open_team(tmp_path, model, tools_config={"fork_provider": "no-such-provider"}) as host:
            lead, _ = await team_of_two(host, model)
            request = ModelRequest(agent=lead, system="s", messages=[{"role": "user", "content": []}],
                                   tools=list(specs(host, lead).values()))
            constrained = OpenAIModel(parse_settings("tiny?tools=constrained"), key="").request_body(request)
            variants = {v["properties"]["tool"]["enum"][0]: v["properties"]["arguments"]
                        for v in constrained["response_format"]["json_schema"]["schema"]["anyOf"] if "tool" in v["properties"]}
            assert variants["send_message"]["properties"]["target"]["enum"] == ["writer"]
            assert variants["team_task_update"]["properties"]["task_id"]["enum"] == ["task-1", "task-2"]
            assert variants["team_task_create"]["properties"]["blocked_by"]["items"]["enum"] == ["task-1", "task-2"]
            assert '"target":{"description":"Member target from list_agents, or lead","type":"string","enum":["writer"]}' \
                in constrained["messages"][0]["content"]
            native = OpenAIModel(parse_settings("tiny"), key="").request_body(request)
            native_send = next(t for t in native["tools"] if t["function"]["name"] == "send_message")
            assert "enum" not in native_send["function"]["parameters"]["properties"]["target"]  # closed sets: constrained only
            model.gates["writer"].set()
            await host.quiesce()


class TestControlSets:
    """``role``, ``plan`` and ``shutdown`` offer only what the caller could send now; nothing valid: left out."""

    async def test_roles_plans_and_shutdowns_follow_the_team(self, tmp_path: Path) -> None:
        model = GatedModel({"writer": [{"text": "done"}]}, gated=["writer"])
        async with open_team(tmp_path, model, team_config={"roles": {"reviewer": {"description": "Reviews"}},
                                                       "shutdown_timeout_ms": 200}) as host:
            lead = await start_root(host)
            assert sets(host, lead)["spawn_teammate"] == {"role": ["reviewer"]}
            assert sets(host, lead)["send_message"]["shutdown"] == []  # no teammate to ask yet
            _, error = await call(host, lead, "spawn_teammate",
                                  {"name": "writer", "description": "Writes", "prompt": "go", "plan_approval": True})
            assert error is None
            await model.entered["writer"].wait()
            writer = agent_named(host, "writer")
            assert sets(host, writer)["send_message"] == {"target": ["lead"], "plan": ["submit"], "shutdown": []}
            assert sets(host, writer)["spawn_teammate"] == {"role": []}
            assert sets(host, lead)["send_message"]["plan"] == []  # nothing submitted yet
            _, error = await call(host, writer, "send_message", {"target": "lead", "plan": "submit", "message": "p"})
            assert error is None
            assert sets(host, lead)["send_message"] == {"target": ["writer"], "plan": ["approve", "reject"],
                                                        "shutdown": ["request"]}
            assert sets(host, writer)["send_message"]["plan"] == []  # submitted: nothing to send until decided
            _, error = await call(host, lead, "send_message", {"target": "writer", "shutdown": "request", "message": "s"})
            assert error is None
            assert sets(host, writer)["send_message"]["shutdown"] == ["approve", "decline"]
            model.gates["writer"].set()
            await host.quiesce()

    def test_role_names_are_the_files_and_the_table(self, tmp_path: Path) -> None:
        from dsh_team.roster.roles import role_names

        assert role_names(cwd=str(tmp_path), table={"b": {}}) == ["b"]  # no .dsh/roles folder
        folder = tmp_path / ".dsh" / "roles"
        folder.mkdir(parents=True)
        for stem in ("a", "Not A Role", "b"):
            (folder / f"{stem}.toml").write_text('description = "x"\n', encoding="utf-8")
        assert role_names(cwd=str(tmp_path), table={"b": {}, "c": {}, "UPPER": {}}) == ["a", "b", "c"]

    def test_an_optional_field_with_nothing_valid_is_left_out_of_the_wire_schema(self) -> None:
        from host_spec.host.models.openai_tools import WireTool, narrowed

        parameters = {"type": "object", "required": ["target"],
                      "properties": {"target": {"type": "string"}, "role": {"type": "string"},
                                     "plan": {"enum": ["approve", "reject", "submit"]}}}
        schema = narrowed(WireTool("t", "d", parameters, {"target": [], "role": [], "plan": ["submit"], "x": []}))
        assert schema["properties"] == {"target": {"type": "string"}, "plan": {"enum": ["submit"]}}
        assert parameters["properties"]["role"] == {"type": "string"}  # the shared input is never changed
