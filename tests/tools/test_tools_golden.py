"""Golden snapshots of the model-facing Team surface (reviewed like code).

``golden/surface.json`` pins the catalogue: every tool's description, parameter and
result JSON Schema, and the policy section. ``golden/lead.json`` and
``golden/teammate.json`` pin what a Lead and a teammate actually receive on the
reference host (agent-teams plugins): the complete tool list, each Team tool's
schemas, and the policy text in the system prompt. Regenerate deliberately with
``.venv/bin/python -m pytest tests/tools/test_tools_golden.py --update-golden`` (each
rewritten file fails its test until the diff is reviewed and the test rerun).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kit_golden import Golden
from team_tools_host import GatedModel, is_team_tool, open_team

from dsh_team_tools.catalog import CATALOG, model_tools
from dsh_team_tools.policy import POLICY_TEXT, policy_section
from host_spec.schema import tool_json_schema

GOLDEN = Path(__file__).parent / "golden"


def catalogue_surface() -> dict[str, Any]:
    section = policy_section()
    tools = [{**tool, "result": tool_json_schema(entry.result_type)} for tool, entry in zip(model_tools(), CATALOG,
                                                                                         strict=True)]
    return {"tools": tools, "policy": {"name": section.name, "order": section.order, "text": section.text}}


def received(request: Any) -> dict[str, Any]:
    """What one model request carried: all tool names, Team tool schemas, and the policy text."""
    assert POLICY_TEXT in request.system
    return {
        "tools": [spec.name for spec in request.tools],
        "team_tools": [
            {"name": spec.name, "description": spec.description, "parameters": tool_json_schema(spec.args_type),
             "result": tool_json_schema(spec.result_type)}
            for spec in request.tools if is_team_tool(spec)
        ],
        "policy": POLICY_TEXT,
    }


class TestGoldenSurface:
    def test_catalogue_matches_golden(self, golden: Golden) -> None:
        """The tool list, each schema and the policy text equal the reviewed golden file."""
        golden.check(GOLDEN / "surface.json", catalogue_surface())

    async def test_lead_and_teammate_receive_the_golden_surface(self, tmp_path: Path, golden: Golden) -> None:
        """A Lead and its teammate receive the pinned tools and policy, identical for both."""
        script = {"lead": [{"tool_calls": [{"name": "spawn_teammate", "arguments": {
            "name": "reviewer", "description": "Reviews", "prompt": "Review"}}]}, {"text": "ok"}]}
        model = GatedModel(script)
        async with open_team(tmp_path, model) as host:
            await host.run("Use an agent team")
        seen = {name: received(model.first[name]) for name in ("lead", "reviewer")}
        golden.check(GOLDEN / "lead.json", seen["lead"])
        golden.check(GOLDEN / "teammate.json", seen["reviewer"])
        assert seen["lead"] == seen["reviewer"]
        by_name = {tool["name"]: tool for tool in catalogue_surface()["tools"]}
        assert seen["lead"]["team_tools"] == [by_name[tool["name"]] for tool in seen["lead"]["team_tools"]]
        assert len(seen["lead"]["team_tools"]) == len(by_name)
