"""In-process hot reload of one plugin.

The shape is "build the new version, validate it, swap, keep the old on failure":

1. Pop every ``sys.modules`` entry under the plugin's package prefix (kept aside),
   invalidate import caches and import the entry module again: a fresh, consistent
   module graph, never a half-reloaded one (``importlib.reload`` keeps module
   identity and stale ``from x import y`` bindings).
2. Validate the new object on a scratch pluggy manager with the same specs
   (``check_pending``), before the old version is touched.
3. Tear the old version down exactly as an unload does: teardown (awaited), unload,
   ledger disposed LIFO, tasks cancelled, unregistered.
4. Register the new object under the same name and load slot, and call its
   ``dsh_plugin_loaded`` with a fresh context; the plugin re-installs itself into live
   agents (``dsh_agent_created`` is not replayed).
5. Any failure restores the old modules and, if the old version was already torn
   down, re-registers the old plugin object with a fresh context.

Live agents keep running throughout: the host never disposes an agent, a session or
an agent-scope registration the plugin's ledger does not own.

Limits: modules *outside* the prefix keep their references to the old objects (a
plugin that imports another plugin's package keeps the old classes until that one
reloads too); durable data is keyed by type strings, so logs need nothing.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import structlog

from host_spec.errors import PluginError

from host_spec.host.plugins.discovery import new_pluggy_manager, validate_plugin

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["Reloaded", "PluginSlots", "reload_plugin", "package_prefix"]


class Reloaded(Protocol):
    """What reload needs to know of a loaded plugin (the manager's ``LoadedPlugin``)."""

    @property
    def plugin(self) -> object: ...

    @property
    def config(self) -> Mapping[str, Any]: ...

    @property
    def module(self) -> str | None: ...

    @property
    def attr(self) -> str | None: ...


L = TypeVar("L", bound=Reloaded, covariant=True)


class PluginSlots(Protocol[L]):
    """The part of the plugin manager a reload drives: find, unload and load a plugin by name.

    A Protocol, so this module does not import the manager that calls it.
    """

    def get(self, name: str) -> L | None: ...

    async def unload(self, name: str) -> int: ...

    def load(
        self,
        name: str,
        config: Mapping[str, Any] | None = None,
        *,
        plugin: object | None = None,
        module: str | None = None,
        attr: str | None = None,
        position: int | None = None,
    ) -> L: ...


log = structlog.get_logger(__name__)

#: Packages never re-imported wholesale: the contract and the reference host.
_SHARED_ROOTS = ("host_spec",)


def package_prefix(module: str) -> str:
    """The module namespace re-imported when the plugin at ``module`` reloads.

    A plugin distribution's whole top-level package, so an edit to any of its modules
    is picked up; but only the module itself for plugins that live inside the shared
    ``host_spec`` package (the base plugins), which must never be re-imported.
    """
    root = module.partition(".")[0]
    return module if root in _SHARED_ROOTS else root


def in_namespace(name: str, prefix: str) -> bool:
    """Whether module ``name`` is ``prefix`` or lies inside it (what a reload of ``prefix`` re-imports)."""
    return name == prefix or name.startswith(prefix + ".")


def _pop_modules(prefix: str) -> dict[str, ModuleType]:
    saved = {name: mod for name, mod in sys.modules.items() if in_namespace(name, prefix)}
    for name in saved:
        del sys.modules[name]
    return saved


def _restore_modules(prefix: str, saved: dict[str, ModuleType]) -> None:
    """Put the old module graph back (and the parent packages' attributes pointing at it)."""
    for name in [name for name in sys.modules if in_namespace(name, prefix)]:
        del sys.modules[name]
    sys.modules.update(saved)
    for name, module in saved.items():
        parent, _, child = name.rpartition(".")
        if parent in sys.modules:
            setattr(sys.modules[parent], child, module)


def _import(module: str, attr: str | None) -> object:
    importlib.invalidate_caches()
    obj: object = importlib.import_module(module)
    if attr:
        for part in attr.split("."):
            obj = getattr(obj, part)
    return obj


async def reload_plugin(manager: PluginSlots[L], name: str, *, prefix: str | None = None) -> L:
    """Replace loaded plugin ``name`` by a freshly imported version, or keep the old one.

    Args:
        manager: The host's plugin manager.
        name: The loaded plugin's entry name.
        prefix: Module namespace to re-import (default: :func:`package_prefix`).

    Returns:
        The newly loaded plugin.

    Raises:
        PluginError: not loaded, not reloadable (registered as an object, not a module
            path), or the new version failed to import, validate or load; the previous
            version is then loaded again and its modules are back in ``sys.modules``.
    """
    old = manager.get(name)
    if old is None:
        raise PluginError(f'plugin "{name}" is not loaded')
    if old.module is None:
        raise PluginError(f'plugin "{name}" was registered as an object and cannot be reloaded')
    prefix = prefix or package_prefix(old.module)
    saved = _pop_modules(prefix)
    try:
        plugin = _import(old.module, old.attr)
        validate_plugin(new_pluggy_manager(), plugin, name)
    except Exception as exc:
        _restore_modules(prefix, saved)
        log.warning("plugin.reload_rejected", plugin=name, error=str(exc))
        raise PluginError(f'reload of plugin "{name}" failed, the loaded version is kept: {exc}') from exc

    position = await manager.unload(name)
    try:
        loaded = manager.load(
            name, old.config, plugin=plugin, module=old.module, attr=old.attr, position=position
        )
    except Exception as exc:
        _restore_modules(prefix, saved)
        log.warning("plugin.reload_failed", plugin=name, error=str(exc))
        try:
            manager.load(name, old.config, plugin=old.plugin, module=old.module, attr=old.attr, position=position)
        except Exception as again:
            raise PluginError(
                f'reload of plugin "{name}" failed ({exc}) and the previous version did not load again: {again}'
            ) from again
        raise PluginError(f'reload of plugin "{name}" failed, the previous version was restored: {exc}') from exc
    log.info("plugin.reloaded", plugin=name)
    return loaded
