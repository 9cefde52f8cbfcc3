"""Plugin ``dsh-team-web``: the Team panel of a live run, on the host's own event loop.

``dsh run --web[=PORT]`` loads it after the profile's plugins (so it unloads
first, while the Team service still runs). On load it binds its socket at once
-- the URL, with a fresh random token, is printed before the run starts -- and
serves with uvicorn as a supervised task of the plugin. Teardown ends every
open event stream and stops the server (bounded), so the run exits cleanly.

Config (``[plugins.dsh-team-web]`` or ``--web``): ``host`` (default
``127.0.0.1``: nothing outside this machine can connect unless told), ``port``
(``0``: any free port), ``token`` (default: random per run). The panel is
provided as service :class:`Panel` (``host.service(Panel)``: ``url``, ``feed``).
Each loading host gets its own panel object, registered with that host's hooks;
the module keeps no state.

The panel reads the Lead log through the host's session store and changes the
Team only through the Team service's public API.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
import sys
from collections.abc import Iterator, Mapping
from typing import Any, Final

import attrs
import structlog

from dsh_team.web import require_web

# Checked before uvicorn and Starlette are imported: the loader reports the typed error as it is.
require_web("the web panel (dsh run --web, plugin dsh-team-web)")

import uvicorn  # noqa: E402

from host_spec import hookimpl  # noqa: E402
from host_spec.config import structure_config
from host_spec.events import Event
from host_spec.protocols import Agent, Host, PluginContext, Session

from dsh_team.api import TeamServiceAPI
from dsh_team.web.app import build_app
from dsh_team.web.sources import LiveRun
from dsh_team.web.steering import Steering
from dsh_team.web.stream import Feed

__all__ = ["WebConfig", "Panel", "bind", "effective_config"]

log = structlog.get_logger(__name__)

#: Seconds uvicorn lets open connections finish when the run stops.
GRACE_S: Final = 1


@attrs.frozen
class WebConfig:
    """The plugin's config table."""

    host: str = "127.0.0.1"
    port: int = attrs.field(default=0, validator=attrs.validators.and_(
        attrs.validators.instance_of(int), attrs.validators.ge(0), attrs.validators.le(65535)))
    token: str | None = None


class _HostServer(uvicorn.Server):
    """uvicorn without its own signal handlers: Ctrl-C belongs to the host."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port`` 0: any free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(64)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


class Panel:
    """One host's panel: the feed, the app, the server task, and the host feed that pokes it.

    Attributes:
        url: What to open in a browser (token included).
        feed: The published document stream.
        run: The live run it follows.
    """

    def __init__(self, host: Host, config: WebConfig, ctx: PluginContext) -> None:
        self.run = LiveRun(host, lambda: host.find_service(TeamServiceAPI))
        for session in host.sessions.list():
            self.run.adopt(session)
        self.feed = Feed(self.run)
        self.token = config.token or secrets.token_urlsafe(24)
        self.app = build_app(self.feed, self.token, Steering(self.run))
        self._socket = bind(config.host, config.port)
        bound_host, port = self._socket.getsockname()[:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        self.url = f"http://{shown}:{port}/?token={self.token}"
        self._server = _HostServer(uvicorn.Config(
            self.app, log_level="warning", lifespan="off", access_log=False, timeout_graceful_shutdown=GRACE_S))
        self._task: asyncio.Future[Any] = ctx.spawn(self._server.serve(sockets=[self._socket]), name="team-web")

    @hookimpl(specname="dsh_plugin_teardown")
    async def stop(self) -> None:
        """End the event streams, then stop the server (connections get :data:`GRACE_S` to finish)."""
        self.feed.close_all()
        self._server.should_exit = True
        await asyncio.gather(self._task, return_exceptions=True)
        self._socket.close()

    @hookimpl
    def dsh_session_created(self, session: Session) -> None:
        if self.run.adopt(session):
            self.feed.poke()

    @hookimpl
    def dsh_session_event(self, session: Session, event: Event) -> None:
        self.run.committed(session, event)

    @hookimpl
    def dsh_session_flushed(self, session: Session) -> None:
        if session.id == self.run.team_id:
            self.feed.poke()

    @hookimpl
    def dsh_agent_status(self, agent: Agent) -> None:
        self.feed.poke()

    @hookimpl
    def dsh_agent_disposed(self, agent: Agent) -> None:
        self.feed.poke()


def effective_config(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """The config table validated, with every default filled in (``dsh plugins``); a token shows as ``***``."""
    config = attrs.asdict(structure_config(WebConfig, raw, "plugins.dsh-team-web"))
    if config["token"] is not None:
        config["token"] = "***"
    return config


@hookimpl
def dsh_plugin_loaded(host: Host, ctx: PluginContext) -> None:
    config = structure_config(WebConfig, ctx.config, f"plugins.{ctx.name}")
    panel = Panel(host, config, ctx)
    ctx.register(panel)
    ctx.provide(Panel, panel)
    print(f"dsh: Team panel: {panel.url}", file=sys.stderr, flush=True)
    log.info("team_web.serving", url=panel.url.split("?")[0])
