"""Plugin ``dsh-team``: builds the Team service for the loading host and provides it.

Loading validates the config table (``TEAM_INVALID_CONFIG`` naming the field
fails the load), builds one :class:`~dsh_team.service.TeamService` for this host,
folds the sessions that are already live (``dsh_session_created`` is not
replayed for them), registers the service with this host's hooks (its host
feed: session events, flushes, disposals, agent status and start, and the
teardown that disposes it), and provides it as
:class:`~dsh_team.api.TeamServiceAPI`. Other plugins look it up by that type on
each use::

    team = host.service(TeamServiceAPI)  # SERVICE_NOT_FOUND while dsh-team is not loaded
    team.list_members(agent)

Unload disposes the service (bounded settlement), then the plugin's ledger
withdraws it and unregisters its hooks. The module keeps no state, so one import
serves any number of hosts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from host_spec import hookimpl

from dsh_team.api import TeamServiceAPI
from dsh_team.config import TeamConfig
from dsh_team.service import TeamService

if TYPE_CHECKING:
    from host_spec.protocols import Host, PluginContext

__all__: list[str] = []

log = structlog.get_logger(__name__)


@hookimpl
def dsh_plugin_loaded(host: Host, ctx: PluginContext) -> None:
    service = TeamService(host, TeamConfig.from_mapping(ctx.config))
    for session in host.sessions.list():
        service.session_created(session)
    ctx.register(service)
    ctx.provide(TeamServiceAPI, service)
    service.coordination.recover_live()
    log.info("team.loaded", sessions=len(service.journals))
