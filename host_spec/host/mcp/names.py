"""Model-facing names of MCP tools: ``mcp__SERVER__TOOL``, sanitised and bounded.

Model APIs accept tool names of ``[A-Za-z0-9_-]`` up to 64 characters; an MCP
server may name its tools anything. Every other character becomes ``_``; a name
that would be longer is cut and ends in a short digest of the full name, so two
long names stay apart. The prefix makes a tool's origin readable in every log
line and lets a role's tool allowlist name a whole server (``mcp__NAME__*``).
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

__all__ = ["PREFIX", "MAX_NAME", "tool_name"]

PREFIX: Final = "mcp__"
MAX_NAME: Final = 64
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_-]")
_DIGEST: Final = 8


def tool_name(server: str, tool: str) -> str:
    """The name ``tool`` of ``server`` is offered under (deterministic: the same on every run)."""
    name = f"{PREFIX}{server}__{_UNSAFE.sub('_', tool) or '_'}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:_DIGEST]
    return f"{name[: MAX_NAME - _DIGEST - 1]}_{digest}"

