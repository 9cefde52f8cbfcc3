"""Shared helpers of the end-to-end tests: run the real ``dsh`` CLI on the demo and read what it left.

Everything here talks to the product from the outside: a ``dsh`` subprocess, the
JSONL files it wrote, and ``dsh team show --json``. The only test-only piece is
the ``e2e-probe`` observer plugin (see :mod:`e2e_probe_plugin`), installed into a
throwaway site directory and loaded through a profile that extends
``agent-teams``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from host_spec.events import Event
from host_spec.host.demo import PROMPT, SCRIPT
from host_spec.host.store.jsonl import JsonlStore

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
GOLDEN = HERE / "golden"
TEAM_PREFIX = "team/"
#: Generous per-command bound; the demo itself takes about a second.
TIMEOUT_S = 60


# ---------------------------------------------------------------- running dsh


def environment(tmp: Path) -> dict[str, str]:
    """Subprocess environment with the ``e2e-probe`` plugin installed in a tmp site dir."""
    site = tmp / "site"
    dist = site / "dsh_e2e_probe-0.1.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dsh-e2e-probe\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[dsh]\ne2e-probe = e2e_probe_plugin\n")
    variables = dict(os.environ)
    paths = [str(site), str(HERE), variables.get("PYTHONPATH", "")]
    variables["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    variables.pop("DSH_DATA_DIR", None)
    return variables


def probe_profile(tmp: Path, name: str, **config: Any) -> Path:
    """A profile file: ``agent-teams`` plus ``e2e-probe`` with ``config`` (strings and numbers)."""
    lines = ['extends = "agent-teams"', "", "[plugins.e2e-probe]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in config.items()]
    path = tmp / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def dsh_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "host_spec.host.cli.main", *args]


def dsh(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run one ``dsh`` command to completion."""
    return subprocess.run(dsh_argv(*args), env=env, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=REPO)


def workspace_of(data_dir: Path) -> Path:
    """The demo's workspace inside its data dir (as ``dsh demo`` lays it out)."""
    return data_dir / "workspace"


def run_args(data_dir: Path, profile: str | Path = "agent-teams") -> list[str]:
    """``dsh run`` arguments for the demo (its empty workspace is created here)."""
    workspace = workspace_of(data_dir)
    workspace.mkdir(parents=True, exist_ok=True)
    return ["run", "--profile", str(profile), "--model", f"scripted:{SCRIPT}", "--data-dir", str(data_dir),
            "--workspace", str(workspace), PROMPT]


def resume_args(data_dir: Path) -> list[str]:
    """``dsh resume`` arguments for a demo data dir (same profile and script as the run)."""
    return ["resume", "--profile", "agent-teams", "--model", f"scripted:{SCRIPT}", "--data-dir", str(data_dir)]


def team_show(env: dict[str, str], data_dir: Path, *extra: str) -> dict[str, Any]:
    """``dsh team show --json`` of the data dir's latest root."""
    result = dsh(env, "team", "show", "--json", "--data-dir", str(data_dir), *extra)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# ---------------------------------------------------------------- reading the store


class Stored:
    """Every session of one data dir, read once through the host's own reader."""

    def __init__(self, data_dir: Path) -> None:
        self.store = JsonlStore(data_dir)
        self.sessions: dict[str, tuple[Any, list[Event]]] = {
            session_id: self.store.read(session_id) for session_id in self.store.list_ids()
        }
        roots = [sid for sid, (header, _) in self.sessions.items() if header.parent_session is None]
        assert len(roots) == 1, f"expected one root session, found {roots}"
        self.root = roots[0]

    @property
    def lead_events(self) -> list[Event]:
        return self.sessions[self.root][1]

    def team_events(self) -> list[Event]:
        return [event for event in self.lead_events if event.type.startswith(TEAM_PREFIX)]

    def children(self) -> dict[str, str]:
        """Child session id -> member name, from the Lead's ``team/member`` records."""
        names: dict[str, str] = {}
        for event in self.team_events():
            if event.type == "team/member":
                member = event.value()["member"]
                names[member["id"]] = member["name"]
        return names

    def ids(self) -> dict[str, str]:
        """Every generated id -> a stable placeholder (for golden files).

        Sessions become ``<lead>`` / ``<member:NAME>``; message ids become
        ``<message:SENDER->TARGET#k>`` (k counts that pair's messages in queue order,
        which one sender's script fixes).
        """
        mapping = {self.root: "<lead>"}
        for child, name in self.children().items():
            mapping[child] = f"<member:{name}>"
        pairs: Counter[tuple[str, str]] = Counter()
        for event in self.team_events():
            if event.type == "team/message/queued":
                message = event.value()["message"]
                sender = mapping.get(message["sender_id"], message["sender_id"])
                target = mapping.get(message["target_id"], message["target_id"])
                key = (_bare(sender), _bare(target))
                pairs[key] += 1
                mapping[message["id"]] = f"<message:{key[0]}->{key[1]}#{pairs[key]}>"
        return mapping

    def messages_in(self, session_id: str) -> Counter[str]:
        """How often each Team message id was recorded as a ``user/message`` in that session's own log."""
        header, events = self.sessions[session_id]
        found: Counter[str] = Counter()
        for event in events[header.seed_length :]:
            if event.type == "user/message":
                source = event.value().get("source") or {}
                if source.get("kind") == "team-message":
                    found[source.get("message_id") or source.get("messageId")] += 1
        return found


def _bare(placeholder: str) -> str:
    return placeholder.strip("<>").removeprefix("member:")


def normalize(value: Any, ids: dict[str, str]) -> Any:
    """``value`` with every generated id replaced by its placeholder."""
    if isinstance(value, dict):
        return {key: normalize(item, ids) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [normalize(item, ids) for item in value]
    if isinstance(value, str):
        if value in ids:
            return ids[value]
        for raw, placeholder in ids.items():
            if raw in value:
                value = value.replace(raw, placeholder)
        return value
    return value


def team_event_set(stored: Stored) -> list[dict[str, Any]]:
    """The durable Team events as a sorted list of ``{type, data}`` (ids normalized, seq/time dropped)."""
    ids = stored.ids()
    rows = [{"type": event.type, "data": normalize(event.value(), ids)} for event in stored.team_events()]
    return sorted(rows, key=lambda row: (row["type"], json.dumps(row["data"], sort_keys=True)))


def board(show: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    """The scheduling-independent part of ``team show --json``: roster, board, pending mail, audited writes."""
    keep = ("version", "offline", "enabled", "failure", "members", "tasks", "pending_mail")
    view = {key: show[key] for key in keep}
    # writes: who wrote what with which verdict; the time and the tool-call id are generated
    view["writes"] = [{k: v for k, v in write.items() if k not in ("time", "call_id")} for write in show["writes"]]
    return normalize(view, ids)
