"""Model-facing JSON Schemas and compact JSON, shared by hosts and tool plugins.

A tool's argument Struct is the single source of truth: the decoder that
validates a call and the schema the model reads come from the same type, so they
cannot drift. Models want a self-contained object schema (no top-level ``$ref``,
ideally no ``$defs`` at all) and pay for every byte of it on every step, so the
schema is inlined and stripped of what only developers need: Struct titles and
Struct docstrings (those explain *why* to a maintainer). Field descriptions come
from ``Annotated[..., msgspec.Meta(description=...)]`` and are kept.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

__all__ = ["tool_json_schema", "compact_json"]

_REF_PREFIX: Final = "#/$defs/"
_encoder: Final = msgspec.json.Encoder()


def compact_json(value: Any) -> str:
    """``value`` (builtins or Structs) as JSON text without insignificant whitespace."""
    return _encoder.encode(value).decode()


def tool_json_schema(args_type: Any) -> dict[str, Any]:
    """The JSON Schema of ``args_type`` as a model should receive it.

    The root is inlined (no top-level ``$ref``) and every non-recursive nested
    Struct is inlined at its use site; only a recursive Struct keeps a ``$defs``
    entry. Struct objects carry ``additionalProperties: false`` when the Struct
    forbids unknown fields (msgspec emits it). Titles, Struct docstrings and empty
    ``required`` lists are dropped.

    Args:
        args_type: A msgspec Struct type (or any type msgspec can describe).

    Returns:
        A fresh dict the caller may keep or mutate.
    """
    (root,), components = msgspec.json.schema_components([args_type], ref_template=_REF_PREFIX + "{name}")
    defs = {name: _strip_struct_doc(body) for name, body in components.items()}
    kept: dict[str, Any] = {}
    schema: dict[str, Any] = _inline(root, defs, (), kept)  # the root of an args Struct is an object
    if kept:
        schema["$defs"] = kept
    return schema


def _strip_struct_doc(body: dict[str, Any]) -> dict[str, Any]:
    """Drop a component's title and docstring description (developer text, not model text)."""
    return {key: value for key, value in body.items() if key not in ("title", "description")}


def _inline(node: Any, defs: dict[str, Any], stack: tuple[str, ...], kept: dict[str, Any]) -> Any:
    """Replace ``$ref`` nodes by their definitions; keep a ref only where it would recurse."""
    if isinstance(node, list):
        return [_inline(item, defs, stack, kept) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
        name = ref[len(_REF_PREFIX) :]
        site = {key: value for key, value in node.items() if key != "$ref"}
        if name in stack:
            if name not in kept:
                kept[name] = {}  # reserve first: the body below may refer to itself again
                kept[name] = _inline(defs[name], defs, (name,), kept)
            return {"$ref": ref, **_inline(site, defs, stack, kept)}
        body = _inline(defs[name], defs, (*stack, name), kept)
        # Use-site keys (a field's description, its default) win over the definition's.
        return {**body, **_inline(site, defs, stack, kept)}
    out = {key: _inline(value, defs, stack, kept) for key, value in node.items()}
    if out.get("required") == []:
        del out["required"]
    return out
