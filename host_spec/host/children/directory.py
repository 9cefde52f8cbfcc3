"""Which continuable children a parent has, including ones asleep on disk.

The legacy control tools let a model address a child by id *or* by its label
(scripts and people both remember "researcher" better than a UUID), and list a
parent's children. Resident children are known from the activation table; a
child that went to disk in an earlier process is found through the store: its
header names its parent and its first own descriptor says whether it is
continuable. Headers and descriptors never change once written, so each stored
session is classified at most once per process.
"""

from __future__ import annotations

from typing import Any

import attrs
import structlog

from host_spec.errors import DshError, SubagentError

from host_spec.host.children.activation import fold_descriptor

__all__ = ["ChildInfo", "ChildDirectory"]

log = structlog.get_logger(__name__)


@attrs.frozen
class ChildInfo:
    """A continuable child as its descriptor describes it."""

    child_id: str
    parent_id: str
    label: str
    name: str
    provider: str


@attrs.define(eq=False)
class ChildDirectory:
    """Continuable children by parent: noted on start/resume, discovered from the store once.

    Args:
        host: Provides ``sessions.inspect`` and (optionally) ``store.list_ids``.
    """

    host: Any
    _known: dict[str, ChildInfo | None] = attrs.field(factory=dict, init=False)  # None = not a child

    def note(self, info: ChildInfo) -> None:
        self._known[info.child_id] = info

    async def list(self, parent_id: str) -> list[ChildInfo]:
        """Every continuable child of ``parent_id`` known live or stored, oldest first."""
        await self._discover()
        return [info for info in self._known.values() if info is not None and info.parent_id == parent_id]

    async def resolve(self, parent_id: str, ref: str) -> str:
        """The child id ``ref`` names for ``parent_id``: an id as is, else a unique label or name.

        An unknown ``ref`` is returned unchanged, so delivery reports the precise error.

        Raises:
            SubagentError: ``AMBIGUOUS_AGENT`` when several children carry that label.
        """
        info = self._known.get(ref)
        if info is not None and info.parent_id == parent_id:
            return ref
        matches = [c for c in await self.list(parent_id) if ref in (c.label, c.name)]
        if len(matches) > 1:
            ids = ", ".join(c.child_id for c in matches)
            raise SubagentError(f'several subagents are called "{ref}" ({ids}); use an id', code="AMBIGUOUS_AGENT")
        return matches[0].child_id if matches else ref

    async def _discover(self) -> None:
        store = getattr(self.host, "store", None)
        if store is None:
            return
        for session_id in store.list_ids():
            if session_id in self._known:
                continue
            try:
                stored = await self.host.sessions.inspect(session_id)
                parent_id = stored.header.parent_session
                descriptor = fold_descriptor(stored.own_events()) if parent_id is not None else None
            except DshError as exc:
                log.warning("subagent.unreadable_child", session=session_id, error=str(exc))
                continue  # not cached: a later call may read it
            if parent_id is None or descriptor is None or descriptor.mode != "continuable":
                self._known[session_id] = None
                continue
            label = descriptor.label or session_id
            name = descriptor.name or label
            self._known[session_id] = ChildInfo(session_id, parent_id, label, name, descriptor.provider)
