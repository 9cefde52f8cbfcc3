"""Pure translation between the host's conversation and the chat-completions wire format.

Nothing here does I/O, so every rule is tested on plain dicts. The adapter
(:mod:`host_spec.host.models.openai_adapter`) only moves these dicts over HTTP.

Two tool modes:

* ``native``: tools go out as ``tools=[{"type": "function", ...}]`` and calls come
  back as ``tool_calls`` whose raw ``arguments`` text is kept byte for byte, so a
  malformed call reaches the tool step and the model reads ``INVALID_ARGS``.
* ``constrained``: for servers or small models without a tool template. The tool
  list is described in the system prompt and the server is asked for one JSON
  object matching a schema that is the union of "call tool X with X's arguments"
  and "answer with text" (JSON-schema ``response_format``). Past tool calls are
  replayed as the JSON the model wrote and tool results as user text, because
  such a template has no ``tool`` role. Fields with a closed set right now (a
  tool's ``choices``: member names for a ``target``, task ids, the caller's
  actions) are narrowed to an ``enum`` in that schema and in the description, so
  a small model decoding under the server's grammar cannot, say, name a tool
  where a member belongs.

Streaming: :class:`StreamAccumulator` folds chunks; tool-call deltas are keyed by
their ``index`` (the id and name arrive on the first delta, the arguments in
pieces that may split a JSON token anywhere).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import attrs
import msgspec

from host_spec.errors import ModelError

from host_spec.host.models.openai_tools import WireTool, narrowed

__all__ = [
    "ToolMode",
    "WireTool",
    "narrowed",
    "to_wire_messages",
    "native_tools",
    "constrained_format",
    "constrained_instructions",
    "parse_constrained",
    "usage_from_wire",
    "joined_text",
    "reply_from_completion",
    "StreamAccumulator",
]

ToolMode = Literal["native", "constrained"]

#: Schema name sent with a constrained ``response_format``.
CONSTRAINED_NAME: Final = "assistant_step"
_json = msgspec.json.Encoder()
_decode = msgspec.json.Decoder()


def _compact(value: Any) -> str:
    return _json.encode(value).decode()


def joined_text(content: Sequence[Mapping[str, Any]]) -> str:
    """Text blocks joined by a newline where one does not already end in whitespace.

    A delivered Team message is a framing block (``Team message <id> from bob:``)
    followed by the sender's blocks; the model must read them as separate lines.
    """
    text = ""
    for block in content:
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            part = block["text"]
            if text and part and not text[-1].isspace():
                text += "\n"
            text += part
    return text


def _calls(content: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [b for b in content if b.get("type") == "tool-call"]


def _constrained_call_text(call: Mapping[str, Any]) -> str:
    """The JSON a constrained model wrote for ``call`` (raw arguments kept when they are not JSON)."""
    raw = call.get("arguments") or "{}"
    try:
        arguments = _decode.decode(raw)
    except msgspec.DecodeError:
        return '{"tool":' + _compact(call.get("name", "")) + ',"arguments":' + raw + "}"
    return _compact({"tool": call.get("name", ""), "arguments": arguments})


def _assistant(message: Mapping[str, Any], mode: ToolMode) -> dict[str, Any] | None:
    content = message.get("content") or []
    text = joined_text(content)
    calls = _calls(content)
    if mode == "constrained":
        parts = [_constrained_call_text(c) for c in calls] or ([_compact({"answer": text})] if text else [])
        return {"role": "assistant", "content": "\n".join(parts)} if parts else None
    if not text and not calls:
        return None
    wire: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        wire["tool_calls"] = [
            {"id": c.get("id", ""), "type": "function",
             "function": {"name": c.get("name", ""), "arguments": c.get("arguments") or ""}}
            for c in calls
        ]
    return wire


def _tool_result(message: Mapping[str, Any], mode: ToolMode) -> dict[str, Any]:
    text = joined_text(message.get("content") or [])
    if mode == "constrained":
        return {"role": "user", "content": f"Result of tool {message.get('name', '')}:\n{text}"}
    return {"role": "tool", "tool_call_id": message.get("call_id", ""), "content": text}


def to_wire_messages(
    system: str, messages: Sequence[Mapping[str, Any]], *, mode: ToolMode = "native", tools: Sequence[WireTool] = ()
) -> list[dict[str, Any]]:
    """The ``messages`` array of one request.

    Args:
        system: The rendered system prompt (sent first when not empty).
        messages: The host conversation: ``role`` ``user`` | ``assistant`` | ``tool``.
        mode: The tool mode (see the module docstring).
        tools: In constrained mode, the tools described in the system message.
    """
    if mode == "constrained" and tools:
        system = f"{system}\n\n{constrained_instructions(tools)}" if system else constrained_instructions(tools)
    wire: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            item = _assistant(message, mode)
            if item is not None:
                wire.append(item)
        elif role == "tool":
            wire.append(_tool_result(message, mode))
        else:
            wire.append({"role": "user", "content": joined_text(message.get("content") or [])})
    return wire


def native_tools(tools: Sequence[WireTool]) -> list[dict[str, Any]]:
    """The ``tools`` array of a native-mode request."""
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": dict(t.parameters)}}
        for t in tools
    ]


def _answer_schema(max_chars: int | None) -> dict[str, Any]:
    answer: dict[str, Any] = {"type": "string"} if max_chars is None else {"type": "string", "maxLength": max_chars}
    return {"type": "object", "properties": {"answer": answer}, "required": ["answer"], "additionalProperties": False}


def constrained_format(
    tools: Sequence[WireTool], *, answer: bool = True, answer_max_chars: int | None = None
) -> dict[str, Any]:
    """The JSON-schema ``response_format``: one call of a listed tool, or (``answer``) a text answer.

    ``answer_max_chars`` bounds the answer in the schema itself, so a model that
    repeats itself still closes its JSON before ``max_tokens``.

    Shared definitions (``$defs``) of the tools' schemas move to the root, where
    their ``#/$defs/...`` references point.
    """
    defs: dict[str, Any] = {}
    variants = []
    for tool in tools:
        parameters = dict(narrowed(tool))
        defs.update(parameters.pop("$defs", None) or {})
        variants.append(
            {"type": "object", "properties": {"tool": {"type": "string", "enum": [tool.name]}, "arguments": parameters},
             "required": ["tool", "arguments"], "additionalProperties": False}
        )
    if answer or not variants:
        variants.append(_answer_schema(answer_max_chars))
    schema: dict[str, Any] = {"anyOf": variants}
    if defs:
        schema["$defs"] = defs
    return {"type": "json_schema", "json_schema": {"name": CONSTRAINED_NAME, "schema": schema}}


def constrained_instructions(tools: Sequence[WireTool]) -> str:
    """How a constrained model is told about its tools (appended to the system prompt)."""
    lines = [
        "Reply with exactly one JSON object.",
        'To call a tool: {"tool": "<name>", "arguments": {...}}. To answer without a tool: {"answer": "<text>"}.',
        "Tools:",
    ]
    lines += [f"- {t.name}: {t.description} Arguments schema: {_compact(narrowed(t))}" for t in tools]
    return "\n".join(lines)


def parse_constrained(text: str, call_id: str) -> dict[str, Any]:
    """An assistant step from a constrained reply's JSON text.

    Raises:
        ModelError: ``MODEL_BAD_REPLY`` when the text is not one JSON object of either shape.
    """
    try:
        value = _decode.decode(text.strip() or b"null")
    except msgspec.DecodeError as exc:
        raise ModelError(f"constrained reply is not JSON ({exc}): {text[:200]!r}", code="MODEL_BAD_REPLY") from None
    if isinstance(value, dict) and isinstance(value.get("tool"), str) and value["tool"]:
        arguments = value.get("arguments", {})
        return {"text": "", "tool_calls": [{"id": call_id, "name": value["tool"], "arguments": _compact(arguments)}]}
    if isinstance(value, dict) and isinstance(value.get("answer"), str):
        return {"text": value["answer"], "tool_calls": []}
    raise ModelError(f'constrained reply needs "tool" or "answer": {text[:200]!r}', code="MODEL_BAD_REPLY")


def usage_from_wire(usage: Mapping[str, Any] | None) -> dict[str, int] | None:
    """``{"input_tokens", "output_tokens"[, "cached_tokens"]}`` from a wire ``usage`` object."""
    if not isinstance(usage, Mapping):
        return None
    out = {"input_tokens": int(usage.get("prompt_tokens") or 0), "output_tokens": int(usage.get("completion_tokens") or 0)}
    details = usage.get("prompt_tokens_details")
    if isinstance(details, Mapping) and details.get("cached_tokens") is not None:
        out["cached_tokens"] = int(details["cached_tokens"])
    return out


def _first_choice(body: Mapping[str, Any]) -> Mapping[str, Any]:
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise ModelError("the server replied with no choices", code="MODEL_BAD_REPLY")
    return choices[0]


def _finish(text: str, calls: list[dict[str, Any]], finish: str | None, usage: Any) -> dict[str, Any]:
    reply: dict[str, Any] = {"text": text, "tool_calls": calls}
    if finish is not None:
        reply["finish_reason"] = finish
    parsed = usage_from_wire(usage)
    if parsed is not None:
        reply["usage"] = parsed
    return reply


def reply_from_completion(body: Mapping[str, Any]) -> dict[str, Any]:
    """An assistant step from a non-streamed completion body (native mode shape).

    Raises:
        ModelError: ``MODEL_BAD_REPLY`` for no choices or a call without a function name.
    """
    choice = _first_choice(body)
    message = choice.get("message") or {}
    calls = []
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") or {}
        if not function.get("name"):
            raise ModelError(f"tool call {index} has no function name", code="MODEL_BAD_REPLY")
        calls.append({"id": call.get("id") or "", "name": function["name"], "arguments": function.get("arguments") or ""})
    return _finish(message.get("content") or "", calls, choice.get("finish_reason"), body.get("usage"))


@attrs.define
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = attrs.Factory(list)


@attrs.define
class StreamAccumulator:
    """Folds streamed chunks (plain dicts) into one assistant step.

    Text deltas are concatenated; tool-call deltas are merged per ``index`` (a later
    delta may repeat the id or name; the first non-empty one wins); the usage chunk
    (``choices: []``) is kept; ``finish_reason`` comes from the last choice that has one.
    """

    text: list[str] = attrs.Factory(list)
    calls: dict[int, _PartialCall] = attrs.Factory(dict)
    usage: Mapping[str, Any] | None = None
    finish_reason: str | None = None
    saw_choice: bool = False

    def add(self, chunk: Mapping[str, Any]) -> None:
        """Fold one chunk."""
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            self.saw_choice = True
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.text.append(delta["content"])
            for call in delta.get("tool_calls") or ():
                partial = self.calls.setdefault(int(call.get("index") or 0), _PartialCall())
                partial.id = partial.id or call.get("id") or ""
                function = call.get("function") or {}
                partial.name = partial.name or function.get("name") or ""
                if function.get("arguments"):
                    partial.arguments.append(function["arguments"])
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def reply(self) -> dict[str, Any]:
        """The accumulated step (native mode shape).

        Raises:
            ModelError: ``MODEL_BAD_REPLY`` when no chunk carried a choice, or a call has no name.
        """
        if not self.saw_choice:
            raise ModelError("the server streamed no choices", code="MODEL_BAD_REPLY")
        calls = []
        for index in sorted(self.calls):
            partial = self.calls[index]
            if not partial.name:
                raise ModelError(f"streamed tool call {index} has no function name", code="MODEL_BAD_REPLY")
            calls.append({"id": partial.id, "name": partial.name, "arguments": "".join(partial.arguments)})
        return _finish("".join(self.text), calls, self.finish_reason, self.usage)
