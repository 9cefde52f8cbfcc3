"""Cost benchmarks: what charging a model call and checking a budget cost the host.

U1: microseconds per charged model call on a real host with JSONL persistence: a
    teammate's ``assistant/message`` with usage is observed, the task it owns in
    progress is read, the ``team/cost`` charge is appended to the Lead log, folded
    and flushed (group-committed). Goal: at most 200 us.
U2: microseconds per budget check (``dsh_agent_pre_step`` with limits set, none
    reached), asked before every model call. Goal: at most 50 us.

Why these goals: a model call takes hundreds of milliseconds, so both together
stay under a thousandth of one even on a loaded machine.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.team_setup import add_member, teams_of  # noqa: E402
from host_spec.events import EventType  # noqa: E402
from host_spec.host.app import Host  # noqa: E402
from host_spec.host.models.scripted import ScriptedModel  # noqa: E402

CALLS = 4_000
CHECKS = 20_000
REPLY = {"turn": 1, "step": 1, "content": [{"type": "text", "text": "done " * 40}],
         "usage": {"input_tokens": 1200, "output_tokens": 80}}  # fmt: skip


async def _measure(directory: Path) -> tuple[float, float]:
    host = await Host.open(directory, None, ScriptedModel.from_mapping({}))
    host.plugins.load("dsh-team", {"budget": {"member_tokens": 10**12, "team_calls": 10**9}})
    try:
        session = await host.create_session("lead")
        root = host.start_agent(session, name="lead")
        members = [await add_member(host, root, index) for index in range(2)]
        teams = teams_of(host)
        task = await teams.create_task(root, subject="bench", description="charged")
        await teams.update_task(members[0], task_id=task.id, expected_revision=1, action="claim")
        started = time.perf_counter()
        for index in range(CALLS):
            members[index % 2].session.append(EventType.ASSISTANT_MESSAGE, REPLY)
            if index % 50 == 49:
                await asyncio.sleep(0)  # the charges of the last 50 calls are appended here
        await host.quiesce()
        per_call = (time.perf_counter() - started) / CALLS * 1e6
        ledger = teams.costs.ledger(teams.journals.get(root.session))
        assert ledger.team.calls == CALLS and ledger.task(task.id).calls == CALLS // 2
        agent: Any = members[1]
        started = time.perf_counter()
        for _ in range(CHECKS):
            teams.costs.agent_pre_step(agent)
        per_check = (time.perf_counter() - started) / CHECKS * 1e6
        return per_call, per_check
    finally:
        await host.close()


def run() -> list[tuple[str, float, float]]:
    with tempfile.TemporaryDirectory(prefix="dsh-bench-cost-") as directory:
        per_call, per_check = asyncio.run(_measure(Path(directory)))
    print(f"cost: {per_call:.1f} us per charged model call (observe, attribute, append, fold, flush)")
    print(f"cost: {per_check:.1f} us per budget check before a model call")
    return [("U1", per_call, 200), ("U2", per_check, 50)]


if __name__ == "__main__":
    for bench_id, value, goal in run():
        print(f"{bench_id} {value:.2f} {goal:g}")
