"""The ``[mcp.servers.NAME]`` tables of a profile, validated, and their ``${VAR}`` expansion.

The shape follows the ``mcpServers`` entries coding-agent users already write:
``command``/``args``/``env`` start a local server over stdio, ``url`` (with
``headers``) reaches one over streamable HTTP, ``type`` is implied by which is
given (``type = "sse"`` selects the older HTTP+SSE transport for servers that
still only speak it). Values may name environment variables (``${TOKEN}``, ``${TOKEN:-default}``)
so secrets stay out of profile files; they are expanded when the host starts, and
an unset variable without a default fails naming the field, never the value.

Expanded ``env`` and ``headers`` values are treated as secrets: :func:`secrets_of`
lists them so every error text and log line can be scrubbed of them, and the
effective configuration ``dsh plugins`` prints masks them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs

from host_spec.config import structure_config
from host_spec.errors import ConfigError

from host_spec.host.redaction import url_credentials

__all__ = [
    "CONFIG_PATH", "McpConfig", "ServerConfig", "load_config", "expand", "secrets_of", "effective_config",
]

CONFIG_PATH: Final = "mcp"
#: A server name is one segment of ``mcp__NAME__TOOL``: no double underscore, so a name splits one way.
_SERVER_NAME: Final = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_))*$")
_VARIABLE: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
MASK: Final = "***"


def _positive(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ValueError(f"{attribute.name} must be at least 1")


@attrs.frozen
class ServerConfig:
    """One MCP server.

    Attributes:
        type: ``stdio`` (needs ``command``), ``http`` (streamable HTTP, needs ``url``) or
            ``sse`` (the deprecated HTTP+SSE transport, needs ``url``); implied when left out.
        command: The program that runs a stdio server.
        args: Its arguments.
        env: Variables added to the server's environment (values are secrets).
        cwd: The server's working directory (default: the host's).
        url: The streamable HTTP endpoint, e.g. ``http://127.0.0.1:8000/mcp``.
        headers: HTTP headers sent with every request (values are secrets).
        startup_timeout_ms: How long connecting and listing the tools may take.
        tool_timeout_ms: How long one tool call may take before it fails with
            ``MCP_TOOL_TIMEOUT`` (its effect on the server is then unknown).
        max_result_bytes: Largest tool result passed to the model; a larger one is cut.
        enabled: ``false`` keeps the table but starts nothing.
        sandbox: A stdio server's sandbox policy instead of the profile's ``[sandbox]``
            one (``full``: unsandboxed); its writable root is ``cwd`` (default: the host's).
        network: Whether a sandboxed stdio server may use the network (default: the profile's).
    """

    type: Literal["stdio", "http", "sse"] | None = None
    command: str | None = None
    args: list[str] = attrs.Factory(list)
    env: dict[str, str] = attrs.Factory(dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = attrs.Factory(dict)
    startup_timeout_ms: int = attrs.field(default=30_000, validator=_positive)
    tool_timeout_ms: int = attrs.field(default=300_000, validator=_positive)
    max_result_bytes: int = attrs.field(default=100_000, validator=_positive)
    enabled: bool = True
    sandbox: Literal["read-only", "workspace-write", "full"] | None = None
    network: bool | None = None

    @property
    def transport(self) -> Literal["stdio", "http", "sse"]:
        return self.type if self.type is not None else ("stdio" if self.command is not None else "http")


@attrs.frozen
class McpConfig:
    """The ``[mcp]`` table.

    Attributes:
        servers: The servers by name, in file order.
        files: ``.mcp.json`` files whose ``mcpServers`` the profile loader adds (relative
            to the profile file); the plugin only ever sees their servers merged in.
    """

    servers: dict[str, ServerConfig] = attrs.Factory(dict)
    files: list[str] = attrs.Factory(list)


def _check_server(name: str, server: ServerConfig, path: str) -> None:
    where = f"{path}.servers.{name}"
    if not _SERVER_NAME.match(name):
        raise ConfigError(
            f'MCP server name "{name}" must be letters, digits, "-" or single "_" (it becomes mcp__{name}__TOOL)',
            path=where,
        )
    if server.command is not None and server.url is not None:
        raise ConfigError("give command (stdio) or url (http), not both", path=where)
    if server.transport == "stdio" and server.command is None:
        raise ConfigError("a stdio server needs command", path=f"{where}.command")
    if server.transport != "stdio" and server.url is None:
        raise ConfigError(f"an {server.transport} server needs url (or command for a stdio server)", path=f"{where}.url")
    if server.transport == "stdio" and server.headers:
        raise ConfigError("headers apply to http and sse servers only", path=f"{where}.headers")
    if server.transport != "stdio" and (server.args or server.env or server.cwd is not None):
        raise ConfigError("args, env and cwd apply to stdio servers only", path=where)


def load_config(raw: Mapping[str, Any] | None, path: str = CONFIG_PATH) -> McpConfig:
    """Validate the raw ``[mcp]`` table (``None``: no servers). Nothing is expanded yet.

    Raises:
        ConfigError: an unknown key, a wrong type, a bad server name, a server that is
            neither stdio nor http, naming the field path.
    """
    config = structure_config(McpConfig, raw, path)
    for name, server in config.servers.items():
        _check_server(name, server, path)
    return config


def _expand_text(text: str, where: str, environ: Mapping[str, str]) -> str:
    def substitute(match: re.Match[str]) -> str:
        variable, default = match.group(1), match.group(2)
        value = environ.get(variable)
        if value is None:
            if default is None:
                raise ConfigError(f"environment variable {variable} is not set (write ${{{variable}:-default}} "
                                  "to give a default)", path=where, code="MCP_ENV_MISSING")
            return default
        return value

    return _VARIABLE.sub(substitute, text)


def expand(name: str, server: ServerConfig, environ: Mapping[str, str] | None = None) -> ServerConfig:
    """``server`` with ``${VAR}`` references replaced in command, args, env, cwd, url and headers.

    Raises:
        ConfigError: ``MCP_ENV_MISSING``, naming the variable and the field (never a value).
    """
    env = os.environ if environ is None else environ
    where = f"{CONFIG_PATH}.servers.{name}"

    def one(value: str | None, field: str) -> str | None:
        return None if value is None else _expand_text(value, f"{where}.{field}", env)

    return attrs.evolve(
        server,
        command=one(server.command, "command"),
        args=[_expand_text(arg, f"{where}.args[{index}]", env) for index, arg in enumerate(server.args)],
        env={key: _expand_text(value, f"{where}.env.{key}", env) for key, value in server.env.items()},
        cwd=one(server.cwd, "cwd"),
        url=one(server.url, "url"),
        headers={key: _expand_text(value, f"{where}.headers.{key}", env) for key, value in server.headers.items()},
    )


def secrets_of(server: ServerConfig) -> tuple[str, ...]:
    """The values no error text or log line may show: env and header values, URL credentials."""
    values = [*server.env.values(), *server.headers.values()]
    if server.url is not None:
        values.extend(url_credentials(server.url))
    # Longest first, so a secret containing another is scrubbed whole; short values would scrub noise.
    return tuple(sorted({value for value in values if len(value) >= 4}, key=len, reverse=True))


def effective_config(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """The validated table with defaults filled in, env and header values masked (``dsh plugins``)."""
    config = load_config(raw)
    servers: dict[str, Any] = {}
    for name, server in config.servers.items():
        table = attrs.asdict(server)
        table["env"] = {key: MASK for key in server.env}
        table["headers"] = {key: MASK for key in server.headers}
        servers[name] = table
    return {"servers": servers}
