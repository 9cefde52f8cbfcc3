"""Agent scopes: a LIFO ledger of disposers that lives exactly as long as its owner.

Everything registered for one agent (tools, prompt sections, listeners) is put in
that agent's scope, so disposing the agent unwinds exactly what was installed for
it, newest first, and nothing a plugin registered globally.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import structlog

from host_spec.errors import DshError
from host_spec.records import Handle

__all__ = ["Scope", "ScopeDisposedError"]

log = structlog.get_logger(__name__)

#: Disposed handles are pruned from the ledger once it grows past this many entries
#: (then past twice the live count), so long-lived scopes with churn stay small.
_COMPACT_FLOOR = 64


class ScopeDisposedError(DshError):
    """A registration was attempted into a scope that is already disposed."""

    code = "SCOPE_DISPOSED"


@attrs.define(eq=False)
class Scope:
    """A LIFO ledger of :class:`Handle` objects (implements ``protocols.Scope``).

    Scopes compare by identity: registries file their per-scope layers under the
    scope object itself.

    Attributes:
        label: Shown in logs and errors (``agent:<id>``).
    """

    label: str = ""
    _handles: list[Handle] = attrs.field(factory=list, init=False)
    _disposed: bool = attrs.field(default=False, init=False)
    _compact_at: int = attrs.field(default=_COMPACT_FLOOR, init=False)

    @property
    def disposed(self) -> bool:
        return self._disposed

    def add(self, handle: Handle) -> Handle:
        """Track ``handle`` so it is disposed with the scope (in reverse order).

        Raises:
            ScopeDisposedError: the scope is gone; ``handle`` is disposed at once so
                the registration cannot outlive its owner.
        """
        if self._disposed:
            handle.dispose()
            raise ScopeDisposedError(f"scope {self.label!r} is disposed", scope=self.label)
        self._handles.append(handle)
        if len(self._handles) >= self._compact_at:
            # Amortised O(1): handles disposed early (plugin reload) are dropped here.
            self._handles = [h for h in self._handles if not h.disposed]
            self._compact_at = max(_COMPACT_FLOOR, 2 * len(self._handles))
        return handle

    def on_dispose(self, fn: Callable[[], None], label: str = "") -> Handle:
        """Register a plain callback as a handle of this scope."""
        return self.add(Handle(fn, label))

    def dispose(self) -> None:
        """Dispose every handle, newest first. Idempotent; one failing disposer is logged, not fatal."""
        if self._disposed:
            return
        self._disposed = True
        handles, self._handles = self._handles, []
        for handle in reversed(handles):
            try:
                handle.dispose()
            except Exception:  # contained: the rest of the ledger must still unwind
                log.exception("scope disposer failed", scope=self.label, handle=handle.label)

    def live_count(self) -> int:
        """Number of live (not yet disposed) handles in the ledger (for tests and diagnostics)."""
        return sum(1 for h in self._handles if not h.disposed)
