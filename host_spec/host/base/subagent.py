"""Legacy plugin ``subagent``: the ``subagent`` tool (fresh continuable child, provider ``spawn``).

Team profiles disable it: direct delegation there is ``spawn_teammate``.
"""

from __future__ import annotations

from typing import Any

from host_spec import hookimpl

from host_spec.host.base._delegate import install

DEFAULTS = {"provider": "spawn", "tool_name": "subagent"}


@hookimpl
def dsh_plugin_loaded(host: Any, ctx: Any) -> None:
    install(host, ctx, DEFAULTS)
