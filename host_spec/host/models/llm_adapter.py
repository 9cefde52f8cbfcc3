"""The ``llm:`` model adapter: every model an installed ``llm`` plugin registers.

``llm`` (extra ``llm``) reaches OpenAI, Anthropic, Gemini, Mistral, Ollama, local
GGUF files and dozens more through its plugins; ``dsh run --model llm:MODEL`` uses
``llm.get_async_model(MODEL)`` (ids and aliases, as ``llm models`` and ``llm
aliases`` list them; a plugin with a sync model only gets it run in a thread,
see :func:`in_thread`) and asks it for **one step at a time**:

* the conversation goes as ``messages=`` and, for plugins that read the older
  fields, this turn's text as ``prompt=``, the system prompt as ``system=`` and
  the newest tool results as ``tool_results=`` (see :class:`~host_spec.host.models.llm_wire.LlmTurn`);

* our tools go out as ``llm.Tool`` definitions without an implementation and the
  reply's ``tool_calls()`` come back to our loop, which runs and records each one.
  ``llm``'s own ``chain()`` would execute tools outside the durable log, so it is
  never used;
* the reply is streamed (``stream=false`` to switch off) and the stream is closed
  in a ``finally``, so an interrupt stops the provider's generation at once;
* ``usage()`` becomes the step's recorded usage, labelled ``llm:<model id>`` (the
  real id, not the alias typed);
* a model whose ``supports_tools`` is false fails a step that offers tools with
  ``MODEL_TOOLS_UNSUPPORTED`` (its compaction calls, which offer none, still work);
* provider failures become the typed codes the ``openai:`` adapter uses, with the
  same retries: see :func:`classify`.

Keys are ``llm``'s: ``llm keys set NAME`` or the plugin's environment variable.
The adapter resolves the model's key once, only to remove it from every error text.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from functools import partial
from contextlib import aclosing, closing
from typing import Any, Final

import attrs

from host_spec.errors import ModelError
from host_spec.extras import require

# Checked before llm is imported, so a missing extra is EXTRA_NOT_INSTALLED, not an ImportError.
require("llm", extra="llm", feature="the llm: model kind (--model llm:...)")

import llm  # noqa: E402
from host_spec.protocols import ModelRequest

from host_spec.host.models.llm_wire import (
    LlmSettings,
    encode_arguments,
    parse_settings,
    to_llm_tools,
    to_llm_turn,
    usage_from_llm,
)
from host_spec.host.models.openai_adapter import MAX_RETRY_AFTER, redact
from host_spec.host.models.retries import with_retries

__all__ = ["LlmModel", "from_spec", "build", "classify", "in_thread"]

_OVERFLOW_HINTS: Final = ("context_length", "context length", "maximum context", "context window",
                          "too many tokens", "prompt is too long", "exceeds the available context")
_UNAVAILABLE_NAMES: Final = ("Timeout", "Connection", "Connect", "Network", "RemoteProtocol", "ReadError",
                             "ServiceUnavailable", "InternalServer", "Overloaded")


def _names(exc: BaseException) -> str:
    return " ".join(cls.__name__ for cls in type(exc).__mro__)


def _retry_after(exc: BaseException) -> float | None:
    headers = getattr(getattr(exc, "response", None), "headers", None)
    try:
        value = headers.get("retry-after") if headers is not None else None
        return min(max(float(value), 0.0), MAX_RETRY_AFTER) if value is not None else None
    except (TypeError, ValueError, AttributeError):
        return None


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def classify(exc: BaseException, *, where: str, key: str) -> tuple[bool, float | None, ModelError]:
    """``(retryable, server-requested delay, the final error)`` for one failed attempt.

    Plugins raise their provider SDK's exceptions, so the rule reads what they share:
    an HTTP ``status_code`` (on the error or its ``response``), else the exception's
    class names (``RateLimitError``, ``APITimeoutError``, ``ConnectError`` ...).
    An authentication failure carries no provider text (providers echo key prefixes).
    """
    if isinstance(exc, ModelError):
        return False, None, exc
    if isinstance(exc, llm.NeedsKeyException):
        return False, None, ModelError(f"{where}: {redact(str(exc), key)}", code="MODEL_AUTH")
    detail = redact(str(exc) or type(exc).__name__, key)
    status, names = _status(exc), _names(exc)
    if status in (401, 403) or "Authentication" in names or "PermissionDenied" in names:
        shown = f" (HTTP {status})" if status is not None else ""
        return False, None, ModelError(f"{where} refused the API key{shown}", code="MODEL_AUTH")
    if status == 429 or "RateLimit" in names:
        return True, _retry_after(exc), ModelError(f"{where} rate limit: {detail}", code="MODEL_RATE_LIMITED")
    if status is not None and (status >= 500 or status == 408):
        return True, _retry_after(exc), ModelError(f"{where} failed (HTTP {status}): {detail}", code="MODEL_UNAVAILABLE")
    if any(hint in detail.lower() for hint in _OVERFLOW_HINTS):
        return False, None, ModelError(f"{where}: the conversation exceeds the model's context: {detail}",
                                       code="MODEL_CONTEXT_OVERFLOW")
    if status == 404:
        return False, None, ModelError(f"{where}: not found (HTTP 404): {detail}", code="MODEL_UNAVAILABLE")
    if status is not None or isinstance(exc, (llm.ModelError, llm.ConversationNotSupported)):
        shown = f" (HTTP {status})" if status is not None else ""
        return False, None, ModelError(f"{where} rejected the request{shown}: {detail}", code="MODEL_REQUEST_REJECTED")
    if any(name in names for name in _UNAVAILABLE_NAMES) or isinstance(exc, OSError):
        return True, None, ModelError(f"{where} is unreachable: {type(exc).__name__}: {detail}", code="MODEL_UNAVAILABLE")
    if isinstance(exc, (ValueError, TypeError, KeyError)):
        return False, None, ModelError(f"{where} sent a reply dsh cannot read: {type(exc).__name__}: {detail}",
                                       code="MODEL_BAD_REPLY")
    return True, None, ModelError(f"{where} failed: {type(exc).__name__}: {detail}", code="MODEL_UNAVAILABLE")


@attrs.define(eq=False)
class LlmModel:
    """The ``llm:`` adapter (implements ``protocols.ModelAdapter``) around one ``llm.AsyncModel``."""

    settings: LlmSettings
    model: Any = attrs.field(repr=False)
    _key: str = attrs.field(default="", repr=False, alias="key")
    _options: Mapping[str, Any] = attrs.field(factory=dict, repr=False, alias="options")

    @property
    def options(self) -> Mapping[str, Any]:
        """The model options every prompt gets (``o.NAME`` of the spec, converted by the model)."""
        return self._options

    @property
    def context_window(self) -> int | None:
        """The window the spec states (``?context=N``), so the host compacts near it."""
        return self.settings.context

    @property
    def where(self) -> str:
        """How errors name the model (never with the key)."""
        return f"llm model {self.model.model_id}"

    async def complete(self, request: ModelRequest) -> Mapping[str, Any]:
        """One assistant step, retried on transient failures (see :func:`classify`).

        Raises:
            ModelError: ``MODEL_TOOLS_UNSUPPORTED`` when tools are offered to a model
                without tool support; otherwise one of :func:`classify`'s codes.
        """
        if request.tools and not getattr(self.model, "supports_tools", False):
            raise ModelError(f"{self.where} does not support tools (supports_tools is false) and this step offers "
                             f"{len(request.tools)}: pick a model from `llm models list --tools`",
                             code="MODEL_TOOLS_UNSUPPORTED")
        return await with_retries(partial(self._step, request), partial(classify, where=self.where, key=self._key),
                                  retries=self.settings.retries, backoff=self.settings.backoff)

    async def _step(self, request: ModelRequest) -> dict[str, Any]:
        tools = to_llm_tools(request.tools)
        response = self.model.prompt(**to_llm_turn(request.system, request.messages).kwargs(),
                                     tools=tools or None, stream=self.settings.stream, **self._options)
        if isinstance(self.model, (llm.Model, llm.KeyModel)):
            await in_thread(response)
            usage = response.usage()
        else:
            # aclosing: a cancelled turn closes the plugin's generator (and its HTTP stream) now.
            async with aclosing(response.astream_events()) as events:
                async for _ in events:
                    pass
            usage = await response.usage()
        calls = [{"id": call.tool_call_id or "", "name": call.name, "arguments": encode_arguments(call.arguments)}
                 for call in response.tool_calls_or_raise()]
        reply: dict[str, Any] = {"text": response.text_or_raise(), "tool_calls": calls}
        parsed = usage_from_llm(usage.input, usage.output, usage.details)
        if parsed is not None:
            reply["usage"] = parsed
            reply["model"] = f"llm:{self.model.model_id}"
        return reply


async def in_thread(response: Any) -> None:
    """Run a sync model's response in a daemon thread, stopping at the next chunk once cancelled.

    Local models (GGUF, MLX) often come as sync ``llm.Model`` only. The thread is a
    daemon of its own, not the loop's executor, so a model stuck in one long chunk
    never holds the process at exit; closing the event stream closes the plugin's
    generator as soon as its current chunk arrives.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    stop = threading.Event()

    def settle(error: BaseException | None) -> None:
        if not done.done():
            done.set_exception(error) if error is not None else done.set_result(None)

    def work() -> None:
        error: BaseException | None = None
        try:
            with closing(response.stream_events()) as events:
                for _ in events:
                    if stop.is_set():
                        return
        except BaseException as exc:  # handed to the awaiting step, classified there
            error = exc
        if not loop.is_closed():
            loop.call_soon_threadsafe(settle, error)

    threading.Thread(target=work, name="llm-sync-model", daemon=True).start()
    try:
        await done
    finally:
        stop.set()


