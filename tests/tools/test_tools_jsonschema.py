"""host_spec.schema: the model-facing JSON Schema and compact JSON."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from host_spec.schema import compact_json, tool_json_schema


class Inner(msgspec.Struct, forbid_unknown_fields=True):
    """Developer docstring that must not reach the model."""

    value: Annotated[int, Meta(description="A value")]


class Outer(msgspec.Struct, forbid_unknown_fields=True):
    """Outer docstring."""

    inner: Annotated[Inner, Meta(description="Use-site text")]
    many: list[Inner] = []


class Loose(msgspec.Struct):
    name: str


class Node(msgspec.Struct, forbid_unknown_fields=True):
    label: str
    children: list[Node] = []


class Holder(msgspec.Struct):
    root: Node


class TestToolJsonSchema:
    def test_root_is_inlined(self) -> None:
        """The root schema is the object itself, never a top-level $ref."""
        schema = tool_json_schema(Inner)
        assert "$ref" not in schema and "$defs" not in schema
        assert schema["type"] == "object"
        assert schema["properties"]["value"] == {"description": "A value", "type": "integer"}

    def test_forbid_unknown_fields_closes_the_object(self) -> None:
        """A Struct that forbids unknown fields says additionalProperties false; a loose one does not."""
        assert tool_json_schema(Inner)["additionalProperties"] is False
        assert "additionalProperties" not in tool_json_schema(Loose)

    def test_titles_and_docstrings_are_dropped(self) -> None:
        """Struct titles and docstrings stay out of the model schema; Meta descriptions stay in."""
        text = compact_json(tool_json_schema(Outer))
        assert "title" not in text
        assert "docstring" not in text
        assert "A value" in text

    def test_nested_structs_are_inlined_with_use_site_keys(self) -> None:
        """A nested Struct is inlined where used and the use-site description wins."""
        schema = tool_json_schema(Outer)
        inner = schema["properties"]["inner"]
        assert inner["description"] == "Use-site text"
        assert inner["properties"]["value"]["type"] == "integer"
        assert schema["properties"]["many"]["items"]["additionalProperties"] is False
        assert "$defs" not in schema

    def test_recursive_struct_keeps_only_its_definition(self) -> None:
        """A recursive Struct is inlined at the root and referenced once through $defs."""
        schema = tool_json_schema(Holder)
        assert schema["properties"]["root"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
        assert set(schema["$defs"]) == {"Node"}
        assert schema["$defs"]["Node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}

    def test_recursive_root_is_inlined(self) -> None:
        """Even a self-referencing root is an object, with its definition kept for the inner refs."""
        schema = tool_json_schema(Node)
        assert schema["type"] == "object"
        assert schema["required"] == ["label"]
        assert "Node" in schema["$defs"]

    def test_empty_required_is_dropped(self) -> None:
        """An object without required fields carries no empty required list."""

        class NoRequired(msgspec.Struct):
            n: int = 0

        assert "required" not in tool_json_schema(NoRequired)

    def test_non_struct_types(self) -> None:
        """A container type is described with its items inlined."""
        schema = tool_json_schema(list[Inner])
        assert schema["type"] == "array"
        assert schema["items"]["properties"]["value"]["type"] == "integer"

    def test_result_is_fresh(self) -> None:
        """Mutating one returned schema does not affect the next call."""
        tool_json_schema(Inner)["properties"].clear()
        assert tool_json_schema(Inner)["properties"]


class TestCompactJson:
    def test_no_whitespace(self) -> None:
        """Compact JSON has no spaces after separators."""
        assert compact_json({"a": [1, 2], "b": "x y"}) == '{"a":[1,2],"b":"x y"}'

    def test_structs_and_unicode(self) -> None:
        """Structs encode by field and non-ASCII stays UTF-8 text."""
        assert compact_json(Inner(value=3)) == '{"value":3}'
        assert compact_json("é") == '"é"'
