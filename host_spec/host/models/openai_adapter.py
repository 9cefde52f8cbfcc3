"""The ``openai:`` model adapter: any OpenAI-compatible chat-completions server.

OpenAI, Gemini and OpenRouter through their compatible endpoints, a local Ollama,
llama.cpp or vLLM server: all speak chat completions with tool calls, and the
``openai`` SDK (extra ``openai``) keeps the model's raw ``arguments`` text, so a
malformed call reaches the tool step and the model reads ``INVALID_ARGS``.

What this module adds to the SDK (whose own retries are switched off):

* **Retries with backoff** on rate limits, timeouts, dropped connections and 5xx
  answers (``Retry-After`` honoured, capped), then one typed :class:`ModelError`:
  ``MODEL_RATE_LIMITED``, ``MODEL_UNAVAILABLE``; never retried: ``MODEL_AUTH``,
  ``MODEL_CONTEXT_OVERFLOW``, ``MODEL_REQUEST_REJECTED``, ``MODEL_BAD_REPLY``.
  The turn loop ends the turn ``error`` with that code, so it is in the log.
* **Prompt close on cancel**: the stream is closed in a ``finally``, so an
  interrupt, Ctrl-C or teardown drops the HTTP connection at once and the server
  stops generating.
* **The key stays secret**: read from an environment variable when the adapter is
  built, kept out of ``repr``, and removed from every error text (an auth error
  carries no server text at all, since servers like to echo a key prefix).

Translation to and from the wire is in :mod:`host_spec.host.models.openai_wire`.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from functools import partial
from typing import Any, Final

import attrs

from host_spec.errors import ModelError
from host_spec.extras import require

# Checked before the SDK is imported, so a missing extra is EXTRA_NOT_INSTALLED, not an ImportError.
require("openai", extra="openai", feature="the openai: model kind (--model openai:...)")

import openai  # noqa: E402
from host_spec.protocols import ModelRequest

from host_spec.host.models.adapter import tool_schema
from host_spec.host.models.openai_settings import OpenAISettings, parse_settings
from host_spec.host.models.retries import with_retries
from host_spec.host.models.openai_wire import (
    StreamAccumulator,
    WireTool,
    constrained_format,
    native_tools,
    parse_constrained,
    reply_from_completion,
    to_wire_messages,
)

__all__ = ["OpenAIModel", "from_spec", "classify", "redact"]

#: The longest wait a server's ``Retry-After`` can impose on one retry.
MAX_RETRY_AFTER: Final = 60.0
_PLACEHOLDER_KEY: Final = "not-needed"
_OVERFLOW_HINTS: Final = ("context_length", "context length", "maximum context", "context window",
                          "too many tokens", "exceeds the available context")


def redact(text: str, key: str, *, limit: int = 300) -> str:
    """``text`` without ``key`` (replaced by ``***``), cut to ``limit`` characters."""
    if key:
        text = text.replace(key, "***")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _retry_after(exc: openai.APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after")
    try:
        return min(max(float(value), 0.0), MAX_RETRY_AFTER) if value is not None else None
    except ValueError:
        return None


def classify(exc: BaseException, *, where: str, key: str) -> tuple[bool, float | None, ModelError]:
    """``(retryable, server-requested delay, the final error)`` for one failed attempt."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        detail = redact(exc.message, key)
        if status in (401, 403):
            return False, None, ModelError(f"{where} refused the API key (HTTP {status})", code="MODEL_AUTH")
        if status == 429:
            return True, _retry_after(exc), ModelError(f"{where} rate limit (HTTP 429): {detail}", code="MODEL_RATE_LIMITED")
        if status >= 500 or status == 408:
            return True, _retry_after(exc), ModelError(f"{where} failed (HTTP {status}): {detail}", code="MODEL_UNAVAILABLE")
        if status == 404:
            return False, None, ModelError(f"{where}: not found (HTTP 404): {detail}", code="MODEL_UNAVAILABLE")
        if any(hint in detail.lower() for hint in _OVERFLOW_HINTS):
            return False, None, ModelError(f"{where}: the conversation exceeds the model's context: {detail}",
                                           code="MODEL_CONTEXT_OVERFLOW")
        return False, None, ModelError(f"{where} rejected the request (HTTP {status}): {detail}",
                                       code="MODEL_REQUEST_REJECTED")
    if isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError)):
        what = "timed out" if isinstance(exc, openai.APITimeoutError) else "is unreachable"
        return True, None, ModelError(f"{where} {what}: {redact(str(exc), key)}", code="MODEL_UNAVAILABLE")
    if isinstance(exc, ModelError):
        return False, None, exc
    if isinstance(exc, (ValueError, TypeError, openai.APIResponseValidationError)):
        return False, None, ModelError(f"{where} sent a reply that is not a chat completion: {redact(str(exc), key)}",
                                       code="MODEL_BAD_REPLY")
    return True, None, ModelError(f"{where} failed: {type(exc).__name__}: {redact(str(exc), key)}",
                                  code="MODEL_UNAVAILABLE")


def _choices(tool: Any, agent: Any) -> Mapping[str, Any]:
    """The tool's closed argument sets for this step (``ToolSpec.choices``); none when it has none."""
    choices = getattr(tool, "choices", None)
    return choices(agent) if choices is not None else {}


