"""Servers from ``.mcp.json`` files: the ``{"mcpServers": {NAME: {...}}}`` shape coding agents share.

A project that already lists its servers for another coding agent should not have
to list them twice: ``[mcp] files = [".mcp.json"]`` in a profile reads them (paths
relative to the profile file). The entries' keys are the ones a server table takes
(``type``, ``command``, ``args``, ``env``, ``url``, ``headers``, plus this host's
own keys), so the same validation applies and an error names the file and the
entry. Tables in the profile win over a file's entry of the same name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from host_spec.errors import ConfigError

__all__ = ["read_servers"]


def read_servers(path: Path, where: str) -> dict[str, Any]:
    """The ``mcpServers`` entries of the JSON file at ``path`` (raw tables, validated later).

    Raises:
        ConfigError: the file is unreadable, not JSON, or has no ``mcpServers`` object,
            naming ``where`` (the profile field that listed it).
    """
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}", path=where) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc}", path=where) from None
    servers = document.get("mcpServers") if isinstance(document, Mapping) else None
    if not isinstance(servers, Mapping) or not all(isinstance(v, Mapping) for v in servers.values()):
        raise ConfigError(f'{path} has no "mcpServers" object of server objects', path=where)
    return {str(name): dict(table) for name, table in servers.items()}
