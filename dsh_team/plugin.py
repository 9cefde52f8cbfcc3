"""Plugin ``dsh-team``: provides the Team service (``agent_teams``) and feeds it host events.

One :class:`~dsh_team.service.TeamService` per host (a module may be registered
with several hosts in one process, e.g. in tests). On load it validates the
config table (``TEAM_INVALID_CONFIG`` naming the field fails the load), folds the
sessions that are already live (``dsh_session_created`` is not replayed for
them), and publishes the service. Teardown disposes the service (bounded
settlement); the ledger then removes the published service.
"""

from __future__ import annotations

from typing import Any

import structlog

from host_spec import hookimpl

from dsh_team.config import TeamConfig
from dsh_team.service import SERVICE_KEY, TeamService

__all__ = ["SERVICE_KEY", "service_for"]

log = structlog.get_logger(__name__)

_by_host: dict[int, tuple[Any, TeamService]] = {}


def service_for(host: Any) -> TeamService | None:
    """The Team service of ``host`` while the plugin is loaded there."""
    entry = _by_host.get(id(host))
    return entry[1] if entry is not None and entry[0] is host else None


@hookimpl
def dsh_plugin_loaded(host: Any, ctx: Any) -> None:
    config = TeamConfig.from_mapping(ctx.config)
    service = TeamService(host, config)
    for session in host.sessions.list():
        service.session_created(session)
    ctx.provide(SERVICE_KEY, service)
    service.coordination.recover_live()
    _by_host[id(host)] = (host, service)
    log.info("team.loaded", sessions=len(service.journals))


@hookimpl
async def dsh_plugin_teardown(host: Any, ctx: Any) -> None:
    service = service_for(host)
    if service is not None:
        await service.dispose()


@hookimpl
def dsh_plugin_unload(host: Any, ctx: Any) -> None:
    if service_for(host) is not None:
        del _by_host[id(host)]


@hookimpl
def dsh_session_created(host: Any, session: Any) -> None:
    service = service_for(host)
    if service is not None:
        service.session_created(session)


@hookimpl
def dsh_session_event(host: Any, session: Any, event: Any) -> None:
    service = service_for(host)
    if service is not None:
        service.session_event(session, event)


@hookimpl
def dsh_session_flushed(host: Any, session: Any, durable_seq: int) -> None:
    service = service_for(host)
    if service is not None:
        service.session_flushed(session, durable_seq)


@hookimpl
def dsh_session_disposed(host: Any, session: Any) -> None:
    service = service_for(host)
    if service is not None:
        service.session_disposed(session)


@hookimpl
def dsh_agent_status(host: Any, agent: Any, status: str) -> None:
    service = service_for(host)
    if service is not None:
        service.agent_status(agent, status)


@hookimpl
def dsh_agent_session_start(host: Any, agent: Any, source: str) -> None:
    service = service_for(host)
    if service is not None:
        service.agent_session_start(agent, source)
