"""Model specs and the adapters behind them, found through entry-point group ``dsh.models``.

A model spec is ``KIND:ARGUMENT`` (``scripted:script.json``, ``openai:gpt-4o-mini``,
``openai:qwen2.5?tools=constrained``). ``KIND`` names an entry point of group
``dsh.models`` whose object is a factory ``factory(argument: str) -> ModelAdapter``;
the built-in ``scripted`` and the ``openai`` extra are registered exactly as a
third-party distribution registers its own, so nothing here knows any of them.

A spec holds no secret (keys come from environment variables), so it is what a run
record and a child's descriptor store, and what ``dsh resume`` resolves again.
:func:`spec_label` (``KIND:MODEL``, no query) is what an assistant event records.

:class:`ModelRoutes` is the adapter the turn loop calls: it answers each request
with the adapter of the calling agent's own spec (``agent.model``), so members of
one Team may run on different models.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import Any, Final

import attrs
import structlog

from host_spec.errors import DshError, ModelError
from host_spec.protocols import ModelAdapter, ModelRequest

from host_spec.host.models.adapter import positive_tokens

__all__ = ["MODEL_ENTRY_POINT_GROUP", "Factory", "installed_factories", "resolve_spec", "spec_label", "ModelRoutes"]

#: Entry-point group of model adapter factories (``name = "module:factory"``).
MODEL_ENTRY_POINT_GROUP: Final = "dsh.models"

Factory = Callable[[str], ModelAdapter]

log = structlog.get_logger(__name__)


def installed_factories() -> dict[str, Callable[[], Factory]]:
    """Installed ``dsh.models`` entry points: kind -> a loader of its factory (imported on use)."""
    return {ep.name: ep.load for ep in entry_points(group=MODEL_ENTRY_POINT_GROUP)}


def spec_label(spec: str) -> str:
    """``KIND:MODEL`` of a spec, without its ``?options`` (what usage records name)."""
    return spec.partition("?")[0]


def resolve_spec(spec: str, *, factories: Mapping[str, Callable[[], Factory]] | None = None) -> ModelAdapter:
    """The adapter a spec names.

    Args:
        spec: ``KIND:ARGUMENT``.
        factories: Kind -> factory loader (default: :func:`installed_factories`).

    Raises:
        ModelError: ``MODEL_UNKNOWN`` for a kind no entry point serves (the message
            lists the installed kinds), ``MODEL_LOAD_FAILED`` when its entry point
            cannot be imported; the factory's own error otherwise.
        ExtraNotInstalledError: ``EXTRA_NOT_INSTALLED`` from a built-in kind whose
            extra is missing (``openai:``, ``llm:``: their modules check it on import).
    """
    available = installed_factories() if factories is None else factories
    kind, sep, argument = spec.partition(":")
    if not sep or not argument or kind not in available:
        kinds = ", ".join(f"{name}:..." for name in sorted(available)) or "none"
        raise ModelError(f'unknown model "{spec}" (available: {kinds})', code="MODEL_UNKNOWN")
    try:
        factory = available[kind]()
    except ImportError as exc:
        raise ModelError(f'model kind "{kind}" failed to import: {type(exc).__name__}: {exc}',
                         code="MODEL_LOAD_FAILED") from None
    adapter = factory(argument)
    if not callable(getattr(adapter, "complete", None)):
        raise ModelError(f'model kind "{kind}" returned {type(adapter).__name__}, not a model adapter', code="MODEL_UNKNOWN")
    return adapter


@attrs.define(eq=False)
class ModelRoutes:
    """The turn loop's adapter: each request goes to the calling agent's own model.

    An agent whose ``model`` is ``None`` or the default spec uses the default
    adapter; a spec added with :meth:`add` (the profile's member models) uses its
    own. Any other spec came from a child's descriptor: it is resolved once and kept
    when the host runs on a spec, so a resumed member keeps the model it started
    with; a host given an adapter *object* (an embedding program, a test) answers
    such agents with that object, since it chose the model for the whole process.
    A spec that no longer resolves fails that agent's turn with its typed error.

    Attributes:
        default: The run's adapter.
        default_spec: The run's spec, or ``None`` when an adapter object was given.
    """

    default: ModelAdapter
    default_spec: str | None = None
    factories: Mapping[str, Callable[[], Factory]] | None = None
    _adapters: dict[str, ModelAdapter] = attrs.field(factory=dict, init=False)

    def add(self, spec: str, adapter: ModelAdapter) -> None:
        """Serve ``spec`` with ``adapter``."""
        self._adapters[spec] = adapter

    def adapter_for(self, spec: str | None) -> ModelAdapter:
        """The adapter for ``spec``, resolving and keeping it on first use.

        Raises:
            ModelError: the spec does not resolve (see :func:`resolve_spec`).
        """
        if spec is None or spec == self.default_spec:
            return self.default
        adapter = self._adapters.get(spec)
        if adapter is None:
            if self.default_spec is None:
                return self.default
            adapter = self._adapters[spec] = resolve_spec(spec, factories=self.factories)
        return adapter

    def check(self, spec: str) -> None:
        """Resolve ``spec`` now, even on a host whose default was given as an object, and keep its adapter.

        Raises:
            ModelError: the spec does not resolve (see :func:`resolve_spec`).
        """
        if spec != self.default_spec and spec not in self._adapters:
            self._adapters[spec] = resolve_spec(spec, factories=self.factories)

    def window_for(self, spec: str | None) -> int | None:
        """The context window (tokens) the adapter serving ``spec`` reports, if it does.

        A spec that does not resolve reports none (its turn fails with the typed error).
        """
        try:
            return positive_tokens(getattr(self.adapter_for(spec), "context_window", None))
        except DshError:
            return None

    async def complete(self, request: ModelRequest) -> Mapping[str, Any]:
        """Answer with the agent's adapter.

        A reply that reports ``usage`` is labelled with its model (``KIND:MODEL``), so
        every recorded cost says what it was spent on; a reply without usage (the
        scripted model) stays as it is.
        """
        spec = request.agent.model
        reply = await self.adapter_for(spec).complete(request)
        label = spec or self.default_spec
        if label is not None and isinstance(reply, Mapping) and reply.get("usage") and "model" not in reply:
            reply = {**reply, "model": spec_label(label)}
        return reply

    async def close(self) -> None:
        """Close every adapter that has ``aclose`` (HTTP connection pools); failures are logged."""
        for adapter in (self.default, *self._adapters.values()):
            closer = getattr(adapter, "aclose", None)
            if closer is None:
                continue
            try:
                result = closer()
                if inspect.isawaitable(result):
                    await result
            except (DshError, OSError, RuntimeError) as exc:
                log.warning("model.close_failed", error=str(exc))
