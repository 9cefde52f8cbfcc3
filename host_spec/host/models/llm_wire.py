"""The ``llm:`` spec and the pure translation between the host's conversation and ``llm``'s values.

Spec: ``llm:MODEL_ID_OR_ALIAS[?key=value&...]``, where the model is any model an
installed ``llm`` plugin registers (what ``llm models`` lists, or an alias from
``llm aliases``). Options (all optional)::

    stream=true|false          stream the reply (default true)
    retries=N                  retries on rate limits and transient failures (0..10, default 3)
    backoff=SECONDS            first retry delay, doubled per retry (default 1.0)
    context=N                  the model's context window in tokens (the host compacts near it)
    o.NAME=VALUE               a model option, as ``llm -o NAME VALUE`` (checked by the model's Options)

Keys are never part of a spec (specs are written to run records and descriptors):
a model needing one reads it the way ``llm`` does, from ``llm keys set NAME`` or
the environment variable its plugin names.

Nothing here does I/O beyond building ``llm``'s value objects, so every rule is
tested on plain values; :mod:`host_spec.host.models.llm_adapter` runs the model.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import parse_qsl

import attrs
import msgspec
from llm import Tool, ToolResult
from llm.parts import Message, TextPart, ToolCallPart, ToolResultPart

from host_spec.records import ToolSpec

from host_spec.host.models.adapter import tool_schema
from host_spec.host.models.openai_wire import joined_text
from host_spec.host.models.retries import spec_error, spec_number

__all__ = ["LlmSettings", "LlmTurn", "parse_settings", "to_llm_turn", "to_llm_messages", "to_llm_tools", "usage_from_llm", "call_arguments",
           "encode_arguments"]

OPTION_PREFIX: Final = "o."
_SECRET_KEYS: Final = frozenset({"api_key", "key", "token", "password", "secret"})
_BOOLS: Final = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
_json = msgspec.json.Encoder()
_decode = msgspec.json.Decoder()


@attrs.frozen
class LlmSettings:
    """A checked ``llm:`` spec (no secret in it); ``options`` are the raw ``o.NAME`` values."""

    model: str
    stream: bool = True
    retries: int = 3
    backoff: float = 1.0
    context: int | None = None
    options: Mapping[str, str] = attrs.field(factory=dict)


def parse_settings(argument: str) -> LlmSettings:
    """Parse the part after ``llm:``.

    Raises:
        ModelError: ``MODEL_SPEC_INVALID`` naming the bad option (an unknown key, a
            bad value, a secret in the spec, no model name).
    """
    model, _, query = argument.partition("?")
    if not model:
        raise spec_error("llm spec needs a model id or alias: llm:MODEL (run `llm models` to list them)")
    values: dict[str, Any] = {}
    options: dict[str, str] = {}
    for key, text in parse_qsl(query, keep_blank_values=True):
        if key in _SECRET_KEYS:
            raise spec_error(f"llm spec option {key!r} is refused: keys live in `llm keys set NAME` or the environment")
        if key.startswith(OPTION_PREFIX) and len(key) > len(OPTION_PREFIX):
            options[key[len(OPTION_PREFIX):]] = text
        elif key == "stream":
            if text.lower() not in _BOOLS:
                raise spec_error(f"llm spec option stream={text!r} must be true or false")
            values[key] = _BOOLS[text.lower()]
        elif key == "retries":
            values[key] = int(spec_number("llm", key, text, int, 0, 10))
        elif key == "backoff":
            values[key] = float(spec_number("llm", key, text, float, 0.0, 60.0))
        elif key == "context":
            values[key] = int(spec_number("llm", key, text, int, 1, 100_000_000))
        else:
            raise spec_error(f"unknown llm spec option {key!r} (known: stream, retries, backoff, context, o.NAME)")
    return LlmSettings(model=model, options=options, **values)


def call_arguments(raw: str) -> dict[str, Any]:
    """A recorded call's arguments as the object ``llm`` replays (``llm`` holds them as a dict).

    Text that is not a JSON object (a malformed call the tool step answered with
    ``INVALID_ARGS``) is replayed under ``_raw`` so the model still sees what it wrote.
    """
    try:
        value = _decode.decode(raw or "{}")
    except msgspec.DecodeError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_raw": raw}


def _assistant(message: Mapping[str, Any]) -> Message | None:
    parts: list[Any] = []
    content = message.get("content") or []
    text = joined_text(content)
    if text:
        parts.append(TextPart(text=text))
    for block in content:
        if block.get("type") == "tool-call":
            parts.append(ToolCallPart(name=block.get("name", ""), arguments=call_arguments(block.get("arguments") or ""),
                                      tool_call_id=block.get("id") or None))
    return Message(role="assistant", parts=parts) if parts else None


def to_llm_messages(system: str, messages: Sequence[Mapping[str, Any]]) -> list[Message]:
    """The ``messages=`` history of one ``llm`` prompt.

    The system prompt goes first; consecutive tool results become one ``tool``
    message (providers that answer tool calls in one user turn need them together).
    """
    out: list[Message] = [Message(role="system", parts=[TextPart(text=system)])] if system else []
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            item = _assistant(message)
            if item is not None:
                out.append(item)
        elif role == "tool":
            part = ToolResultPart(name=message.get("name", ""), output=joined_text(message.get("content") or []),
                                  tool_call_id=message.get("call_id") or None)
            if out and out[-1].role == "tool":
                out[-1].parts.append(part)
            else:
                out.append(Message(role="tool", parts=[part]))
        else:
            out.append(Message(role="user", parts=[TextPart(text=joined_text(message.get("content") or []))]))
    return out


@attrs.frozen
class LlmTurn:
    """One ``llm`` prompt's arguments: this turn's input apart from the history before it.

    ``llm`` folds ``prompt=`` and ``tool_results=`` back onto the end of
    ``messages=`` (``_append_turn_input``), so ``response.prompt.messages`` is the
    whole conversation for plugins that read it, while plugins that read
    ``prompt.prompt``, ``prompt.system`` and ``prompt.tool_results`` (llm-echo,
    llm-markov and most plugins written before ``messages=`` existed) get this
    turn's text, the system prompt and the results they asked for, not an empty prompt.
    """

    prompt: str | None
    system: str | None
    history: list[Message]
    tool_results: list[ToolResult]

    def kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``model.prompt(...)`` (those that are set)."""
        out: dict[str, Any] = {"prompt": self.prompt, "system": self.system, "messages": self.history}
        if self.tool_results:
            out["tool_results"] = self.tool_results
        return out


