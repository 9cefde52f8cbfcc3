"""Q1: turns delivered to the Lead that carried no Team change (goal 0; lower is better).

Idle pings cost real money: a Lead woken because "a member went idle" re-reads
the Team, learns nothing and waits again. dsh-team wakes the Lead only for a
durable change, or once with ``reason: "quiescent"`` when nothing can progress.

Measured on the real ``dsh run`` (scripted model, no key) of two teams, from the
Lead log alone:

* the demo (``host_spec/host/demo/team_demo.json``: a builder and a forked reviewer);
* three teammates in a task chain (``benchmarks/quiescence_team.json``) where the
  last one stops with its task in progress and one task is never claimed, so the
  run ends in a stall the Lead has to learn about.

A *delivery* is a moment the Team hands the Lead's model something to react to:
the start of a Lead turn after the first (a message or notice woke it), and each
``wait_agent`` result. A delivery *carried a change* when its input has a message
(a turn's new user messages), or a Team change (a roster, task, mail or
quiescence record: the fold's ``position`` moved) was committed while it was
pending: since the Lead's previous turn ended, or while the wait ran (a wait
with ``since`` also counts the changes its answer reports after ``since``).
"""

from __future__ import annotations

import bisect
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import attrs

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import report  # noqa: E402
from dsh_team.core.fold import evolve  # noqa: E402
from dsh_team.core.state import initial_state  # noqa: E402
from host_spec.events import Event, EventType  # noqa: E402
from host_spec.host.demo import PROMPT, SCRIPT  # noqa: E402
from host_spec.host.store.jsonl import JsonlStore  # noqa: E402
from host_spec.messages import message_text  # noqa: E402

HERE: Final = Path(__file__).resolve().parent
RUNS: Final = {
    "demo": (SCRIPT, PROMPT),
    "three teammates": (HERE / "quiescence_team.json", "Use an Agent Team of three to draft, review and publish."),
}
_WAIT: Final = "wait_agent"


@attrs.frozen
class Deliveries:
    """What the Team handed the Lead in one run.

    Attributes:
        total: Lead turns after the first, plus ``wait_agent`` results.
        idle: Those that carried no Team change.
        quiescent: ``wait_agent`` results with ``reason: "quiescent"``.
    """

    total: int
    idle: int
    quiescent: int


def _changes(events: Sequence[Event], team_id: str) -> list[int]:
    """Seqs of the records that moved the Team's position (the fold decides, nothing else)."""
    state = initial_state(team_id)
    seqs: list[int] = []
    for event in events:
        folded = evolve(state, event)
        if folded.position != state.position:
            seqs.append(event.seq)
        state = folded
    return seqs


def lead_deliveries(events: Sequence[Event], team_id: str) -> Deliveries:
    """Count the Lead's deliveries and the idle ones in its log (see the module docstring)."""
    changes = _changes(events, team_id)

    def changed(after: int, upto: int) -> bool:
        return bisect.bisect_right(changes, upto) > bisect.bisect_right(changes, after)

    total = idle = quiescent = 0
    turn_end = 0
    opening: tuple[int, bool] | None = None  # (turn/start seq, a message arrived) of a turn not yet answered
    waits: dict[str, tuple[int, int | None]] = {}  # call id -> (tool/call seq, since)
    for event in events:
        kind = event.type
        if kind == EventType.TURN_START and event.value().get("turn", 1) > 1:
            opening = (event.seq, False)
        elif kind == EventType.USER_MESSAGE and opening is not None:
            opening = (opening[0], True)
        elif kind == EventType.ASSISTANT_MESSAGE and opening is not None:
            total += 1
            idle += not (opening[1] or changed(turn_end, opening[0]))
            opening = None
        elif kind == EventType.TURN_END:
            turn_end = event.seq
        elif kind == EventType.TOOL_CALL and event.value().get("name") == _WAIT:
            value = event.value()
            since = json.loads(value.get("arguments") or "{}").get("since")
            waits[value["call_id"]] = (event.seq, since)
        elif kind == EventType.TOOL_RESULT and event.value().get("call_id") in waits:
            value = event.value()
            start, since = waits.pop(value["call_id"])
            answer = _answer(value)
            reported = since is not None and isinstance(answer.get("position"), int) and answer["position"] > since
            total += 1
            idle += not (changed(start, event.seq) or reported)
            quiescent += answer.get("reason") == "quiescent"
    return Deliveries(total=total, idle=idle, quiescent=quiescent)


def _answer(value: dict[str, Any]) -> dict[str, Any]:
    try:
        found = json.loads(message_text(value.get("content") or []))
    except ValueError:
        return {}  # an error result: it reports no position
    return found if isinstance(found, dict) else {}


def run_team(script: Path, prompt: str, data_dir: Path) -> Deliveries:
    """One real ``dsh run`` of ``script`` into ``data_dir``; the Lead's deliveries."""
    workspace = data_dir / "workspace"
    workspace.mkdir(parents=True)
    command = [sys.executable, "-m", "host_spec.host.cli.main", "run", "--profile", "agent-teams",
               "--model", f"scripted:{script}", "--data-dir", str(data_dir), "--workspace", str(workspace), prompt]
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    store = JsonlStore(data_dir)
    (root,) = [sid for sid in store.list_ids() if store.read(sid)[0].parent_session is None]
    return lead_deliveries(store.read(root)[1], root)


def run() -> list[tuple[str, float, float]]:
    idle = 0
    with tempfile.TemporaryDirectory(prefix="dsh-q1-") as scratch:
        for index, (name, (script, prompt)) in enumerate(RUNS.items()):
            found = run_team(script, prompt, Path(scratch) / str(index))
            idle += found.idle
            print(f"quiescence: {name}: {found.total} deliveries to the Lead, {found.idle} without a Team change, "
                  f"{found.quiescent} quiescent wake(s)")
    return [("Q1", idle, 0)]


if __name__ == "__main__":
    for bench_id, value, goal in run():
        report(bench_id, value, goal)
