"""System-prompt sections: named, ordered, layered global -> agent scope.

Plugins contribute sections at well-known order slots (``team:policy`` sits at
60) instead of editing one prompt string, so several plugins compose without
knowing each other, and an agent scope can replace one global section for that
agent only.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import attrs
import structlog

from host_spec.records import Handle, PromptSection

from host_spec.host.agents.layers import Layers

if TYPE_CHECKING:
    from host_spec.protocols import Agent, Scope

__all__ = ["PromptRegistry", "SECTION_SEPARATOR"]

log = structlog.get_logger(__name__)

SECTION_SEPARATOR = "\n\n"


@attrs.define(eq=False)
class _Entry:
    section: PromptSection
    serial: int  # registration order, the tie-breaker between equal orders


@attrs.define(eq=False)
class PromptRegistry:
    """Prompt sections in a global layer plus lazy per-scope layers (``protocols.PromptRegistry``)."""

    _layers: Layers[_Entry] = attrs.field(factory=lambda: Layers("prompt section", "section"), init=False)
    _serials: itertools.count[int] = attrs.field(factory=itertools.count, init=False)

    def register(self, section: PromptSection, *, scope: Scope | None = None) -> Handle:
        """Register ``section`` globally or into ``scope`` (the handle joins the scope's ledger).

        Raises:
            RegistrationError: a section with this name already exists in that layer.
            ScopeDisposedError: ``scope`` is already disposed.
        """
        return self._layers.add(section.name, _Entry(section, next(self._serials)), scope)

    def scoped_count(self) -> int:
        """How many agent scopes hold registrations here; a disposed scope leaves none behind."""
        return self._layers.scoped_count()

    def sections(self, agent: Agent | None) -> list[PromptSection]:
        """The sections ``agent`` sees, in render order (before text rendering)."""
        merged = self._layers.merged(None if agent is None else agent.scope)
        entries = sorted(merged.values(), key=lambda e: (e.section.order, e.serial))
        return [entry.section for entry in entries]

    def render(self, agent: Agent | None) -> str:
        """The assembled system prompt: non-empty sections joined by a blank line.

        A callable section that raises is logged and dropped, so one broken plugin
        cannot stop every agent's turns.
        """
        parts: list[str] = []
        for section in self.sections(agent):
            text = section.text
            if callable(text):
                try:
                    text = text(agent)  # type: ignore[arg-type]  # the host's agent is a contract Agent at run time
                except Exception:
                    log.exception("prompt section failed to render", section=section.name)
                    continue
            if text and text.strip():
                parts.append(text.strip("\n"))
        return SECTION_SEPARATOR.join(parts)