def _lookup(name: str) -> Any:
    """``llm.get_async_model(name)``, else the sync model (run in a thread), with failures as typed errors."""
    try:
        return llm.get_async_model(name)
    except llm.UnknownModelError as exc:
        text = str(exc.args[0]) if exc.args else str(exc)
        if "sync model exists" in text:
            return llm.get_model(name)
        raise ModelError(f'llm has no model "{name}" (run `llm models` for ids, `llm aliases` for aliases; '
                         "a model comes from an installed llm plugin)", code="MODEL_UNKNOWN") from None
    except ImportError as exc:
        raise ModelError(f"an llm plugin failed to load: {type(exc).__name__}: {exc} (fix or uninstall it, or "
                         "choose the plugins to load with LLM_LOAD_PLUGINS=name,...)", code="MODEL_LOAD_FAILED") from None


def from_spec(argument: str) -> LlmModel:
    """The ``dsh.models`` factory of ``llm:`` (see :mod:`host_spec.host.models.llm_wire`).

    Raises:
        ModelError: ``MODEL_SPEC_INVALID`` for a bad spec or a model option the model
            refuses; ``MODEL_UNKNOWN`` for a model ``llm`` does not know;
            ``MODEL_LOAD_FAILED`` when an ``llm`` plugin fails to import;
            ``MODEL_AUTH`` when the model needs a key and none is set (``llm``'s
            hint names the key and its variable, never a value).
    """
    settings = parse_settings(argument)
    return build(settings, _lookup(settings.model))


def build(settings: LlmSettings, model: Any) -> LlmModel:
    """The adapter of a checked spec around the ``llm`` model it names (options checked, key resolved).

    Raises:
        ModelError: ``MODEL_SPEC_INVALID`` for an option the model refuses; ``MODEL_AUTH``
            when the model needs a key and none is set.
    """
    try:
        checked = model.Options(**settings.options).model_dump() if settings.options else {}
    except ValueError as exc:  # pydantic's ValidationError
        raise ModelError(f"llm model {model.model_id} refuses its options: {exc}", code="MODEL_SPEC_INVALID") from None
    options = {name: value for name, value in checked.items() if name in settings.options}  # converted, as given
    key = ""
    if getattr(model, "needs_key", None):
        try:
            key = model.get_key() or ""
        except llm.NeedsKeyException as exc:
            raise ModelError(f"llm model {model.model_id} needs a key: {exc}", code="MODEL_AUTH") from None
    return LlmModel(settings, model, key=key, options=options)
