"""Test-only observer plugin ``e2e-probe``, loaded into the ``dsh`` subprocess of the e2e tests.

It never changes what the demo does (it registers nothing and vetoes nothing); it
only looks:

* ``surface_out``: for every agent step, the model-facing surface exactly as the
  turn loop builds it (``tools.visible(agent)`` rendered with the model adapter's
  ``tool_definitions``, and the rendered system prompt), one JSON line per distinct
  ``(agent name, surface)``.
* ``pause_at`` = ``"<event type>#<n>"``: once the *n*-th event of that type in the
  Lead's log is durable, write ``pause_marker`` and block the process for
  ``pause_s`` seconds. Blocking the event loop freezes the run at exactly that
  point (later appends, other sessions' flushes and deliveries cannot happen), so
  the crash test's SIGKILL lands between, e.g., a ``team/message/queued`` and its
  ``team/message/delivered``. ``"child-flush#<n>"`` pauses at the first durable
  flush of the *n*-th child session that holds its initial prompt (descriptor
  and prompt are on disk; the Lead has not recorded the member ``active`` yet).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from host_spec import hookimpl
from host_spec.host.models.adapter import tool_definitions

#: ``pause_at`` type meaning "the first durable flush of the n-th child session".
CHILD_FLUSH = "child-flush"

_state: dict[int, dict[str, Any]] = {}


def _config(host: Any) -> dict[str, Any]:
    return _state.get(id(host), {})


@hookimpl
def dsh_plugin_loaded(host: Any, ctx: Any) -> None:
    config = dict(ctx.config or {})
    if "pause_at" in config:
        kind, _, nth = str(config["pause_at"]).rpartition("#")
        config["pause_type"], config["pause_n"] = kind, int(nth)
    config.update(seen=set(), scanned=0, count=0, paused=False, children=set())
    _state[id(host)] = config


@hookimpl
def dsh_session_event(host: Any, session: Any, event: Any) -> None:
    config = _config(host)
    out = config.get("surface_out")
    if out is None or event.type != "step/start":
        return
    agent = host.agents.get(session.id)
    if agent is None:
        return
    surface = {
        "agent": agent.name,
        "system": host.prompts.render(agent),
        "tools": tool_definitions(host.tools.visible(agent)),
    }
    line = json.dumps(surface, sort_keys=True)
    if line not in config["seen"]:
        config["seen"].add(line)
        with Path(out).open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")


def _lead_count(config: dict[str, Any], session: Any, durable_seq: int) -> int:
    """Durable events of the pause type in the Lead log, folded incrementally."""
    events = session.events
    index = config["scanned"]
    while index < len(events) and events[index].seq <= durable_seq:
        if events[index].type == config["pause_type"]:
            config["count"] += 1
        index += 1
    config["scanned"] = index
    return config["count"]


@hookimpl
def dsh_session_flushed(host: Any, session: Any, durable_seq: int) -> None:
    config = _config(host)
    if "pause_type" not in config or config["paused"]:
        return
    if config["pause_type"] == CHILD_FLUSH:
        if session.header.parent_session is None or session.id in config["children"]:
            return
        if not any(e.type == "agent/inbox/spliced" and e.seq <= durable_seq for e in session.own_events()):
            return  # a fork's seed may be flushed first; wait for the admitted prompt
        config["children"].add(session.id)
        reached = len(config["children"]) >= config["pause_n"]
    elif session.header.parent_session is None:
        reached = _lead_count(config, session, durable_seq) >= config["pause_n"]
    else:
        return
    if reached:
        config["paused"] = True
        Path(config["pause_marker"]).write_text(f"{config['pause_at']} durable in {session.id} at seq {durable_seq}\n")
        time.sleep(float(config.get("pause_s", 30)))
