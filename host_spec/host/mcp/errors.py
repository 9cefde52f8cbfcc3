"""Errors of the MCP client, each with a stable code, and the scrubbing of secrets from their text.

A tool call that fails becomes an error *result* carrying the code, so the model
can tell a server that died (``MCP_SERVER_DIED``: the call's effect is unknown)
from a tool that answered with an error (``MCP_TOOL_ERROR``). Every text built
from an exception or a server's stderr goes through :class:`Scrubber` first:
configured ``env`` and ``headers`` values never reach a log line or a result, nor does
the password of any URL quoted (:func:`host_spec.host.redaction.redact_url`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from host_spec.errors import DshError

from host_spec.host.redaction import redact_url

__all__ = ["McpServerError", "Scrubber", "describe", "SCRUBBED"]

SCRUBBED: Final = "[redacted]"


class McpServerError(DshError):
    """An MCP server could not serve a call, or its configuration cannot be used.

    Codes: ``MCP_SERVER_FAILED`` (it did not start), ``MCP_SERVER_UNAVAILABLE`` (it stopped earlier),
    ``MCP_SERVER_DIED`` (it stopped during this call), ``MCP_TOOL_TIMEOUT``,
    ``MCP_TOOL_ERROR`` (the server answered with an error).
    """

    code = "MCP_ERROR"


class Scrubber:
    """Replaces every secret value in a text; built once per server from its expanded config."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = tuple(secrets)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, SCRUBBED)
        return redact_url(text)  # a URL the server quotes (its own, another one) keeps no password either

    def deep(self, value: Any) -> Any:
        """``value`` (JSON builtins) with every string scrubbed: a server's answer may quote its env too."""
        if not self._secrets:
            return value
        if isinstance(value, str):
            return self(value)
        if isinstance(value, list):
            return [self.deep(item) for item in value]
        if isinstance(value, dict):
            return {key: self.deep(item) for key, item in value.items()}
        return value


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def describe(exc: BaseException) -> str:
    """A one-line account of ``exc`` (the leaves of an exception group, deduplicated)."""
    parts: list[str] = []
    for leaf in _leaves(exc):
        text = str(leaf) or type(leaf).__name__
        if isinstance(leaf, OSError) and leaf.strerror:
            text = f"{leaf.strerror}" + (f": {leaf.filename}" if leaf.filename else "")
        line = f"{type(leaf).__name__}: {text}"
        if line not in parts:
            parts.append(line)
    return "; ".join(parts)