def _calls_tools(message: Mapping[str, Any]) -> bool:
    return any(block.get("type") == "tool-call" for block in message.get("content") or ())


def _dump(value: Any) -> Mapping[str, Any]:
    dump = getattr(value, "model_dump", None)
    if dump is None:
        raise ModelError(f"the server's reply is not a chat completion object ({type(value).__name__})",
                         code="MODEL_BAD_REPLY")
    result = dump(exclude_none=True)
    return result if isinstance(result, Mapping) else {}


@attrs.define(eq=False)
class OpenAIModel:
    """The ``openai:`` adapter (implements ``protocols.ModelAdapter``)."""

    settings: OpenAISettings
    _key: str = attrs.field(repr=False, alias="key")
    _client: Any = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self._client = openai.AsyncOpenAI(api_key=self._key or _PLACEHOLDER_KEY, base_url=self.settings.base_url,
                                          timeout=self.settings.timeout, max_retries=0)

    @property
    def context_window(self) -> int | None:
        """The window the spec states (``?context=N``), so the host compacts near it."""
        return self.settings.context

    @property
    def where(self) -> str:
        """How errors name the server (never with the key)."""
        return f"model server {self.settings.base_url or 'api.openai.com'} ({self.settings.model})"

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The chat-completions arguments of one step (no transport options)."""
        s = self.settings
        closed = s.tools == "constrained"  # only a schema-constrained reply uses the closed sets
        tools = [WireTool(t.name, t.description, tool_schema(t), _choices(t, request.agent) if closed else {})
                 for t in request.tools]
        body: dict[str, Any] = {"model": s.model, "messages": to_wire_messages(request.system, request.messages,
                                                                             mode=s.tools, tools=tools)}
        steps = [m for m in request.messages if m.get("role") == "assistant"]
        spent = s.max_tool_steps is not None and sum(_calls_tools(m) for m in steps) >= s.max_tool_steps
        forced = [t for t in tools if s.first_tool in ("any", t.name)] if s.first_tool and not steps else []
        if tools and s.tools == "native":
            body["tools"] = native_tools(tools)
            if spent:
                body["tool_choice"] = "none"
            elif forced:
                body["tool_choice"] = "required" if s.first_tool == "any" else {
                    "type": "function", "function": {"name": forced[0].name}}
        elif tools:
            offered = [] if spent else forced or tools
            body["response_format"] = constrained_format(offered, answer=not forced or spent,
                                                         answer_max_chars=s.max_answer_chars)
        if s.max_tokens is not None:
            body["max_tokens"] = s.max_tokens
        if s.temperature is not None:
            body["temperature"] = s.temperature
        return body

    async def complete(self, request: ModelRequest) -> Mapping[str, Any]:
        """One assistant step, retried on transient failures (see the module docstring).

        Raises:
            ModelError: with one of the codes above, once retries are used up.
        """
        body = self.request_body(request)
        constrained = self.settings.tools == "constrained" and bool(request.tools)

        async def attempt() -> dict[str, Any]:
            reply = await (self._streamed(body) if self.settings.stream else self._single(body))
            return self._finish(reply, constrained)

        return await with_retries(attempt, partial(classify, where=self.where, key=self._key),
                                  retries=self.settings.retries, backoff=self.settings.backoff)

    def _finish(self, reply: dict[str, Any], constrained: bool) -> dict[str, Any]:
        if not constrained:
            return reply
        try:
            step = parse_constrained(reply["text"], f"call-{uuid.uuid4().hex[:12]}")
        except ModelError as exc:
            if reply.get("finish_reason") == "length":
                exc.message = f"{exc.message} (the reply hit max_tokens)"
                exc.args = (exc.message,)
            raise
        return {**step, **{k: v for k, v in reply.items() if k in ("usage", "finish_reason")}}

    async def _single(self, body: dict[str, Any]) -> dict[str, Any]:
        completion = await self._client.chat.completions.create(**body)
        return reply_from_completion(_dump(completion))

    async def _streamed(self, body: dict[str, Any]) -> dict[str, Any]:
        stream = await self._client.chat.completions.create(**body, stream=True, stream_options={"include_usage": True})
        accumulator = StreamAccumulator()
        try:
            async for chunk in stream:
                accumulator.add(_dump(chunk))
        finally:
            await stream.close()  # on cancel too: the server stops generating for a turn nobody reads
        return accumulator.reply()

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self._client.close()


def from_spec(argument: str) -> OpenAIModel:
    """The ``dsh.models`` factory of ``openai:`` (see :mod:`host_spec.host.models.openai_settings`).

    Raises:
        ModelError: ``MODEL_SPEC_INVALID`` for a bad spec; ``MODEL_AUTH`` when the key
            variable is not set (its *name* is in the message, never a value).
    """
    settings = parse_settings(argument)
    key = ""
    if settings.api_key_env:
        key = os.environ.get(settings.api_key_env, "")
        if not key:
            raise ModelError(f"environment variable {settings.api_key_env} is not set: it must hold the API key "
                             "(or use api_key_env= for a server that needs none)", code="MODEL_AUTH")
    return OpenAIModel(settings, key=key)

