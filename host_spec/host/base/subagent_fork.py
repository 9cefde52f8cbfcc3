"""Legacy plugin ``subagent-fork``: the ``subagent_fork`` tool (child forked from the caller's context).

The child inherits the parent's completed-turn prefix through provider ``fork``.
"""

from __future__ import annotations

from typing import Any

from host_spec import hookimpl

from host_spec.host.base._delegate import install

DEFAULTS = {"provider": "fork", "tool_name": "subagent_fork"}


@hookimpl
def dsh_plugin_loaded(host: Any, ctx: Any) -> None:
    install(host, ctx, DEFAULTS)
