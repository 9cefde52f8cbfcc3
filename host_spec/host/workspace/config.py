"""Limits of the workspace tools (plugin table ``plugins.workspace``); every limit fails loudly."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from host_spec.config import structure_config

__all__ = ["CONFIG_PATH", "WorkspaceConfig", "load_config"]

CONFIG_PATH: Final = "plugins.workspace"


def _positive(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ValueError(f"{attribute.name} must be at least 1")


@attrs.frozen
class WorkspaceConfig:
    """Tool limits.

    Attributes:
        max_file_bytes: Files larger than this are refused (``FILE_TOO_LARGE``).
        read_max_lines: Lines ``read_file`` shows when no ``limit`` is given.
        read_max_bytes: Bytes of numbered text ``read_file`` returns at most.
        max_line_chars: Longer lines are cut in ``read_file`` and ``grep`` output.
        snapshot_max_bytes: Files up to this size keep their text in the ledger, so a
            stale rejection can show a diff even after a restart.
        diff_max_lines: Lines of the diff a ``FILE_STALE`` rejection shows.
        max_matches: ``grep`` matches and ``glob``/``list_dir`` entries returned at most.
        bash_timeout_ms: Default ``bash`` timeout.
        bash_max_timeout_ms: Largest ``timeout_ms`` a call may ask for.
        bash_output_bytes: Output ``bash`` returns at most (head and tail kept).
    """

    max_file_bytes: int = attrs.field(default=4 * 1024 * 1024, validator=_positive)
    read_max_lines: int = attrs.field(default=2000, validator=_positive)
    read_max_bytes: int = attrs.field(default=100_000, validator=_positive)
    max_line_chars: int = attrs.field(default=2000, validator=_positive)
    snapshot_max_bytes: int = attrs.field(default=65536, validator=_positive)
    diff_max_lines: int = attrs.field(default=40, validator=_positive)
    max_matches: int = attrs.field(default=200, validator=_positive)
    bash_timeout_ms: int = attrs.field(default=120_000, validator=_positive)
    bash_max_timeout_ms: int = attrs.field(default=600_000, validator=_positive)
    bash_output_bytes: int = attrs.field(default=30_000, validator=_positive)


def load_config(raw: Mapping[str, Any] | None, path: str = CONFIG_PATH) -> WorkspaceConfig:
    """Validate the raw table (``None`` gives the defaults).

    Raises:
        ConfigError: an unknown key, a wrong type or a limit below 1, naming the field path.
    """
    return structure_config(WorkspaceConfig, raw, path)
