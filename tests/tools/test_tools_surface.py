"""Budget M1 and the shape of the model-facing Team surface."""

from __future__ import annotations

import json

from dsh_team_tools.catalog import CATALOG, SURFACE_BUDGET, TOOL_NAMES, model_tools, surface_size
from dsh_team_tools.policy import POLICY_TEXT
from host_spec.schema import compact_json

NINE = ("spawn_teammate", "send_message", "list_agents", "wait_agent", "interrupt_agent",
        "team_task_create", "team_task_list", "team_task_get", "team_task_update")


class TestSurface:
    def test_the_nine_tools(self) -> None:
        """The surface is exactly the nine Team tools."""
        assert TOOL_NAMES == NINE
        assert [tool["name"] for tool in model_tools()] == list(NINE)

    def test_every_parameters_schema_is_a_closed_inline_object(self) -> None:
        """Each parameters schema is an object, closed, without $ref or $defs anywhere."""
        for tool in model_tools():
            parameters = tool["parameters"]
            assert parameters["type"] == "object"
            assert parameters["additionalProperties"] is False
            assert "$ref" not in compact_json(parameters)
            assert "$defs" not in parameters

    def test_surface_size_counts_schemas_and_policy(self) -> None:
        """surface_size is the compact tool list plus the policy text, in UTF-8 bytes."""
        expected = len(json.dumps(model_tools(), separators=(",", ":"), ensure_ascii=False).encode())
        assert surface_size() == expected + len(POLICY_TEXT.encode())

    def test_within_budget(self) -> None:
        """M1: the complete surface stays within 6500 bytes."""
        assert SURFACE_BUDGET == 6500
        assert surface_size() <= SURFACE_BUDGET

    def test_descriptions_are_short(self) -> None:
        """No tool description runs past 160 characters."""
        assert all(len(entry.description) <= 160 for entry in CATALOG)
