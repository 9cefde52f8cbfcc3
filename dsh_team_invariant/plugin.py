"""Plugin ``dsh-team-invariant``: the Agent Teams stream check as ``dsh_pre_append``.

Loading builds one :class:`~dsh_team_invariant.invariant.TeamStreamInvariant` for
the loading host, seeds it from ``host.sessions.list()`` (``dsh_session_created``
is not replayed for sessions that are already live) and registers it with that
host's hooks through ``ctx.register``, with the veto of a second record of one
tool call id (:mod:`dsh_team_invariant.tool_calls`); the stream check seeds each later session, stages each
candidate in ``dsh_pre_append`` and settles it at the next check of that session
(no ``dsh_session_event`` observer: see :mod:`dsh_team_invariant.invariant`). It
also provides that fold as :class:`~dsh_team.log.lead_fold.TeamFolds`, so the Team journal
adopts it instead of folding each committed Team event a second time.
Unload unregisters it with the rest of the plugin's ledger; the module itself
keeps no state, so one import serves any number of hosts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import structlog

from host_spec import hookimpl
from host_spec.config import structure_config
from host_spec.storage import CheckpointedSessions

from dsh_team import CheckpointSource, TeamFolds

from dsh_team_invariant.invariant import TeamStreamInvariant
from dsh_team_invariant.tool_calls import ToolCallsOnce

if TYPE_CHECKING:
    from host_spec.protocols import Host, PluginContext

__all__ = ["InvariantConfig", "effective_config"]

log = structlog.get_logger(__name__)


@attrs.frozen
class InvariantConfig:
    """``dsh-team-invariant`` takes no settings; any key is a typo."""


def effective_config(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """The config table validated, with every default filled in (``dsh plugins``)."""
    return attrs.asdict(structure_config(InvariantConfig, raw, "plugins.dsh-team-invariant"))


@hookimpl
def dsh_plugin_loaded(host: Host, ctx: PluginContext) -> None:
    structure_config(InvariantConfig, ctx.config, f"plugins.{ctx.name}")
    sessions = host.sessions
    invariant = TeamStreamInvariant(sessions.checkpoints if isinstance(sessions, CheckpointedSessions) else None)
    for session in host.sessions.list():
        invariant.seed(session)
    ctx.register(invariant)
    ctx.register(ToolCallsOnce())  # a tool call is recorded once in a log, on every backend
    ctx.provide(TeamFolds, invariant)
    ctx.provide(CheckpointSource, invariant)  # the Team service starts from the checkpoint this fold read
    log.info("team_invariant.loaded", sessions=len(invariant.sessions()))
