"""Plugin ``dsh-team-invariant``: the Agent Teams stream check as ``dsh_pre_append``.

One :class:`~dsh_team_invariant.invariant.TeamStreamInvariant` per host (a module
may be registered with several hosts in one process, e.g. in tests). It seeds
from ``host.sessions.list()`` on load, because ``dsh_session_created`` is not
replayed for sessions that are already live, and from ``dsh_session_created``
afterwards; it stages each candidate in ``dsh_pre_append`` and settles it at the
next check of that session (no ``dsh_session_event`` observer: see
:mod:`dsh_team_invariant.invariant`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import structlog

from host_spec import hookimpl
from host_spec.config import structure_config

from dsh_team.core.records import TEAM_EVENT_TYPES

from dsh_team_invariant.invariant import TeamStreamInvariant

if TYPE_CHECKING:
    from host_spec.events import Event
    from host_spec.protocols import Session
    from host_spec.records import Violation

__all__ = ["InvariantConfig", "invariant_for"]

log = structlog.get_logger(__name__)

_by_host: dict[int, tuple[Any, TeamStreamInvariant]] = {}


@attrs.frozen
class InvariantConfig:
    """``dsh-team-invariant`` takes no settings; any key is a typo."""


def invariant_for(host: Any) -> TeamStreamInvariant:
    """The invariant serving ``host`` (created on first use)."""
    entry = _by_host.get(id(host))
    if entry is None or entry[0] is not host:
        entry = _by_host[id(host)] = (host, TeamStreamInvariant())
    return entry[1]


@hookimpl
def dsh_plugin_loaded(host: Any, ctx: Any) -> None:
    structure_config(InvariantConfig, ctx.config, f"plugins.{ctx.name}")
    invariant = invariant_for(host)
    invariant.clear()
    for session in host.sessions.list():
        invariant.seed(session)
    log.info("team_invariant.loaded", sessions=len(invariant.sessions()))


@hookimpl
def dsh_plugin_unload(host: Any, ctx: Any) -> None:
    entry = _by_host.pop(id(host), None)
    if entry is not None:
        entry[1].clear()


@hookimpl
def dsh_session_created(host: Any, session: Session) -> None:
    invariant_for(host).seed(session)


@hookimpl
def dsh_pre_append(host: Any, session: Session, event: Event) -> Violation | None:
    # Hot path: most events are not Team events; answer those with one set lookup.
    if event.type not in TEAM_EVENT_TYPES:
        return None
    return invariant_for(host).check(session, event)


@hookimpl
def dsh_session_disposed(host: Any, session: Session) -> None:
    invariant_for(host).forget(session)
