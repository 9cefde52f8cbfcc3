"""Q1 end to end: real ``dsh run``s deliver no turn to the Lead without a Team change.

The counter of :mod:`benchmarks.bench_quiescence` is checked first on hand-made
Lead logs (so a regression cannot hide behind a counter that counts nothing), then
on the demo and on the three-teammate stall, through the real CLI.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from e2e_demo_kit import REPO

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.bench_quiescence import RUNS, Deliveries, lead_deliveries, run_team  # noqa: E402
from host_spec.events import Event, json_encode  # noqa: E402

import msgspec  # noqa: E402

LEAD = "lead"


class Log:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, kind: str, payload: dict[str, Any]) -> int:
        seq = len(self.events) + 1
        self.events.append(Event(seq=seq, time=seq, type=kind, data=msgspec.Raw(json_encode(payload))))
        return seq

    def turn(self, number: int, message: bool = False) -> None:
        self.add("turn/start", {"turn": number})
        if message:
            self.add("user/message", {"id": f"m{number}", "content": [{"type": "text", "text": "hi"}]})
        self.add("assistant/message", {"turn": number, "step": 1, "content": [{"type": "text", "text": "ok"}]})

    def end(self, number: int) -> None:
        self.add("turn/end", {"turn": number, "reason": {"kind": "completed"}})

    def task(self, revision: int = 1) -> None:
        self.add("team/task", {"version": 2, "team_id": LEAD, "task": {
            "id": "task-1", "revision": revision, "subject": "s", "description": "d",
            "status": "pending", "blocked_by": [], "write_scopes": []}})

    def wait(self, call: str, answer: dict[str, Any], *, since: int | None = None, during: bool = False) -> None:
        arguments = {"timeout_ms": 30000, **({"since": since} if since is not None else {})}
        self.add("tool/call", {"call_id": call, "name": "wait_agent", "arguments": json.dumps(arguments)})
        if during:
            self.task(2)
        self.add("tool/result", {"call_id": call, "name": "wait_agent",
                                 "content": [{"type": "text", "text": json.dumps(answer)}]})


class TestCounter:
    def test_turns_carry_a_change_through_a_message_or_a_record_since_the_last_turn(self) -> None:
        """Turn 1 is the user's; a turn with a message or after a record counts as carrying a change."""
        log = Log()
        log.turn(1)
        log.end(1)
        log.task()
        log.turn(2)  # the record since turn 1 ended
        log.end(2)
        log.turn(3, message=True)
        log.end(3)
        log.turn(4)  # nothing happened since turn 3: an idle delivery
        assert lead_deliveries(log.events, LEAD) == Deliveries(total=3, idle=1, quiescent=0)

    def test_waits_carry_a_change_made_while_waiting_or_reported_after_since(self) -> None:
        log = Log()
        log.turn(1)
        log.wait("a", {"timed_out": False, "position": 4}, during=True)
        log.wait("b", {"timed_out": True, "position": 4})  # a timeout with nothing new: idle
        log.wait("c", {"timed_out": False, "position": 4}, since=1)  # reports a change after since
        log.wait("d", {"timed_out": False, "position": 4, "reason": "quiescent"}, since=4)  # the same answer again
        log.add("tool/result", {"call_id": "unknown", "name": "wait_agent", "content": []})  # not a wait of this log
        assert lead_deliveries(log.events, LEAD) == Deliveries(total=4, idle=2, quiescent=1)

    def test_an_error_result_reports_no_position(self) -> None:
        log = Log()
        log.turn(1)
        log.add("tool/call", {"call_id": "a", "name": "wait_agent", "arguments": '{"since": 0}'})
        log.add("tool/result", {"call_id": "a", "name": "wait_agent", "is_error": True,
                                "content": [{"type": "text", "text": "TEAM_WAIT_ABORTED: stop"}]})
        assert lead_deliveries(log.events, LEAD) == Deliveries(total=1, idle=1, quiescent=0)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(RUNS))
def test_real_runs_deliver_no_idle_turn(tmp_path: Path, name: str) -> None:
    """The demo and the three-teammate stall: every delivery carries a change; the stall is told once."""
    script, prompt = RUNS[name]
    found = run_team(script, prompt, tmp_path / "data")
    assert found.idle == 0 and found.total >= 2
    assert found.quiescent == (1 if name == "three teammates" else 0)
