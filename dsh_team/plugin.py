"""Plugin ``dsh-team``: builds the Team service for the loading host and provides it.

Loading validates the config table (``TEAM_INVALID_CONFIG`` naming the field
fails the load), refuses a host whose sessions do not survive the process
(``TEAM_STORAGE_NOT_DURABLE``: every Team guarantee rests on flushes that
persist; ``allow_volatile_store`` is the test-only opt-in), builds one :class:`~dsh_team.service.TeamService` for this host,
folds the sessions that are already live (``dsh_session_created`` is not
replayed for them), registers the service with this host's hooks (its host
feed, :mod:`dsh_team.host_feed`: session events, flushes, disposals, agent status and start, and the
teardown that disposes it), and provides it as
:class:`~dsh_team.api.TeamServiceAPI` -- and its write-scope audit as the
workspace contract's :class:`~host_spec.workspace.WriteAuditor`, so the host's file
tools warn about out-of-scope writes without either side importing the other. Other plugins look it up by that type on
each use::

    team = host.service(TeamServiceAPI)  # SERVICE_NOT_FOUND while dsh-team is not loaded
    team.list_members(agent)

Unload disposes the service (bounded settlement), then the plugin's ledger
withdraws it and unregisters its hooks. The module keeps no state, so one import
serves any number of hosts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

import structlog

from host_spec import hookimpl
from host_spec.permissions import PermissionDesk, PermissionRouter
from host_spec.workspace import WriteAuditor

from dsh_team.api import TeamServiceAPI
from dsh_team.write_auditor import TeamWriteAuditor
from dsh_team.config import TeamConfig
from dsh_team.errors import TeamCode, TeamError
from dsh_team.service import TeamService

if TYPE_CHECKING:
    from host_spec.protocols import Host, PluginContext

__all__ = ["require_durable", "effective_config"]

log = structlog.get_logger(__name__)


def require_durable(host: Any, config: TeamConfig) -> None:
    """Refuse a host whose flushes persist nothing, unless a test opted in.

    Raises:
        TeamError: ``TEAM_STORAGE_NOT_DURABLE``.
    """
    if not getattr(host.sessions, "durable", False) and not config.allow_volatile_store:
        raise TeamError(
            "Agent Teams need durable session storage: this host keeps sessions in memory only, "
            "so accepted messages and tasks would not survive the process (give the host a data directory)",
            TeamCode.STORAGE_NOT_DURABLE,
        )


def effective_config(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """The config table validated, with every default filled in (``dsh plugins``)."""
    return attrs.asdict(TeamConfig.from_mapping(raw))


@hookimpl
def dsh_plugin_loaded(host: Host, ctx: PluginContext) -> None:
    config = TeamConfig.from_mapping(ctx.config)
    require_durable(host, config)
    service = TeamService(host, config)
    for session in host.sessions.list():
        service.session_created(session)
    ctx.register(service)
    ctx.provide(TeamServiceAPI, service)
    ctx.provide(WriteAuditor, TeamWriteAuditor(service.members, service.mode))
    ctx.provide(PermissionRouter, service.asks)
    ctx.provide(PermissionDesk, service.asks)  # answerers outside the Team (an ACP editor)
    service.coordination.recover_live()
    log.info("team.loaded", sessions=len(service.journals))
