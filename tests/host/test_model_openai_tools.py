"""``narrowed``: a tool's argument schema restricted to the closed sets of one step (constrained mode)."""

from __future__ import annotations

import copy
from typing import Any

from host_spec.host.models.openai_tools import WireTool, narrowed
from host_spec.host.models.openai_wire import constrained_format, constrained_instructions

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "target": {"type": "string", "description": "Member"},
        "ids": {"type": "array", "items": {"type": "string"}},
        "action": {"enum": ["claim", "complete", "reassign"]},
        "note": {"type": "string"},
    },
    "required": ["target"],
    "additionalProperties": False,
}


def tool(**choices: list[str]) -> WireTool:
    return WireTool("t", "d", PARAMETERS, choices)


class TestNarrowed:
    def test_string_list_and_enum_fields_are_narrowed_and_the_input_is_untouched(self) -> None:
        before = copy.deepcopy(PARAMETERS)
        out = narrowed(tool(target=["lead", "bob", "lead"], ids=["task-1"], action=["complete", "claim", "x"]))
        assert out["properties"]["target"] == {"type": "string", "description": "Member", "enum": ["lead", "bob"]}
        assert out["properties"]["ids"] == {"type": "array", "items": {"type": "string", "enum": ["task-1"]}}
        assert out["properties"]["action"] == {"enum": ["complete", "claim"]}
        assert out["properties"]["note"] == {"type": "string"}
        assert (out["required"], out["additionalProperties"]) == (["target"], False)
        assert PARAMETERS == before

    def test_nothing_to_narrow_keeps_the_schema(self) -> None:
        assert narrowed(tool()) is PARAMETERS
        assert narrowed(tool(target=[], missing=["x"])) == PARAMETERS
        assert narrowed(tool(action=["nothing-it-allows"]))["properties"]["action"] == {
            "enum": ["claim", "complete", "reassign"]}
        bare = WireTool("t", "d", {"type": "object"}, {"target": ["x"]})
        assert narrowed(bare) == {"type": "object"}

    def test_the_response_format_and_the_instructions_carry_the_enum(self) -> None:
        narrowed_tool = tool(target=["lead"])
        schema = constrained_format([narrowed_tool])["json_schema"]["schema"]
        assert schema["anyOf"][0]["properties"]["arguments"]["properties"]["target"]["enum"] == ["lead"]
        assert '"enum":["lead"]' in constrained_instructions([narrowed_tool])
        assert "enum" not in str(constrained_format([tool()])["json_schema"]["schema"]["anyOf"][0]["properties"]["arguments"]["properties"]["target"])
