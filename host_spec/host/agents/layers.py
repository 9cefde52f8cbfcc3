"""Named registrations in a global layer plus one lazy layer per scope.

Tools and prompt sections are layered the same way: a plugin can give one agent
its own version of a global entry (Team members get the Team ``send_message``)
without touching anyone else. A scope entry shadows a same-named global entry for
that scope only; a duplicate within one layer is an error; a scope layer is
reclaimed when its last entry goes, so disposed agents leave nothing behind.

A reader may pass ``usable``: an entry it would not offer (a tool hidden at this
step) then shadows nothing, so the global entry of that name shows through. A
hidden Team ``send_message`` must leave the legacy global one usable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from host_spec.errors import RegistrationError
from host_spec.records import Handle

from host_spec.host.agents.scope import ScopeDisposedError

if TYPE_CHECKING:
    from host_spec.protocols import Scope

__all__ = ["Layers"]

E = TypeVar("E")


class Layers(Generic[E]):
    """The layered store behind :class:`~.tools.ToolRegistry` and :class:`~.prompt.PromptRegistry`.

    Args:
        kind: What an entry is, for messages and handle labels (``"tool"``).
        detail: The keyword naming the entry in error details (``"tool"``, ``"section"``).
    """

    def __init__(self, kind: str, detail: str) -> None:
        self._kind = kind
        self._detail = detail
        self._global: dict[str, E] = {}
        self._scoped: dict[Scope, dict[str, E]] = {}

    def add(self, name: str, entry: E, scope: Scope | None) -> Handle:
        """File ``entry`` under ``name`` globally or in ``scope``; the handle also joins the scope.

        Raises:
            RegistrationError: ``name`` already exists in that same layer.
            ScopeDisposedError: ``scope`` is already disposed.
        """
        layer = self._global if scope is None else self._scoped.get(scope, {})
        if name in layer:
            where = "globally" if scope is None else f"in scope {getattr(scope, 'label', '')!r}"
            raise RegistrationError(f'{self._kind} "{name}" is already registered {where}', **{self._detail: name})
        if scope is not None and scope.disposed:
            raise ScopeDisposedError(f'cannot register {self._kind} "{name}": scope is disposed', **{self._detail: name})
        layer[name] = entry
        if scope is not None:
            self._scoped[scope] = layer

        def remove() -> None:
            layer.pop(name, None)  # a handle runs this once; the name may be reused after
            if scope is not None and not layer and self._scoped.get(scope) is layer:
                del self._scoped[scope]

        handle = Handle(remove, f"{self._kind}:{name}")
        if scope is not None:
            scope.add(handle)
        return handle

    def lookup(self, scope: Scope | None, name: str, usable: Callable[[E], bool] | None = None) -> E | None:
        """The usable entry ``name`` as seen from ``scope`` (scope layer first, then global).

        ``usable`` (default: every entry) filters both layers; an unusable scope entry
        does not hide the global one.
        """
        if scope is not None:
            entry = self._scoped.get(scope, {}).get(name)
            if entry is not None and (usable is None or usable(entry)):
                return entry
        entry = self._global.get(name)
        return entry if entry is not None and (usable is None or usable(entry)) else None

    def merged(self, scope: Scope | None, usable: Callable[[E], bool] | None = None) -> dict[str, E]:
        """Every usable entry visible from ``scope``, usable scope entries shadowing global ones."""
        merged = {name: entry for name, entry in self._global.items() if usable is None or usable(entry)}
        if scope is not None:
            layer = self._scoped.get(scope, {})
            merged.update((name, entry) for name, entry in layer.items() if usable is None or usable(entry))
        return merged

    def scoped_count(self) -> int:
        """How many scopes currently hold a layer (for leak tests)."""
        return len(self._scoped)
