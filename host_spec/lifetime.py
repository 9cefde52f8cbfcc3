"""How long things last: disposable registrations, abort signals and why a turn was cancelled.

Plain values of the contract that need no live object, so every other contract
module (the live Protocols included) can stand on them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import attrs

__all__ = ["Handle", "AbortSignal", "CancelCause"]


@attrs.define(eq=False)
class Handle:
    """A disposable registration. ``dispose()`` is idempotent.

    Everything a plugin registers (tools, prompt sections, providers, tasks) returns a
    ``Handle``; the host keeps the handles in the plugin's ownership ledger and in
    the scope they were registered into, and disposes them LIFO.
    """

    _dispose: Callable[[], None] | None
    label: str = ""

    @property
    def disposed(self) -> bool:
        return self._dispose is None

    def dispose(self) -> None:
        fn, self._dispose = self._dispose, None
        if fn is not None:
            fn()


@attrs.define(eq=False)
class AbortSignal:
    """A one-shot cancellation signal with a reason (first abort wins).

    asyncio task cancellation carries no reason; the Team service needs to tell a
    user interrupt from service disposal, so cancellation is modelled explicitly.
    """

    _reason: Any = None
    _aborted: bool = False
    _callbacks: list[Callable[[Any], None]] = attrs.Factory(list)
    _event: asyncio.Event | None = None

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def reason(self) -> Any:
        return self._reason

    def abort(self, reason: Any = "aborted") -> None:
        if self._aborted:
            return
        self._aborted, self._reason = True, reason
        callbacks, self._callbacks = self._callbacks, []
        if self._event is not None:
            self._event.set()
        for callback in callbacks:
            callback(reason)

    def on_abort(self, callback: Callable[[Any], None]) -> Callable[[], None]:
        """Call ``callback(reason)`` once on abort (now if already aborted). Returns a remover."""
        if self._aborted:
            callback(self._reason)
            return lambda: None
        self._callbacks.append(callback)

        def remove() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return remove

    async def wait(self) -> Any:
        """Wait until aborted; returns the reason."""
        if not self._aborted:
            if self._event is None:
                self._event = asyncio.Event()
            await self._event.wait()
        return self._reason

    @classmethod
    def any(cls, *signals: AbortSignal | None) -> AbortSignal:
        """A signal that aborts when any of ``signals`` aborts, with that reason."""
        combined = cls()
        for signal in signals:
            if signal is not None:
                signal.on_abort(combined.abort)
        return combined


@attrs.frozen
class CancelCause:
    """Why an agent's turn was cancelled: ``user``, ``parent``, ``hook`` or ``disposed``."""

    kind: str
    detail: str | None = None
