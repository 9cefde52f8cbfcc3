"""A loaded plugin's context: its config, the host, and its ownership ledger.

Everything a plugin registers outside pluggy (tools, prompt sections, services,
background tasks) goes through its context, which keeps the disposers in a LIFO
ledger. Unload and reload dispose exactly that ledger, so a plugin removes what it
added and nothing else (the hermes-agent lesson: registrations made beside the
plugin manager leak on reload unless an owner tracks them).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Mapping
from typing import Any

import attrs
import structlog

from host_spec.errors import PluginError, RegistrationError
from host_spec.records import Handle

__all__ = ["PluginContext"]

log = structlog.get_logger(__name__)


@attrs.define(eq=False)
class PluginContext:
    """What one loaded plugin gets: config, host, ownership ledger (implements the protocol).

    The ledger is disposed LIFO on unload or reload; supervised tasks are cancelled
    first. A context is single-use: after :meth:`close` it refuses new registrations,
    so a late registration from a stale plugin version cannot leak.
    """

    name: str
    config: Mapping[str, Any]
    host: Any
    _services: dict[str, Any]
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

    def provide(self, key: str, service: Any) -> Handle:
        """Publish ``service`` under ``key`` until unload.

        Raises:
            RegistrationError: another plugin already provides ``key``.
        """
        if key in self._services:
            raise RegistrationError(f'service "{key}" is already provided')
        self._services[key] = service

        def remove() -> None:
            if self._services.get(key) is service:
                del self._services[key]

        return self.own(Handle(remove, label=f"service:{key}"))

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
