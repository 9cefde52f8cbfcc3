"""The editor's MCP servers join the profile's: ``session/new``'s ``mcpServers`` as ``[mcp.servers.NAME]`` tables.

A client's server becomes one more server table of the ``mcp`` plugin, so its
tools reach every member as ``mcp__NAME__TOOL`` and are recorded like any tool
call, exactly as a profile's own servers (:mod:`host_spec.host.mcp.plugin`):
stdio servers (``command``, ``args``, ``env``), streamable HTTP (``url``,
``headers``) and the older HTTP+SSE transport. The ``mcp`` plugin validates them
when it loads; a bad one fails the ``session/new`` with the plugin's own error.

The profile is the reviewed configuration of the Team, so on a name both define,
the profile's server is kept and the client's is left out (logged). A profile that
disables the ``mcp`` plugin gets no servers from the client either.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

import attrs
import structlog

from host_spec.host.plugins.profiles import MCP_PLUGIN, PluginEntry, Profile, load_profile

__all__ = ["joined_profile", "server_table"]

log = structlog.get_logger(__name__)


def server_table(server: Any) -> dict[str, Any] | None:
    """One ``mcpServers`` entry as an ``[mcp.servers.NAME]`` table (``None``: a transport we do not run)."""
    kind = getattr(server, "type", None)
    if kind in ("http", "sse"):
        return {"type": kind, "url": server.url, "headers": {h.name: h.value for h in server.headers or ()}}
    if kind is None and getattr(server, "command", None) is not None:
        return {"command": server.command, "args": list(server.args or ()),
                "env": {v.name: v.value for v in server.env or ()}}
    return None


def joined_profile(spec: str, servers: Sequence[Any] | None) -> Profile:
    """Profile ``spec`` with the client's ``servers`` added to its MCP servers.

    Raises:
        ConfigError: the profile itself is invalid (as ``load_profile``).
    """
    profile = load_profile(spec)
    tables: dict[str, Any] = {}
    for server in servers or ():
        table = server_table(server)
        if table is None:
            log.warning("acp.mcp_server_skipped", server=server.name, reason="unsupported transport")
            continue
        tables[server.name] = table
    if not tables:
        return profile
    if MCP_PLUGIN in profile.disabled:
        log.warning("acp.mcp_servers_skipped", servers=sorted(tables), reason="the profile disables the mcp plugin")
        return profile
    entries = list(profile.plugins)
    for index, entry in enumerate(entries):
        if entry.name == MCP_PLUGIN:
            own = dict(entry.config.get("servers") or {})
            for name in sorted(set(tables) & set(own)):
                log.warning("acp.mcp_server_skipped", server=name, reason="the profile has a server of that name")
            entries[index] = PluginEntry(MCP_PLUGIN, MappingProxyType({**entry.config, "servers": {**tables, **own}}))
            break
    else:
        entries.insert(0, PluginEntry(MCP_PLUGIN, MappingProxyType({"servers": tables})))
    return attrs.evolve(profile, plugins=tuple(entries))
