"""Configuration of the Team tools plugin (``dsh-team-tools``).

The tools choose which continuable-child provider creates a teammate: a fresh
child (empty history) or a fork (the Lead's completed-turn prefix). The names are
configuration so a profile can route teammates through its own providers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from host_spec.config import structure_config

__all__ = ["CONFIG_PATH", "ToolsConfig", "load_config"]

CONFIG_PATH: Final = "plugins.dsh-team-tools"


def _provider_name(instance: ToolsConfig, attribute: attrs.Attribute[str], value: str) -> None:
    """A provider name must say something: blank names would only fail later, at spawn time."""
    if not value.strip():
        raise ValueError(f"{attribute.name} must be a non-empty provider name")


@attrs.frozen
class ToolsConfig:
    """Provider names used by ``spawn_teammate``.

    Attributes:
        fresh_provider: Provider for ``context: "fresh"`` (default ``spawn``).
        fork_provider: Provider for ``context: "fork"`` (default ``fork``).
    """

    fresh_provider: str = attrs.field(default="spawn", validator=_provider_name)
    fork_provider: str = attrs.field(default="fork", validator=_provider_name)

    def provider_for(self, context: str) -> str:
        """The provider for a spawn context: ``fork`` -> fork provider, anything else -> fresh."""
        return self.fork_provider if context == "fork" else self.fresh_provider


def load_config(raw: Mapping[str, Any] | None, path: str = CONFIG_PATH) -> ToolsConfig:
    """Validate the plugin's raw config table (``None`` or ``{}`` gives the defaults).

    Raises:
        ConfigError: unknown key, non-string or blank provider; the error names the field path.
    """
    return structure_config(ToolsConfig, raw, path)