def to_llm_turn(system: str, messages: Sequence[Mapping[str, Any]]) -> LlmTurn:
    """Split the conversation into ``llm``'s history and this turn's input (see :class:`LlmTurn`).

    The newest message, when it is a user message, is the prompt; a trailing run of
    tool results (the answers to the model's last calls) is the turn's
    ``tool_results``. Everything before stays the ``messages=`` history, so the
    chain ``llm`` rebuilds equals :func:`to_llm_messages` of the whole conversation.
    """
    chain = to_llm_messages(system, messages)
    prompt: str | None = None
    results: list[ToolResult] = []
    text = "".join(getattr(part, "text", "") for part in chain[-1].parts) if chain else ""
    if chain and chain[-1].role == "user" and text:  # an empty one stays history: llm drops an empty prompt
        chain.pop()
        prompt = text
    elif chain and chain[-1].role == "tool":
        results = [ToolResult(name=part.name, output=part.output, tool_call_id=part.tool_call_id)
                   for part in chain.pop().parts if isinstance(part, ToolResultPart)]
    return LlmTurn(prompt=prompt, system=system or None, history=chain, tool_results=results)


def to_llm_tools(tools: Sequence[ToolSpec]) -> list[Tool]:
    """Our tools as ``llm.Tool`` *definitions*: no implementation, so ``llm`` can never run one.

    Our loop runs every call itself (recorded in the log); the schema is copied
    because plugins may edit what they are given.
    """
    return [Tool(name=t.name, description=t.description, input_schema=copy.deepcopy(dict(tool_schema(t))),
                 implementation=None) for t in tools]


def _cached(details: Mapping[str, Any] | None) -> int | None:
    """Cached input tokens, wherever the provider's plugin put them."""
    if not isinstance(details, Mapping):
        return None
    for key in ("cached_tokens", "cache_read_input_tokens", "cachedContentTokenCount"):
        if isinstance(details.get(key), int):
            return int(details[key])
    for nested in ("prompt_tokens_details", "input_tokens_details"):
        inner = details.get(nested)
        if isinstance(inner, Mapping) and isinstance(inner.get("cached_tokens"), int):
            return int(inner["cached_tokens"])
    return None


def usage_from_llm(input_tokens: int | None, output_tokens: int | None,
                   details: Mapping[str, Any] | None) -> dict[str, int] | None:
    """``{"input_tokens", "output_tokens"[, "cached_tokens"]}``, or ``None`` when the plugin reported none."""
    if input_tokens is None and output_tokens is None:
        return None
    usage = {"input_tokens": int(input_tokens or 0), "output_tokens": int(output_tokens or 0)}
    cached = _cached(details)
    if cached is not None:
        usage["cached_tokens"] = cached
    return usage


def encode_arguments(arguments: Any) -> str:
    """A call's arguments as the JSON text the tool step validates (text passes through unchanged)."""
    return arguments if isinstance(arguments, str) else _json.encode(arguments).decode()
