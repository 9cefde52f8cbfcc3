"""Continuable-child providers: what a new child inherits from its parent, by name.

A provider only *prepares* creation data (the inherited seed). It never sees the
child agent: identity, composition, creation, delivery, resume and disposal all
belong to the continuation manager, so a provider cannot give a child authority
its parent does not have, and a cold resume needs no provider at all.

Two providers ship with the host (registered by the manager itself, so the Team
plugins can use them even in a profile that disables the legacy tools):

* ``spawn`` -- a fresh child: no seed;
* ``fork`` -- the parent's raw events up to and including its last ``turn/end``
  (the completed-turn prefix), copied once. The in-flight turn is excluded, so a
  fork made from inside a tool call never sees the call that made it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import attrs
import structlog

from host_spec.errors import SubagentError
from host_spec.events import Event, EventType
from host_spec.records import Handle

if TYPE_CHECKING:
    from host_spec.protocols import Agent, ContinuableProvider

__all__ = ["SpawnProvider", "ForkProvider", "ProviderRegistry", "completed_prefix", "SPAWN", "FORK"]

log = structlog.get_logger(__name__)

SPAWN: Final = "spawn"
FORK: Final = "fork"


def completed_prefix(events: Sequence[Event]) -> Sequence[Event]:
    """``events[: index of the last turn/end + 1]``; empty when no turn has completed.

    Scans backwards, so the cost is the length of the open turn, not of the log.
    """
    for index in range(len(events) - 1, -1, -1):
        if events[index].type == EventType.TURN_END:
            return events[: index + 1]
    return ()


@attrs.frozen
class SpawnProvider:
    """The fresh provider: the child starts with an empty history."""

    name: str = SPAWN

    def prepare(self, parent: Agent) -> Sequence[Event]:
        return ()


@attrs.frozen
class ForkProvider:
    """The fork provider: the child inherits the parent's completed-turn prefix."""

    name: str = FORK

    def prepare(self, parent: Agent) -> Sequence[Event]:
        return completed_prefix(parent.session.events)


@attrs.define(eq=False)
class ProviderRegistry:
    """Providers by name; each registration returns a handle that removes exactly it."""

    _providers: dict[str, ContinuableProvider] = attrs.field(factory=dict, init=False)

    def register(self, provider: ContinuableProvider) -> Handle:
        """Add ``provider`` under ``provider.name``.

        Raises:
            SubagentError: ``DUPLICATE_PROVIDER`` when the name is taken, or
                ``INVALID_ARGUMENT`` for a blank name.
        """
        name = getattr(provider, "name", None)
        if not isinstance(name, str) or not name.strip():
            raise SubagentError("a provider needs a non-empty name", code="INVALID_ARGUMENT")
        if name in self._providers:
            raise SubagentError(
                f'subagent provider "{name}" is already registered', code="DUPLICATE_PROVIDER", provider=name
            )
        self._providers[name] = provider
        log.debug("subagent.provider_added", provider=name)

        def remove() -> None:  # a Handle runs this at most once, and the name stayed ours until now
            del self._providers[name]
            log.debug("subagent.provider_removed", provider=name)

        return Handle(remove, f"provider:{name}")

    def get(self, name: str) -> ContinuableProvider:
        """The provider called ``name``.

        Raises:
            SubagentError: ``NO_PROVIDER`` when none is registered under that name.
        """
        provider = self._providers.get(name)
        if provider is None:
            known = ", ".join(sorted(self._providers)) or "none"
            raise SubagentError(
                f'no subagent provider "{name}" (registered: {known})', code="NO_PROVIDER", provider=name
            )
        return provider

    def names(self) -> list[str]:
        return sorted(self._providers)
