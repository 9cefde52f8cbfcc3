"""Finding plugins (entry points of group ``dsh``) and checking their hooks before use.

Validation runs on a pluggy manager with every spec of :mod:`host_spec.hookspecs`
(the host's own, or a scratch one during reload), so an invalid plugin is refused
before anything of it is called and the manager is left as it was.
"""

from __future__ import annotations

import inspect
from importlib.metadata import EntryPoint, entry_points

import pluggy

from host_spec import ENTRY_POINT_GROUP, PROJECT, hookspecs
from host_spec.errors import PluginError

__all__ = ["discover", "new_pluggy_manager", "validate_plugin"]

#: Hooks the host awaits; every other hook is called synchronously (an async impl would never run).
_ASYNC_HOOKS = frozenset(name for name, fn in vars(hookspecs).items() if inspect.iscoroutinefunction(fn))


def new_pluggy_manager() -> pluggy.PluginManager:
    """A pluggy manager for project ``dsh`` with every spec of :mod:`host_spec.hookspecs`."""
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    return pm


def discover() -> dict[str, EntryPoint]:
    """Entry points of group ``dsh`` by name.

    Raises:
        PluginError: two installed distributions declare one name with different targets.
    """
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        seen = found.setdefault(ep.name, ep)
        if seen.value != ep.value:
            raise PluginError(f'plugin name "{ep.name}" is declared twice ({seen.value}, {ep.value})')
    return found


def validate_plugin(pm: pluggy.PluginManager, plugin: object, name: str, *, hook_object: bool = False) -> None:
    """Register ``plugin`` on ``pm`` and check it; on failure leave ``pm`` unchanged.

    pluggy writes the name before validating the impls, so a failed ``register`` would
    leave the name taken; we unregister it explicitly.

    Args:
        hook_object: ``plugin`` is a per-host object a plugin registers from its
            ``dsh_plugin_loaded``, so it may not implement that hook itself.

    Raises:
        PluginError: an impl matches no spec or has arguments the spec lacks, uses a
            wrapper (dsh hooks are called per implementation, wrappers would not run),
            is ``async`` where the host calls the hook synchronously, or is a hook
            object's ``dsh_plugin_loaded`` (it would never be called).
    """
    try:
        pm.register(plugin, name=name)
        pm.check_pending()
        for caller in pm.get_hookcallers(plugin) or ():
            for impl in caller.get_hookimpls():
                if impl.plugin is not plugin:
                    continue
                if impl.wrapper or impl.hookwrapper:
                    raise PluginError(f'plugin "{name}": hook wrappers are not supported ({caller.name})')
                if caller.name not in _ASYNC_HOOKS and inspect.iscoroutinefunction(impl.function):
                    raise PluginError(f'plugin "{name}": {caller.name} must not be async (it is called synchronously)')
                if hook_object and caller.name == "dsh_plugin_loaded":
                    raise PluginError(f'hook object "{name}": dsh_plugin_loaded belongs to the plugin module')
    except Exception as exc:
        if pm.get_plugin(name) is plugin:
            pm.unregister(name=name)
        if isinstance(exc, PluginError):
            raise
        raise PluginError(f'plugin "{name}" is invalid: {exc}') from exc
