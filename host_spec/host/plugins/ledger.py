"""A loaded plugin's context: its config, the host, and its ownership ledger.

Everything a plugin registers beyond its module (per-host hook objects, tools,
prompt sections, services, background tasks) goes through its context, which
keeps the disposers in a LIFO ledger. Unload and reload dispose exactly that
ledger, so a plugin removes what it added and nothing else: registrations made
beside the plugin manager would leak on reload unless an owner tracks them.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import attrs
import structlog

from host_spec.errors import PluginError
from host_spec.records import Handle

from host_spec.host.plugins.services import ServiceRegistry

if TYPE_CHECKING:
    from typing_extensions import TypeForm

    from host_spec.protocols import Host

__all__ = ["HookObjects", "PluginContext"]

log = structlog.get_logger(__name__)

S = TypeVar("S")


class HookObjects(Protocol):
    """Where a context registers its plugin's per-host hook objects (the plugin manager)."""

    def attach(self, owner: str, plugin: object, name: str) -> Handle:
        """Register ``plugin`` under ``name`` for plugin ``owner``; the handle unregisters it."""
        ...


@attrs.define(eq=False)
class PluginContext:
    """What one loaded plugin gets: config, host, ownership ledger (implements the protocol).

    The ledger is disposed LIFO on unload or reload; supervised tasks are cancelled
    first. A context is single-use: after :meth:`close` it refuses new registrations,
    so a late registration from a stale plugin version cannot leak.
    """

    name: str
    config: Mapping[str, Any]
    host: Host
    _services: ServiceRegistry
    _hooks: HookObjects
    _ledger: list[Handle] = attrs.Factory(list)
    _tasks: set[asyncio.Future[Any]] = attrs.Factory(set)
    closed: bool = False

    def own(self, handle: Handle) -> Handle:
        """Put ``handle`` in the ledger (disposed in reverse order on unload)."""
        if self.closed:
            handle.dispose()
            raise PluginError(f'plugin "{self.name}" is unloaded; registration refused')
        self._ledger.append(handle)
        return handle

    def spawn(self, coro: Awaitable[Any], *, name: str = "") -> asyncio.Future[Any]:
        """Run ``coro`` as a supervised task: failures are logged, unload cancels it."""
        if self.closed:
            if inspect.iscoroutine(coro):
                coro.close()
            raise PluginError(f'plugin "{self.name}" is unloaded; task refused')
        task = asyncio.ensure_future(coro)
        label = name or getattr(task, "get_name", lambda: "")()
        self._tasks.add(task)
        task.add_done_callback(lambda t: self._task_done(t, label))
        return task

    def _task_done(self, task: asyncio.Future[Any], label: str) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("plugin.task_failed", plugin=self.name, task=label, exc_info=task.exception())

    def register(self, plugin: object, *, name: str | None = None) -> Handle:
        """Register ``plugin``'s hooks for this host as ``<plugin name>/<name>`` until unload.

        Raises:
            PluginError: the context is closed, an impl is invalid, or the name is taken.
        """
        self._refuse_when_closed("hook object")
        label = f"{self.name}/{name or type(plugin).__name__}"
        return self.own(self._hooks.attach(self.name, plugin, label))

    def provide(self, api: TypeForm[S], service: S) -> Handle:
        """Publish ``service`` as ``api``'s implementation until unload.

        Raises:
            PluginError: the context is closed.
            RegistrationError: ``api`` is taken or ``service`` is not an ``api``.
        """
        self._refuse_when_closed("service")
        return self.own(self._services.provide(self.name, api, service))

    def _refuse_when_closed(self, what: str) -> None:
        if self.closed:
            raise PluginError(f'plugin "{self.name}" is unloaded; {what} refused')

    def close(self) -> list[asyncio.Future[Any]]:
        """Cancel tasks, dispose the ledger LIFO (each failure contained). Returns the tasks."""
        self.closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        while self._ledger:
            handle = self._ledger.pop()
            try:
                handle.dispose()
            except Exception:
                log.exception("plugin.dispose_failed", plugin=self.name, handle=handle.label)
        return tasks

    async def aclose(self) -> None:
        """:meth:`close`, then wait for the cancelled tasks to finish."""
        tasks = self.close()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


if TYPE_CHECKING:
    from host_spec import protocols

    def _implements_the_contract(ctx: PluginContext) -> protocols.PluginContext:
        """Never called: ``make check`` fails here if this class drifts from the protocol."""
        return ctx
