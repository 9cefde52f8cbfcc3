"""Test-only plugin ``reliability-probe``: counts durable writes and can SIGKILL its own process after one.

Loaded into a ``dsh`` subprocess through a profile that extends ``agent-teams``.
It registers nothing and vetoes nothing. Config:

* ``count_out``: a file that always holds the number of durable writes so far (one
  per ``dsh_session_flushed``, any session: the Lead's and every teammate's).
* ``kill_at``: after the *n*-th durable write, ``SIGKILL`` this process from inside
  the flush notification, so the disk holds exactly what that write left and
  nothing later.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from host_spec import hookimpl

_state: dict[int, dict[str, Any]] = {}


@hookimpl
def dsh_plugin_loaded(host: Any, ctx: Any) -> None:
    config = dict(ctx.config or {})
    config["writes"] = 0
    _state[id(host)] = config


@hookimpl
def dsh_session_flushed(host: Any, session: Any, durable_seq: int) -> None:
    config = _state.get(id(host))
    if config is None:
        return
    config["writes"] += 1
    out = config.get("count_out")
    if out is not None:
        Path(out).write_text(str(config["writes"]))
    if config.get("kill_at") == config["writes"]:
        os.kill(os.getpid(), signal.SIGKILL)
