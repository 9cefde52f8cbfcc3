"""Plugin loading and hook calling for the reference host (a thin layer over pluggy).

:class:`PluginManager` is what the host holds: it loads plugins by name (the
loading, hook objects, unload and reload of
:class:`~host_spec.host.plugins.loading.PluginLoading`) and calls their hooks.

Hook calling follows :mod:`host_spec.hookspecs`:

* observer hooks (:meth:`PluginManager.notify`) call each implementation on its own
  and contain its failure (logged), so one broken plugin cannot stop another;
* veto hooks (:meth:`PluginManager.veto`) let the exception reach the caller;
* ``dsh_pre_append`` (:meth:`PluginManager.pre_append`) collects every violation and
  raises one ``InvariantError`` naming the first vetoing plugin;
* lifecycle hooks (:meth:`PluginManager.call_for`) reach one plugin (and its hook
  objects) only; a hook object's implementations count as its owner's.

Implementations are called directly from a per-hook cache of ``(plugin, function,
argnames)``: observers run on every append, so the hot path never rebuilds anything.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import attrs
import pluggy
import structlog

from host_spec.errors import InvariantError

from host_spec.host.plugins.discovery import new_pluggy_manager
from host_spec.host.plugins.loading import LoadedPlugin, PluginLoading
from host_spec.host.plugins.services import ServiceRegistry

__all__ = ["PluginManager"]

log = structlog.get_logger(__name__)

#: ``dsh_pre_append`` signatures called positionally: a module's full one, a hook object's.
_PRE_APPEND_ARGS = ("host", "session", "event")
_PRE_APPEND_OBJECT_ARGS = ("session", "event")


@attrs.frozen
class _Impl:
    plugin_name: str
    function: Callable[..., Any]
    argnames: tuple[str, ...]


@attrs.define(eq=False)
class PluginManager(PluginLoading):
    """Loads plugins by name, owns their contexts, and calls hooks for the host.

    Attributes:
        host: Passed to every hook as ``host`` (set by the host after construction).
        pm: The underlying pluggy manager; register plugins only through this class,
            which keeps the per-hook call cache in step.
        services: Services provided by plugins (``ctx.provide``), read by ``host.service``.
    """

    host: Any = None
    pm: pluggy.PluginManager = attrs.Factory(new_pluggy_manager)
    services: ServiceRegistry = attrs.Factory(ServiceRegistry)
    _loaded: dict[str, LoadedPlugin] = attrs.Factory(dict)
    _owners: dict[str, str] = attrs.Factory(dict)
    _impls: dict[str, tuple[_Impl, ...]] = attrs.Factory(dict)

    # ------------------------------------------------------------ hook calling

    def impls(self, hook: str) -> tuple[_Impl, ...]:
        """Implementations of ``hook`` in pluggy call order (cached until (un)registration)."""
        cached = self._impls.get(hook)
        if cached is None:
            caller = getattr(self.pm.hook, hook)
            owners = self._owners
            cached = tuple(
                _Impl(owners.get(impl.plugin_name, impl.plugin_name), impl.function, tuple(impl.argnames))
                for impl in reversed(caller.get_hookimpls())
            )
            self._impls[hook] = cached
        return cached

    def notify(self, hook: str, **kwargs: Any) -> None:
        """Call an observer hook; each implementation's exception is logged and contained."""
        for impl in self.impls(hook):
            try:
                impl.function(**{arg: kwargs[arg] for arg in impl.argnames})
            except Exception:
                log.exception("plugin.hook_failed", hook=hook, plugin=impl.plugin_name)

    def collect(self, hook: str, **kwargs: Any) -> list[Any]:
        """Call an observer hook and gather the answers that are not ``None``, in call order.

        Each implementation's exception is logged and contained (its answer is left out).
        """
        answers = []
        for impl in self.impls(hook):
            try:
                answer = impl.function(**{arg: kwargs[arg] for arg in impl.argnames})
            except Exception:
                log.exception("plugin.hook_failed", hook=hook, plugin=impl.plugin_name)
                continue
            if answer is not None:
                answers.append(answer)
        return answers

    def notify_session(self, hook: str, session: Any, name: str, value: Any) -> None:
        """:meth:`notify` for the per-append session observers ``(host, session, <name>)``.

        Hot path (every append and every flush of every session): implementations
        taking ``(session, <name>)`` or ``(host, session, <name>)`` are called
        positionally, so no keyword dictionary is built per call.
        """
        impls = self._impls.get(hook)  # the cache of :meth:`impls`, read without its call
        if impls is None:
            impls = self.impls(hook)
        if not impls:
            return
        host = self.host
        for impl in impls:
            argnames = impl.argnames
            try:
                if len(argnames) == 2 and argnames[0] == "session" and argnames[1] == name:
                    impl.function(session, value)
                elif len(argnames) == 3 and argnames[0] == "host" and argnames[1] == "session" and argnames[2] == name:
                    impl.function(host, session, value)
                else:
                    kwargs = {"host": host, "session": session, name: value}
                    impl.function(**{arg: kwargs[arg] for arg in argnames})
            except Exception:
                log.exception("plugin.hook_failed", hook=hook, plugin=impl.plugin_name)

    def veto(self, hook: str, **kwargs: Any) -> None:
        """Call a veto hook; the first exception propagates (later impls do not run)."""
        for impl in self.impls(hook):
            impl.function(**{arg: kwargs[arg] for arg in impl.argnames})

    def pre_append(self, session: Any, event: Any) -> None:
        """Run every ``dsh_pre_append``; raise one ``InvariantError`` if any vetoed.

        Hot path (every append of every session): implementations that take exactly
        ``(host, session, event)`` are called positionally, and nothing is
        allocated unless one vetoes.

        Raises:
            InvariantError: naming the first vetoing plugin, with every reason.
        """
        impls = self._impls.get("dsh_pre_append")  # the cache of :meth:`impls`, read without its call
        if impls is None:
            impls = self.impls("dsh_pre_append")
        if not impls:
            return
        host = self.host
        vetoes: list[tuple[str, str]] | None = None
        for impl in impls:
            if impl.argnames == _PRE_APPEND_OBJECT_ARGS:
                violation = impl.function(session, event)
            elif impl.argnames == _PRE_APPEND_ARGS:
                violation = impl.function(host, session, event)
            else:
                kwargs = {"host": host, "session": session, "event": event}
                violation = impl.function(**{arg: kwargs[arg] for arg in impl.argnames})
            if violation is not None:
                if vetoes is None:
                    vetoes = []
                vetoes.append((impl.plugin_name, getattr(violation, "reason", str(violation))))
        if vetoes:
            raise InvariantError(vetoes[0][0], vetoes[0][1], reasons=[reason for _, reason in vetoes])

    def call_for(self, name: str, hook: str, **kwargs: Any) -> list[Any]:
        """Call ``hook`` on plugin ``name`` (and its hook objects) only; exceptions propagate."""
        return [
            impl.function(**{arg: kwargs[arg] for arg in impl.argnames})
            for impl in self.impls(hook)
            if impl.plugin_name == name
        ]

    async def acall_for(self, name: str, hook: str, **kwargs: Any) -> list[Any]:
        """:meth:`call_for`, awaiting results that are awaitable (async hooks)."""
        results = []
        for impl in self.impls(hook):
            if impl.plugin_name == name:
                result = impl.function(**{arg: kwargs[arg] for arg in impl.argnames})
                results.append(await result if inspect.isawaitable(result) else result)
        return results
