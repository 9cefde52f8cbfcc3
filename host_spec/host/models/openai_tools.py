"""A tool as the chat-completions wire sees it, and its schema narrowed to the closed sets of this step.

A constrained reply (``openai:...?tools=constrained``) is decoded by the server under
a grammar built from a JSON schema. Where an argument has a known closed set right
now (``ToolSpec.choices``: member names for a ``target``, task ids, the actions the
caller may take), putting that set into the schema as an ``enum`` makes a wrong
value impossible to generate rather than merely refused afterwards: a 135M model
otherwise writes the tool's own name where a member's belongs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

__all__ = ["WireTool", "narrowed"]


@attrs.frozen
class WireTool:
    """A tool as the wire sees it: name, description and JSON Schema of its arguments.

    ``choices`` maps top-level argument fields to the values they may take right now
    (see ``ToolSpec.choices``); only constrained mode uses it.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    choices: Mapping[str, Sequence[str]] = attrs.field(factory=dict)


def narrowed(tool: WireTool) -> Mapping[str, Any]:
    """``tool.parameters`` with each field of ``tool.choices`` restricted to an ``enum`` (a copy; the input is shared).

    A string field gets ``enum``; a list field gets it on its items; a field that is
    already an ``enum`` keeps only the values in both. An optional field with an
    empty set is left out: nothing valid can be sent in it now, and a model decoding
    under the grammar would otherwise fill it with something (a made-up role, a plan
    step nobody asked for). A required field with an empty set, or a field the
    schema does not have, leaves the schema as it is.
    """
    properties = tool.parameters.get("properties")
    if not tool.choices or not isinstance(properties, Mapping):
        return tool.parameters
    required = tool.parameters.get("required") or ()
    changed = dict(properties)
    for field, values in tool.choices.items():
        prop = properties.get(field)
        if not isinstance(prop, Mapping):
            continue
        if not values:
            if field not in required:
                del changed[field]
            continue
        allowed = list(dict.fromkeys(values))
        if prop.get("type") == "array" and isinstance(prop.get("items"), Mapping):
            changed[field] = {**prop, "items": {**prop["items"], "enum": allowed}}
        elif "enum" in prop:
            kept = [value for value in allowed if value in prop["enum"]]
            changed[field] = {**prop, "enum": kept} if kept else prop
        else:
            changed[field] = {**prop, "enum": allowed}
    return {**tool.parameters, "properties": changed}
