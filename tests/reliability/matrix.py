"""Malformed arguments to every Team tool, and impersonation, through a real host: typed errors, nothing written.

A real host on a JSONL data dir with the ``agent-teams`` plugins: a Lead, two
live teammates, one task each. Every case calls a tool through the host's tool
registry (the real decode, service and error path) and must come back as an
error result with a typed code, with zero Team events appended to the Lead log.
"""

from __future__ import annotations

import asyncio
import copy
import json
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from figures import Figures

from dsh_team.errors import TeamCode
from dsh_team_tools.catalog import CATALOG
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.messages import text_block
from host_spec.records import AbortSignal

__all__ = ["malformed_matrix", "impersonation_matrix", "malformed_cases"]

#: Codes a rejected call may carry: the host's argument codes and every Team code.
TYPED = frozenset({"INVALID_ARGS", "ARGUMENTS_TOO_LARGE"}) | TeamCode.ALL

#: A valid call of each tool, the template the malformed cases break one field at a time.
BASELINE: dict[str, dict[str, Any]] = {
    "spawn_teammate": {"name": "third", "description": "d", "prompt": "p", "context": "fresh"},
    "send_message": {"target": "lead", "message": "m"},
    "list_agents": {},
    "wait_agent": {"timeout_ms": 10_000, "since": 0},
    "interrupt_agent": {"target": "alpha"},
    "team_task_create": {"subject": "s", "description": "d", "blocked_by": [], "write_scopes": ["src"]},
    "team_task_list": {"status": "pending", "owner": "alpha", "ready": True, "cursor": 0, "limit": 5},
    "team_task_get": {"task_id": "task-1"},
    "team_task_update": {"task_id": "task-1", "expected_revision": 1, "action": "edit", "subject": "x"},
}
#: Fields whose text is checked for blanks and control characters.
TEXT = {"name", "description", "prompt", "message", "subject", "target", "task_id"}
WRONG_TYPE: dict[str, list[Any]] = {
    "str": [1, 1.5, True, None, [], {}],
    "int": ["1", 1.5, None, [], {}],
    "bool": ["yes", 1, None],
    "list": ["src", 1, None, {}, [1], [None]],
}
OUT_OF_RANGE: dict[str, list[Any]] = {
    "timeout_ms": [-1, 0, 9_999, 3_600_001, 2**63],
    "since": [-1, 2**63],
    "cursor": [-1],
    "limit": [0, 101],
    "expected_revision": [0, -1, 2**63],
    "context": ["clone", ""],
    "action": ["steal", ""],
    "status": ["deleted", "bogus"],
    "write_scopes": [["/abs"], ["../up"], ["a\x00b"], ["C:x"]],
    "blocked_by": [["task-404"], ["task-1", "task-1"]],
}


def _kind(tool: str, field: str) -> str:
    """``list`` / ``bool`` / ``int`` / ``str``: the JSON kind the field takes (Unset stripped)."""
    entry = next(e for e in CATALOG if e.name == tool)
    hint = typing.get_type_hints(entry.args_type)[field]
    options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    for option in options:
        base = typing.get_origin(option) or option
        if base is list:
            return "list"
        if base is bool:
            return "bool"
        if base is int:
            return "int"
    return "str"


def malformed_cases() -> Iterator[tuple[str, str, str]]:
    """``(tool, label, raw arguments)`` for every malformed call of every tool."""
    for tool, base in BASELINE.items():
        for raw in ("{not json", "[]", "null", '"text"', "1"):
            yield tool, f"non-object {raw}", raw
        yield tool, "unknown field", json.dumps({**base, "extra_field": 1})
        entry = next(e for e in CATALOG if e.name == tool)
        fields = msgspec.structs.fields(entry.args_type)
        for info in fields:
            field = info.name
            for value in WRONG_TYPE[_kind(tool, field)]:
                yield tool, f"{field}={value!r}", json.dumps({**base, field: value})
            for value in OUT_OF_RANGE.get(field, []):
                yield tool, f"{field}={value!r}", json.dumps({**base, field: value})
            if field in TEXT:
                for value in ("", "   ", "a\x00b", "bell\x07", "esc\x1b[0m"):
                    yield tool, f"{field}={value!r}", json.dumps({**base, field: value})
        for info in fields:
            if info.required:
                yield tool, f"missing {info.name}", json.dumps({k: v for k, v in base.items() if k != info.name})


async def _team(data: Path) -> tuple[Host, Any, list[Any]]:
    script = {"alpha": [{"text": "ready"}], "beta": [{"text": "ready"}]}
    host = await Host.open(data, "agent-teams", ScriptedModel.from_mapping(script))
    session = await host.create_session("lead")
    lead = host.start_agent(session, name="lead")
    team = _service(host)
    mates = []
    for name in ("alpha", "beta"):
        view = await team.spawn_teammate(lead, name=name, description=name, prompt=[text_block("wait")],
                                         context="fresh", provider="spawn")  # fmt: skip
        await host.quiesce()
        agent = host.agents.get(view.id)
        if agent is None:
            agent = host.start_agent(await host.resume_session(view.id), name=name, source="resume")
        mates.append(agent)
    await team.create_task(lead, subject="lead's", description="d")
    await team.create_task(lead, subject="alpha's", description="d")
    await team.update_task(mates[0], task_id="task-2", expected_revision=1, action="claim")
    return host, lead, mates


def _service(host: Host) -> Any:
    from dsh_team.api import TeamServiceAPI

    return host.service(TeamServiceAPI)


