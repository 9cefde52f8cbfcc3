"""Plugin loading and hook calling for the reference host (a thin layer over pluggy).

Plugins are discovered through entry points of group ``dsh`` but only the names a
profile lists are registered, always under their entry name (pluggy's canonical
names are unstable for instances). Each loaded plugin gets a :class:`PluginContext`:
its config table, the host, and an ownership ledger. Everything the plugin
registers beyond its module (tools, prompt sections, services, tasks) is owned by
that ledger, so unload and reload remove exactly what the plugin added and nothing
else.

A plugin keeps its per-host state in *hook objects* it registers through
``ctx.register`` (pytest registers its stateful plugins the same way). Each is a
pluggy plugin of its own, named ``<plugin>/<object>``, but owned by the plugin that
registered it: a veto names the owner, the owner's lifecycle hooks reach it, and
the owner's ledger unregisters it.

Hook calling follows :mod:`host_spec.hookspecs`:

* observer hooks (:meth:`PluginManager.notify`) call each implementation on its own
  and contain its failure (logged), so one broken plugin cannot stop another;
* veto hooks (:meth:`PluginManager.veto`) let the exception reach the caller;
* ``dsh_pre_append`` (:meth:`PluginManager.pre_append`) collects every violation and
  raises one ``InvariantError`` naming the first vetoing plugin;
* lifecycle hooks (:meth:`PluginManager.call_for`) reach one plugin (and its hook
  objects) only.

Implementations are called directly from a per-hook cache of ``(plugin, function,
argnames)``: observers run on every append, so the hot path never rebuilds anything.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from importlib.metadata import EntryPoint
from types import MappingProxyType, ModuleType
from typing import Any

import attrs
import pluggy
import structlog

from host_spec import ENTRY_POINT_GROUP
from host_spec.errors import DshError, InvariantError, PluginError
from host_spec.records import Handle

from host_spec.host.plugins.discovery import discover, new_pluggy_manager, validate_plugin
from host_spec.host.plugins.ledger import PluginContext
from host_spec.host.plugins.services import ServiceRegistry

__all__ = ["LoadedPlugin", "PluginManager"]

log = structlog.get_logger(__name__)

_EMPTY: Mapping[str, Any] = MappingProxyType({})

@attrs.define(eq=False)
class LoadedPlugin:
    """A registered plugin: the object, its context, and where to re-import it from."""

    name: str
    plugin: object
    ctx: PluginContext
    config: Mapping[str, Any]
    module: str | None = None
    attr: str | None = None


#: ``dsh_pre_append`` signatures called positionally: a module's full one, a hook object's.
_PRE_APPEND_ARGS = ("host", "session", "event")
_PRE_APPEND_OBJECT_ARGS = ("session", "event")


@attrs.frozen
class _Impl:
    plugin_name: str
    function: Callable[..., Any]
    argnames: tuple[str, ...]


def _origin(plugin: object, ep: EntryPoint | None) -> tuple[str | None, str | None]:
    if ep is not None:
        return ep.module, ep.attr
    if isinstance(plugin, ModuleType):
        return plugin.__name__, None
    return None, None


@attrs.define(eq=False)
class PluginManager:
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

    # ------------------------------------------------------------ loading

    def names(self) -> list[str]:
        """Loaded plugin names in load order."""
        return list(self._loaded)

    def get(self, name: str) -> LoadedPlugin | None:
        return self._loaded.get(name)

    def load(
        self,
        name: str,
        config: Mapping[str, Any] | None = None,
        *,
        plugin: object | None = None,
        module: str | None = None,
        attr: str | None = None,
        position: int | None = None,
    ) -> LoadedPlugin:
        """Register one plugin under ``name`` and call its ``dsh_plugin_loaded``.

        Args:
            name: Entry-point name (also the pluggy registration name).
            config: The plugin's raw config table.
            plugin: Register this object instead of loading the entry point (tests, reload).
            module, attr: Where ``plugin`` is imported from (used by reload).
            position: Load-order slot to occupy (reload keeps the old slot).

        Raises:
            PluginError: unknown name, already loaded, import failure, invalid hooks, or a
                non-``DshError`` failure in ``dsh_plugin_loaded``.
            DshError: a ``dsh_plugin_loaded`` failure with its own code (``ConfigError`` ...).
            In every case nothing of the plugin stays registered.
        """
        if name in self._loaded:
            raise PluginError(f'plugin "{name}" is already loaded')
        ep = None
        if plugin is None:
            ep = discover().get(name)
            if ep is None:
                raise PluginError(f'unknown plugin "{name}" (no entry point "{name}" in group "{ENTRY_POINT_GROUP}")')
            try:
                plugin = ep.load()
            except Exception as exc:
                raise PluginError(f'plugin "{name}" failed to import: {type(exc).__name__}: {exc}') from exc
        if module is None:
            module, attr = _origin(plugin, ep)
        validate_plugin(self.pm, plugin, name)
        frozen = MappingProxyType(dict(config or _EMPTY))
        ctx = PluginContext(name, frozen, self.host, self.services, self)
        loaded = LoadedPlugin(name, plugin, ctx, frozen, module, attr)
        self._insert(loaded, position)
        try:
            self.call_for(name, "dsh_plugin_loaded", host=self.host, ctx=ctx)
        except Exception as exc:
            ctx.close()
            self._remove(name)
            if isinstance(exc, DshError):
                raise
            raise PluginError(f'plugin "{name}" failed to load: {type(exc).__name__}: {exc}') from exc
        log.info("plugin.loaded", plugin=name)
        return loaded

    def _insert(self, loaded: LoadedPlugin, position: int | None) -> None:
        items = list(self._loaded.items())
        index = len(items) if position is None else position
        items.insert(index, (loaded.name, loaded))
        self._loaded = dict(items)
        self._impls.clear()

    def _remove(self, name: str) -> None:
        self._loaded.pop(name, None)
        self.pm.unregister(name=name)
        self._impls.clear()

    def hook_objects(self, owner: str) -> list[object]:
        """The hook objects plugin ``owner`` registered with ``ctx.register``, oldest first."""
        return [self.pm.get_plugin(name) for name, who in self._owners.items() if who == owner]

    def attach(self, owner: str, plugin: object, name: str) -> Handle:
        """Register hook object ``plugin`` as ``name``, owned by loaded plugin ``owner``.

        Returns:
            The handle that unregisters it (the owner's ledger keeps it).

        Raises:
            PluginError: invalid hooks (see :func:`validate_plugin`) or ``name`` is taken.
        """
        if self.pm.has_plugin(name):
            raise PluginError(f'hook object "{name}" is already registered')
        validate_plugin(self.pm, plugin, name, hook_object=True)
        self._owners[name] = owner
        self._impls.clear()

        def detach() -> None:
            self.pm.unregister(name=name)
            del self._owners[name]
            self._impls.clear()

        return Handle(detach, label=f"hooks:{name}")

    async def unload(self, name: str) -> int:
        """Tear one plugin down: teardown (awaited), unload, ledger LIFO, unregister.

        Failures of the plugin's own hooks are logged; the unload always completes.

        Returns:
            The plugin's former load-order position (reload reuses it).

        Raises:
            PluginError: ``name`` is not loaded.
        """
        loaded = self._loaded.get(name)
        if loaded is None:
            raise PluginError(f'plugin "{name}" is not loaded')
        position = list(self._loaded).index(name)
        for hook in ("dsh_plugin_teardown", "dsh_plugin_unload"):
            try:
                await self.acall_for(name, hook, host=self.host, ctx=loaded.ctx)
            except Exception:
                log.exception("plugin.unload_hook_failed", plugin=name, hook=hook)
        await loaded.ctx.aclose()
        self._remove(name)
        log.info("plugin.unloaded", plugin=name)
        return position

    async def unload_all(self) -> None:
        """Unload every plugin, last loaded first."""
        for name in reversed(list(self._loaded)):
            await self.unload(name)

    async def reload(self, name: str, *, prefix: str | None = None) -> LoadedPlugin:
        """Hot-reload one plugin in process (see :mod:`host_spec.host.plugins.reload`).

        Args:
            prefix: Module namespace to re-import instead of the plugin's whole package
                (watch mode narrows it for a plugin that lives inside another's package).
        """
        from host_spec.host.plugins.reload import reload_plugin

        return await reload_plugin(self, name, prefix=prefix)

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
