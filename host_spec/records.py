"""Concrete records shared by hosts and plugins.

These are values, not services: a host and a plugin must agree on their exact
shape, so they live in the contract rather than behind a protocol.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from host_spec.protocols import Agent

__all__ = [
    "Violation",
    "Handle",
    "AbortSignal",
    "ToolSpec",
    "ToolCall",
    "PromptSection",
    "CancelCause",
]


@attrs.frozen
class Violation:
    """Returned by a ``dsh_pre_append`` implementation to veto an append.

    Attributes:
        reason: Why the event would break the stream; becomes the ``InvariantError`` text.
        rule: Short stable rule name (``"member-must-begin-provisioning"``) for tests and logs.
    """

    reason: str
    rule: str = "invariant"


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


@attrs.frozen
class ToolCall:
    """The execution context of one tool call (``exec`` in the original).

    Attributes:
        call_id: The model's tool-call id.
        name: Tool name.
        agent: The exact live calling agent; the authority credential for Team and subagents.
        signal: Aborted when the calling turn is cancelled.
    """

    call_id: str
    name: str
    agent: Agent | None
    signal: AbortSignal


@attrs.frozen
class ToolSpec:
    """A model tool: schema types, behaviour and rendering.

    Attributes:
        name: Unique name within a registry layer.
        description: What the model reads; keep it short and exact.
        args_type: msgspec Struct of the arguments (use ``forbid_unknown_fields=True``).
        result_type: msgspec type of the result; the host validates results against it.
        execute: ``async (args, call) -> result``. Raise a ``DshError`` to fail the call;
            it becomes an error result with that code, never a turn failure.
        available: Optional ``(agent) -> bool`` evaluated when a step is prepared; a
            tool that says ``False`` is neither offered to nor callable by that agent.
        concurrency_safe: Whether calls may run in parallel with others in one step.
        max_argument_bytes: Largest raw arguments (UTF-8 JSON) a call may carry; a larger
            call is refused (``ARGUMENTS_TOO_LARGE``) before its arguments are stored,
            and the log keeps only a short preview with the size. ``None``: the
            host's default bound.
    """

    name: str
    description: str
    args_type: type
    result_type: Any
    execute: Callable[[Any, ToolCall], Awaitable[Any]]
    available: Callable[[Agent], bool] | None = None
    concurrency_safe: bool = False
    max_argument_bytes: int | None = None


@attrs.frozen
class PromptSection:
    """A system-prompt section. Sections join in ascending ``order``; ties keep registration order.

    ``text`` may be a string or ``(agent) -> str``; an empty rendering is dropped.
    """

    name: str
    order: float
    text: str | Callable[[Agent], str]
