"""Plugin loading: register a plugin by name, attach its hook objects, unload and reload it.

Plugins are discovered through entry points of group ``dsh`` but only the names a
profile lists are registered, always under their entry name (pluggy's canonical
names are unstable for instances). Each loaded plugin gets a :class:`PluginContext`:
its config table, the host, and an ownership ledger. Everything the plugin
registers beyond its module (tools, prompt sections, services, tasks) is owned by
that ledger, so unload and reload remove exactly what the plugin added and nothing
else. A plugin that fails to import, to validate or to load leaves nothing
registered.

A plugin keeps its per-host state in *hook objects* it registers through
``ctx.register`` (pytest registers its stateful plugins the same way). Each is a
pluggy plugin of its own, named ``<plugin>/<object>``, but owned by the plugin that
registered it: a veto names the owner, the owner's lifecycle hooks reach it, and
the owner's ledger unregisters it.

Every (un)registration empties the manager's per-hook call cache, so the next hook
call sees exactly the registered implementations. :class:`PluginLoading` is a part
of :class:`host_spec.host.plugins.manager.PluginManager`: it holds no state of its
own and works on the manager's pluggy layer, plugins and cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import EntryPoint
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Any

import attrs
import pluggy
import structlog

from host_spec import ENTRY_POINT_GROUP
from host_spec.errors import DshError, PluginError
from host_spec.records import Handle

from host_spec.host.plugins.discovery import discover, validate_plugin
from host_spec.host.plugins.ledger import PluginContext

if TYPE_CHECKING:
    from host_spec.host.plugins.services import ServiceRegistry

__all__ = ["LoadedPlugin", "PluginLoading"]

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


def _origin(plugin: object, ep: EntryPoint | None) -> tuple[str | None, str | None]:
    if ep is not None:
        return ep.module, ep.attr
    if isinstance(plugin, ModuleType):
        return plugin.__name__, None
    return None, None


class PluginLoading:
    """Loading, hook objects, unloading and reload of the manager's plugins (a part of ``PluginManager``).

    Attributes:
        host: Handed to every plugin's context and lifecycle hooks (set by the host).
        pm: The pluggy manager plugins and hook objects are registered with.
        services: Where a loaded plugin's context publishes its services.
    """

    __slots__ = ()

    host: Any
    pm: pluggy.PluginManager
    services: ServiceRegistry
    _loaded: dict[str, LoadedPlugin]
    _owners: dict[str, str]
    _impls: dict[str, Any]

    if TYPE_CHECKING:

        def call_for(self, name: str, hook: str, **kwargs: Any) -> list[Any]: ...

        async def acall_for(self, name: str, hook: str, **kwargs: Any) -> list[Any]: ...

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
            DshError: a ``DshError`` raised while importing the plugin (``EXTRA_NOT_INSTALLED``)
                or by ``dsh_plugin_loaded``, with its own code (``ConfigError`` ...).
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
            except DshError:
                raise  # a typed refusal at import (a missing extra: EXTRA_NOT_INSTALLED) keeps its code
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
        self._loaded = dict(items)  # type: ignore[misc]  # the slot is the manager's own (attrs, slotted)
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
