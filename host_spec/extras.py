"""Optional parts of the ``dsh-team`` distribution: import one, or say which extra to install.

The core install (``pip install dsh-team``) carries only what every command needs.
PostgreSQL, the web panel, MCP servers, ``--watch``, the ``openai:`` and ``llm:``
model kinds and ``dsh acp`` each live behind an *extra*
(``pip install 'dsh-team[postgres]'``), and their modules are imported where they
are used, never when the CLI starts. Every place that needs one calls
:func:`require` first, so a missing extra is always the same typed error,
``EXTRA_NOT_INSTALLED``, whose message names the feature, the missing module and
the one command that installs it -- never a traceback, whichever feature asked.

This module is part of the contract (not of the reference host) so that plugins
(the Team's web panel) use the same check as the host's commands.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Final

from host_spec.errors import DshError

__all__ = ["DISTRIBUTION", "EXTRAS", "ExtraNotInstalledError", "install_command", "require"]

#: The distribution whose extras these are.
DISTRIBUTION: Final = "dsh-team"

#: Every user-facing extra (``all`` installs each of them; ``docs/error-codes.md`` lists what each enables).
EXTRAS: Final = ("postgres", "web", "mcp", "dev", "openai", "llm", "acp")


class ExtraNotInstalledError(DshError):
    """A feature was asked for whose extra is not installed; nothing was started or written.

    Attributes:
        extra: The extra that provides the feature (``postgres``, ``web``, ...).
        feature: What was asked for, as the user typed it (``dsh worker``, ``--watch``).
        module: The module that failed to import.
    """

    code = "EXTRA_NOT_INSTALLED"

    def __init__(self, *, extra: str, feature: str, module: str, reason: str) -> None:
        super().__init__(f"{feature} needs the {extra} extra ({reason}): {install_command(extra)}",
                         extra=extra, feature=feature, module=module)
        self.extra = extra
        self.feature = feature
        self.module = module


def install_command(extra: str) -> str:
    """The command a user runs to add ``extra`` to an installed ``dsh-team``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def require(module: str, *, extra: str, feature: str) -> ModuleType:
    """Import ``module`` (a part of ``extra``) for ``feature``, or fail naming the extra.

    Any ``ImportError`` counts: the module missing, or one of its own dependencies
    missing or broken; installing the extra again is the fix in both cases.

    Args:
        module: The module to import (``psycopg``, ``uvicorn``).
        extra: The extra that installs it, one of :data:`EXTRAS`.
        feature: What the user asked for, named as they asked (``dsh team serve``).

    Returns:
        The imported module.

    Raises:
        ExtraNotInstalledError: ``EXTRA_NOT_INSTALLED``.
        ValueError: ``extra`` is not one of :data:`EXTRAS` (a caller's typo, caught on every call).
    """
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r} (known: {', '.join(EXTRAS)})")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ExtraNotInstalledError(extra=extra, feature=feature, module=module,
                                     reason=f"{type(exc).__name__}: {exc}") from None
