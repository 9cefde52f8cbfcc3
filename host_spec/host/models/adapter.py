"""The model seam the turn loop talks to: one request in, one assistant step out.

Adapters implement ``protocols.ModelAdapter``: ``await complete(request)`` returns
``{"text": str, "tool_calls": [{"id", "name", "arguments"}]}``, optionally with
``"usage": {"input_tokens", "output_tokens", "cached_tokens"?}`` and ``"model"``. The loop checks
that shape here, once, so an adapter bug becomes a typed ``ModelError`` (a turn
ending ``error``) rather than a crash deep inside tool dispatch.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from host_spec.errors import ModelError
from host_spec.events import json_encode
from host_spec.messages import Usage
from host_spec.records import AbortSignal, ToolSpec
from host_spec.schema import tool_json_schema

if TYPE_CHECKING:
    from host_spec.protocols import Agent

__all__ = ["ModelRequest", "ModelReply", "ModelToolCall", "parse_reply", "tool_definitions", "tool_schema",
           "positive_tokens"]

#: Built once per args type and shared by every tool of that type (Team tools are registered
#: once per member scope with the same Structs).
_schemas: dict[Any, dict[str, Any]] = {}


def tool_schema(spec: ToolSpec) -> dict[str, Any]:
    """The model-facing JSON Schema of ``spec``'s arguments (root inlined; cached per type).

    The same generator (:func:`host_spec.schema.tool_json_schema`) serves the Team
    tools' golden files and the M1 budget, so what is measured is what is sent.
    A spec with its own ``input_schema`` (an MCP server's tool) is sent as written.
    Callers must not mutate the result.
    """
    if spec.input_schema is not None:
        return dict(spec.input_schema)
    cached = _schemas.get(spec.args_type)
    if cached is None:
        cached = _schemas[spec.args_type] = tool_json_schema(spec.args_type)
    return cached


def positive_tokens(value: Any) -> int | None:
    """``value`` when it is a positive ``int`` (a usable token count, e.g. an adapter's ``context_window``), else
    ``None``."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@attrs.frozen
class ModelRequest:
    """One model call (implements ``protocols.ModelRequest``).

    Attributes:
        agent: The calling agent (the scripted model keys its script by ``agent.name``).
        system: The rendered system prompt.
        messages: The derived conversation: user, assistant and tool-result messages as
            dicts with a ``role`` (``user`` | ``assistant`` | ``tool``).
        tools: Tools the agent may call in this step.
        signal: Aborted when the turn is cancelled; adapters may stop early.
        purpose: ``"step"`` for an agent's step; ``"compaction"`` for a request to
            summarise older turns (no tools: the answer's text is the summary).
    """

    agent: Agent
    system: str
    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[ToolSpec]
    signal: AbortSignal | None = None
    purpose: str = "step"


@attrs.frozen
class ModelToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text, as the model produced it


@attrs.frozen
class ModelReply:
    text: str
    tool_calls: tuple[ModelToolCall, ...] = ()
    usage: Usage | None = None
    model: str | None = None


_USAGE_KEYS = ("input_tokens", "output_tokens", "cached_tokens")


def _usage(raw: Any) -> Usage | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ModelError("model reply usage must be an object", code="MODEL_BAD_REPLY")
    for key in _USAGE_KEYS:
        value = raw.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise ModelError(f"model reply usage.{key} must be a non-negative integer", code="MODEL_BAD_REPLY")
    return Usage(input_tokens=raw.get("input_tokens") or 0, output_tokens=raw.get("output_tokens") or 0,
                 cached_tokens=raw.get("cached_tokens"))


def tool_definitions(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """``[{"name", "description", "parameters"}]`` for a provider API."""
    return [{"name": t.name, "description": t.description, "parameters": tool_schema(t)} for t in tools]


def parse_reply(reply: Any) -> ModelReply:
    """Check an adapter's reply and normalise it (``arguments`` objects become JSON text).

    Raises:
        ModelError: (code ``MODEL_BAD_REPLY``) the reply does not have the documented shape.
    """
    if not isinstance(reply, Mapping):
        raise ModelError(f"model reply must be an object, got {type(reply).__name__}", code="MODEL_BAD_REPLY")
    text = reply.get("text") or ""
    if not isinstance(text, str):
        raise ModelError("model reply text must be a string", code="MODEL_BAD_REPLY")
    raw_calls = reply.get("tool_calls") or []
    if not isinstance(raw_calls, Sequence) or isinstance(raw_calls, str):
        raise ModelError("model reply tool_calls must be a list", code="MODEL_BAD_REPLY")
    calls = []
    for index, call in enumerate(raw_calls):
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str) or not call["name"]:
            raise ModelError(f"model reply tool_calls[{index}] needs a name", code="MODEL_BAD_REPLY")
        arguments = call.get("arguments", "")
        if isinstance(arguments, Mapping):
            arguments = json_encode(arguments).decode()
        elif not isinstance(arguments, str):
            raise ModelError(f"model reply tool_calls[{index}].arguments must be JSON text", code="MODEL_BAD_REPLY")
        call_id = call.get("id") or f"call-{uuid.uuid4().hex[:12]}"
        calls.append(ModelToolCall(id=str(call_id), name=call["name"], arguments=arguments))
    model = reply.get("model")
    if model is not None and not isinstance(model, str):
        raise ModelError("model reply model must be a string", code="MODEL_BAD_REPLY")
    return ModelReply(text=text, tool_calls=tuple(calls), usage=_usage(reply.get("usage")), model=model)
