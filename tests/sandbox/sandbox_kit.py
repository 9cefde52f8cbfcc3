"""A real host with the workspace plugin, its data dir inside the workspace (the default layout), for escape tests.

Nothing is mocked: commands run through the host's own tool pipeline inside the
real bubblewrap sandbox. ``outside_dir`` makes directories outside ``/tmp`` (which
the sandbox replaces with an empty one), so a refused write there proves the
read-only root, not merely an invisible path.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.plugins.profiles import Profile
from host_spec.host.sandbox.policy import load_settings
from host_spec.records import AbortSignal

_calls = iter(range(1, 1 << 30))


@attrs.define
class Outcome:
    value: Any = None
    code: str | None = None
    message: str = ""

    @property
    def output(self) -> str:
        return "" if self.value is None else str(self.value.get("output", ""))


def profile(sandbox: dict[str, Any] | None = None) -> Profile:
    return Profile(name="sandbox-test", plugins=(), sandbox=load_settings(sandbox or {}))


async def open_host(ws: Path, sandbox: dict[str, Any] | None = None, *, data: Path | None = None) -> Host:
    """A host whose data dir is ``data`` (default: ``ws/.dsh-data``, as ``dsh run`` lays it out)."""
    host = await Host.open(data or ws / ".dsh-data", profile(sandbox), ScriptedModel.from_mapping({}))
    host.plugins.load("workspace", {})
    return host


async def lead_in(host: Host, ws: Path, name: str = "lead") -> Any:
    session = await host.create_session(f"session-{name}", cwd=str(ws))
    host.start_agent(session, name=name)
    return host.agents.list()[-1]


async def call(host: Host, agent: Any, tool: str, **arguments: Any) -> Outcome:
    message = await host.tools.execute(agent, f"call-{next(_calls)}", tool, json.dumps(arguments), AbortSignal())
    if message.is_error:
        return Outcome(code=message.error["code"], message=message.error["message"])
    return Outcome(value=json.loads(message.content[0]["text"]))


def outside_dir(prefix: str) -> Iterator[Path]:
    """A fresh directory outside ``/tmp`` (``/var/tmp``), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def processes_with(marker: str) -> list[int]:
    """Pids of live processes whose command line contains ``marker`` (an oracle outside the sandbox)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if marker.encode() in handle.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found
