"""The exactly-once checks every crash case must pass, read from the JSONL files a run left.

* every accepted message (a durable ``team/message/queued`` in the Lead log) is in
  its target's history exactly once and in no other session's history, and none
  is left undelivered;
* no member is left ``provisioning``;
* every log's seqs are contiguous from 1;
* no tool call is recorded twice (``tool/call`` and ``tool/result`` ids unique per log).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from host_spec.errors import DshError
from host_spec.host.store.jsonl import JsonlStore

__all__ = ["violations"]


def violations(data_dir: Path | Any) -> list[str]:
    """Every broken guarantee in ``data_dir`` (empty: all hold); a store object (with ``scan`` and ``read``) is read as it is."""
    store = JsonlStore(data_dir) if isinstance(data_dir, (str, Path)) else data_dir
    ids, damaged = store.scan()
    problems = [f"unreadable header: {error}" for error in damaged]
    logs = {}
    for session_id in ids:
        try:
            logs[session_id] = store.read(session_id)
        except DshError as error:
            problems.append(f"{session_id} unreadable: {error.code}: {error}")
    roots = [sid for sid, (header, _) in logs.items() if header.parent_session is None]
    if len(roots) != 1:
        return [*problems, f"expected one root session, found {roots}"]
    lead_events = logs[roots[0]][1]
    queued: dict[str, str] = {}
    delivered: set[str] = set()
    phases: dict[str, str] = {}
    for event in lead_events:
        value = event.value() if event.type.startswith("team/") else None
        if event.type == "team/message/queued":
            queued[value["message"]["id"]] = value["message"]["target_id"]
        elif event.type == "team/message/delivered":
            delivered.add(value["message_id"])
        elif event.type == "team/member":
            phases[value["member"]["name"]] = value["member"]["phase"]
    held: dict[str, Counter[str]] = {}
    for session_id, (header, events) in logs.items():
        seqs = [event.seq for event in events]
        if seqs != list(range(1, len(seqs) + 1)):
            problems.append(f"{session_id}: seqs are not contiguous")
        own = events[header.seed_length :]
        for kind in ("tool/call", "tool/result"):
            calls = Counter(event.value()["call_id"] for event in own if event.type == kind)
            problems += [f"{session_id}: {kind} {call} recorded {n} times" for call, n in calls.items() if n > 1]
        found: Counter[str] = Counter()
        for event in own:
            if event.type == "user/message":
                source = event.value().get("source") or {}
                if source.get("kind") == "team-message":
                    found[source.get("message_id")] += 1
        held[session_id] = found
    for message_id, target in queued.items():
        count = held.get(target, Counter())[message_id]
        if count != 1:
            problems.append(f"{message_id} is in its target {target}'s history {count} times")
        elsewhere = [sid for sid, found in held.items() if sid != target and found[message_id]]
        if elsewhere:
            problems.append(f"{message_id} is also in {elsewhere}")
        if message_id not in delivered:
            problems.append(f"{message_id} is still queued")
    problems += [f"member {name} is left provisioning" for name, phase in phases.items() if phase == "provisioning"]
    return problems
