"""C1 and B1: a long session stays inside its model's window; the Team brief stays small.

C1: one agent runs 300 scripted steps (each an echo call carrying ~400 bytes) on a
    4000-token window with compaction at 0.8. Measured: the largest request any step
    sent, as a share of the window (system prompt and tool schemas included, bytes / 4,
    the host's own estimate rule). Goal: at most 1.0 (no request outgrows the window,
    while the log keeps all 300 steps).
B1: the worst-case Team brief in UTF-8 bytes: a Lead with 8 teammates owning
    ``MAX_TASKS`` + 2 open tasks with subjects at the cut length. It is paid on every
    step of a compacted or resumed member. Goal: at most 1200 bytes (a fifth of M1).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import report  # noqa: E402
from dsh_team.api import TeamServiceAPI  # noqa: E402
from dsh_team.roster.roster import MemberView  # noqa: E402
from dsh_team.views.brief import MAX_TASKS, SUBJECT_MAX, team_brief  # noqa: E402
from host_spec.events import EventType, json_encode  # noqa: E402
from host_spec.host.agents.compaction import BYTES_PER_TOKEN  # noqa: E402
from host_spec.host.agents.registry import AgentRegistry, AgentRuntime  # noqa: E402
from host_spec.host.agents.prompt import PromptRegistry  # noqa: E402
from host_spec.host.agents.tools import ToolRegistry  # noqa: E402
from host_spec.host.app import Host  # noqa: E402
from host_spec.host.models.adapter import tool_definitions  # noqa: E402
from host_spec.host.models.scripted import ScriptedModel  # noqa: E402
from host_spec.host.store.session import Session  # noqa: E402
from host_spec.events import SessionHeader  # noqa: E402
from host_spec.messages import user_message  # noqa: E402
from host_spec.records import ToolSpec  # noqa: E402

WINDOW = 4000
STEPS = 300
BRIEF_GOAL = 1200


class _Echo(msgspec.Struct, forbid_unknown_fields=True):
    text: str


async def _echo(args: _Echo, call: Any) -> dict[str, str]:
    return {"echoed": args.text}


async def long_session() -> tuple[float, int, int, float]:
    """(largest request / window, compactions, events kept, seconds) of the C1 run."""
    script = {"w": [*({"tool_calls": [{"name": "echo", "arguments": {"text": f"[m{i}] " + "x" * 400}}]}
                      for i in range(STEPS)), {"text": "done"}]}
    model = ScriptedModel.from_mapping(script, context_window=WINDOW)
    tools = ToolRegistry()
    tools.register(ToolSpec(name="echo", description="Echo the text back.", args_type=_Echo,
                            result_type=dict[str, str], execute=_echo))
    registry = AgentRegistry(AgentRuntime(None, tools, PromptRegistry(), model))
    agent = registry.create(Session(SessionHeader(id="w", created_at=0)), name="w")
    started = time.perf_counter()
    agent.followup(user_message("[first] a long job"))
    await agent.when_idle()
    elapsed = time.perf_counter() - started
    fixed = len(json_encode(tool_definitions(list(tools.visible(agent)))))
    largest = max((fixed + len(r.system.encode()) + len(json_encode(list(r.messages)))) // BYTES_PER_TOKEN
                  for r in model.requests if r.purpose == "step")
    compactions = sum(e.type == EventType.CONTEXT_COMPACTED for e in agent.session.events)
    return largest / WINDOW, compactions, len(agent.session.events), elapsed


async def worst_brief() -> str:
    with tempfile.TemporaryDirectory() as data:
        return await _worst_brief(Path(data))


async def _worst_brief(data: Path) -> str:
    host = await Host.open(data, None, ScriptedModel.from_mapping({}))
    try:
        host.plugins.load("dsh-team", {})
        team = host.service(TeamServiceAPI)
        lead = host.start_agent(await host.create_session("lead"), name="lead")
        for index in range(MAX_TASKS + 2):
            await team.create_task(lead, subject=f"{index} " + "s" * SUBJECT_MAX, description="d")
        for task in team.list_tasks(lead):
            await team.update_task(lead, task_id=task.id, expected_revision=task.revision, action="claim")
        teammates = [MemberView(id=f"m{i}", name=f"teammate-number-{i}", role="teammate", status="provisioning")
                     for i in range(8)]
        return team_brief(team.journals.get(lead.session).state, lead.id, "lead", teammates)  # type: ignore[attr-defined]
    finally:
        await host.close()


def run() -> list[tuple[str, float, float]]:
    share, compactions, events, seconds = asyncio.run(long_session())
    print(f"compaction: {STEPS} steps on a {WINDOW}-token window: {compactions} compactions, {events} events kept, "
          f"largest request {share:.2f} of the window ({seconds:.1f}s)")
    brief = asyncio.run(worst_brief())
    print(f"brief: worst case {len(brief.encode())} B ({MAX_TASKS + 2} open tasks, 8 teammates)")
    return [("C1", share, 1.0), ("B1", len(brief.encode()), BRIEF_GOAL)]


if __name__ == "__main__":
    for bench_id, value, goal in run():
        report(bench_id, value, goal)