def _team_events(lead: Any) -> int:
    return sum(1 for event in lead.session.events if event.type.startswith("team/"))


async def _call(host: Host, lead: Any, agent: Any, tool: str, raw: str) -> list[str]:
    before = _team_events(lead)
    result = await host.tools.execute(agent, "call-r", tool, raw, AbortSignal())
    await lead.session.flush()
    problems = []
    if not result.is_error or result.error is None:
        problems.append(f"accepted: {result.content}")
    elif result.error.get("code") not in TYPED:
        problems.append(f"untyped error {result.error}")
    if _team_events(lead) != before:
        problems.append(f"{_team_events(lead) - before} Team events appended")
    return problems


def malformed_matrix(scratch: Path, *, limit: int | None = None) -> Figures:
    """Every malformed call of every tool, as the Lead and as a teammate (``limit``: the first cases only)."""
    figures = Figures("malformed arguments")

    async def body() -> None:
        host, lead, (alpha, _) = await _team(scratch / "malformed")
        try:
            cases = list(malformed_cases())
            for tool, label, raw in cases[:limit] if limit is not None else cases:
                for who, agent in (("lead", lead), ("alpha", alpha)):
                    figures.record(f"{who} {tool} {label}", await _call(host, lead, agent, tool, raw))
        finally:
            await host.close()

    asyncio.run(body())
    return figures


def impersonation_matrix(scratch: Path) -> Figures:
    """Lead-only operations by a teammate, stale and copied handles, siblings acting for others."""
    figures = Figures("impersonation")

    async def body() -> None:
        host, lead, (alpha, beta) = await _team(scratch / "impersonation")
        try:
            stale_alpha = alpha
            copied_lead = copy.copy(lead)
            plain = host.start_agent(await host.create_session("plain", parent_session="lead"), name="plain")
            plain.session.append("subagent/descriptor", {"version": 2, "mode": "continuable", "provider": "spawn"})
            lead_only = [
                ("spawn_teammate", BASELINE["spawn_teammate"], "TEAM_LEAD_REQUIRED"),
                ("interrupt_agent", {"target": "beta"}, "TEAM_LEAD_REQUIRED"),
                ("team_task_update", {"task_id": "task-1", "expected_revision": 1, "action": "reassign",
                                      "owner": "alpha"}, "TEAM_LEAD_REQUIRED"),  # fmt: skip
            ]
            for tool, args, code in lead_only:
                for who, agent in (("alpha", alpha), ("beta", beta)):
                    figures.record(f"{who} calls Lead-only {tool}", await _expect(host, lead, agent, tool, args, code))
            others = [
                ("team_task_update", {"task_id": "task-2", "expected_revision": 2, "action": "complete"},
                 "TEAM_TASK_UNAUTHORIZED"),
                ("team_task_update", {"task_id": "task-2", "expected_revision": 2, "action": "release"},
                 "TEAM_TASK_UNAUTHORIZED"),
                ("team_task_update", {"task_id": "task-2", "expected_revision": 2, "action": "claim"},
                 "TEAM_TASK_ALREADY_CLAIMED"),
                ("send_message", {"target": "beta", "message": "talking to myself"}, "TEAM_SELF_MESSAGE"),
            ]  # fmt: skip
            for tool, args, code in others:
                figures.record(f"beta acts for alpha: {tool} {args.get('action', '')}",
                               await _expect(host, lead, beta, tool, args, code))  # fmt: skip
            # Handles that are not the live member: a copy of the Lead, a non-member sibling.
            for who, agent in (("copied lead handle", copied_lead), ("non-member sibling", plain)):
                for tool, args in BASELINE.items():
                    figures.record(f"{who} {tool}", await _refused(host, lead, agent, tool, args))
            # A teammate's old handle after it went to disk and came back as a new object.
            await host.quiesce()
            await host.dispose_agent(stale_alpha)
            fresh = host.start_agent(await host.resume_session(alpha.id), name="alpha", source="resume")
            for tool, args in BASELINE.items():
                figures.record(f"stale alpha handle {tool}", await _refused(host, lead, stale_alpha, tool, args))
            figures.record("fresh alpha handle works", await _works(host, lead, fresh))
        finally:
            await host.close()

    asyncio.run(body())
    return figures


async def _expect(host: Host, lead: Any, agent: Any, tool: str, args: dict[str, Any], code: str) -> list[str]:
    problems = await _call(host, lead, agent, tool, json.dumps(args))
    result = await host.tools.execute(agent, "call-r", tool, json.dumps(args), AbortSignal())
    got = (result.error or {}).get("code")
    return problems + ([] if got == code else [f"code {got}, expected {code}"])


async def _refused(host: Host, lead: Any, agent: Any, tool: str, args: dict[str, Any]) -> list[str]:
    """The call is refused as no member (or as an unknown tool: the handle has no Team tools at all)."""
    before = _team_events(lead)
    result = await host.tools.execute(agent, "call-r", tool, json.dumps(args), AbortSignal())
    await lead.session.flush()
    got = (result.error or {}).get("code")
    problems = [] if got in ("TEAM_NOT_MEMBER", "UNKNOWN_TOOL") else [f"code {got}: {result.content}"]
    return problems + ([] if _team_events(lead) == before else ["Team events appended"])


async def _works(host: Host, lead: Any, agent: Any) -> list[str]:
    result = await host.tools.execute(agent, "call-r", "list_agents", "{}", AbortSignal())
    return [] if not result.is_error else [f"the live handle was refused: {result.error}"]

