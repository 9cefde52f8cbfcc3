"""Quiescence in the fold, against a naive oracle: "may the Team record quiescence now, and what is stalled?"

Random valid operation sequences (members provisioned and settled, tasks created,
claimed, released, completed and deleted, mail queued, delivered and read, mode
toggles, quiescence attempts) are applied both to a real Lead log, folded by the
one fold, and to a naive model of plain dicts that recomputes the answer from
scratch after every step. The fold must accept a quiescence record exactly when
the oracle says the Team is durably quiet and changed since the last record, with
exactly the oracle's stalled list, and refuse it otherwise with the rule that says why.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_team.core.fold import evolve
from dsh_team.core.quiescence import durably_quiet, may_record, stalled_work
from dsh_team.core.records import StalledTask, TeamStalled
from dsh_team.core.fold_failure import FoldRule
from dsh_team.core.state import TeamState

from team_builders import TEAM, Log, delivered, member, mode, queued, task


def quiescent(stalled: dict[str, Any]) -> dict[str, Any]:
    return {"version": 2, "team_id": TEAM, "stalled": stalled}


def stalled_payload(stalled: TeamStalled) -> dict[str, Any]:
    return {
        "in_progress": [{"id": t.id, "owner_id": t.owner_id} for t in stalled.in_progress],
        "ready": list(stalled.ready),
        "failed": list(stalled.failed),
    }


class Naive:
    """The Team as plain dicts: every answer recomputed from scratch."""

    def __init__(self) -> None:
        self.members: dict[str, str] = {}  # id -> phase, creation order
        self.tasks: dict[str, dict[str, Any]] = {}  # id -> {revision, status, owner, blocked_by}, creation order
        self.messages: dict[str, str] = {}  # id -> "pending" | "unread" | "read"
        self.targets: dict[str, str] = {}
        self.changed = False  # some roster, task or mail change happened at all
        self.quiet = False  # the last change is an accepted quiescence record

    def moved(self) -> None:
        self.changed, self.quiet = True, False

    def durably_quiet(self) -> bool:
        mail_open = any(state != "read" for state in self.messages.values())
        return not mail_open and "provisioning" not in self.members.values()

    def may_record(self, waiting: bool) -> bool:
        return self.durably_quiet() and not self.quiet and (waiting or self.changed)

    def stalled(self) -> TeamStalled:
        live = {i: t for i, t in self.tasks.items() if t["status"] != "deleted"}
        in_progress = tuple(StalledTask(i, t["owner"]) for i, t in live.items() if t["status"] == "in_progress")
        ready = tuple(
            i for i, t in live.items()
            if t["status"] == "pending" and all(self.tasks[b]["status"] == "completed" for b in t["blocked_by"])
        )
        failed = tuple(i for i, phase in self.members.items() if phase == "failed")
        return TeamStalled(in_progress=in_progress, ready=ready, failed=failed)

    def dependents(self, task_id: str) -> list[str]:
        return [i for i, t in self.tasks.items() if t["status"] != "deleted" and task_id in t["blocked_by"]]


def step(data: Any, naive: Naive, log: Log) -> None:
    """Draw one valid operation for the current naive state and apply it to both sides."""
    kinds = ["member", "task", "mode", "quiet"]
    if any(p == "provisioning" for p in naive.members.values()):
        kinds.append("settle")
    if naive.tasks:
        kinds += ["move", "move"]
    targets = [TEAM, *(i for i, p in naive.members.items() if p == "active")]
    kinds.append("send")
    if any(s != "read" for s in naive.messages.values()):
        kinds += ["mail", "mail"]
    kind = data.draw(st.sampled_from(kinds))
    if kind == "member":
        member_id = f"m{len(naive.members) + 1}"
        naive.members[member_id] = "provisioning"
        log.add("team/member", member(member_id, f"name-{member_id}", "provisioning"))
        naive.moved()
    elif kind == "settle":
        member_id = data.draw(st.sampled_from([i for i, p in naive.members.items() if p == "provisioning"]))
        phase = data.draw(st.sampled_from(["active", "failed"]))
        naive.members[member_id] = phase
        log.add("team/member", member(member_id, f"name-{member_id}", phase))
        naive.moved()
    elif kind == "task":
        task_id = f"task-{len(naive.tasks) + 1}"
        live = [i for i, t in naive.tasks.items() if t["status"] != "deleted"]
        blocked_by = data.draw(st.lists(st.sampled_from(live), unique=True, max_size=2)) if live else []
        naive.tasks[task_id] = {"revision": 1, "status": "pending", "owner": None, "blocked_by": blocked_by}
        log.add("team/task", task(task_id, 1, blocked_by=blocked_by))
        naive.moved()
    elif kind == "move":
        task_id = data.draw(st.sampled_from(list(naive.tasks)))
        current = naive.tasks[task_id]
        if current["status"] == "deleted":
            return
        choices = {"pending": ["claim", "delete"], "in_progress": ["complete", "release"], "completed": ["reopen"]}
        action = data.draw(st.sampled_from(choices[current["status"]]))
        if action == "delete" and naive.dependents(task_id):
            return
        status, owner = {
            "claim": ("in_progress", data.draw(st.sampled_from(targets))),
            "delete": ("deleted", None),
            "complete": ("completed", current["owner"]),
            "release": ("pending", None),
            "reopen": ("pending", None),
        }[action]
        current.update(revision=current["revision"] + 1, status=status, owner=owner)
        log.add("team/task", task(task_id, current["revision"], status=status, owner_id=owner,
                                  blocked_by=current["blocked_by"]))
        naive.moved()
    elif kind == "send":
        message_id = f"msg-{len(naive.messages) + 1}"
        target = data.draw(st.sampled_from(targets))
        naive.messages[message_id], naive.targets[message_id] = "pending", target
        log.add("team/message/queued", queued(message_id, target))
        naive.moved()
    elif kind == "mail":
        message_id = data.draw(st.sampled_from([i for i, s in naive.messages.items() if s != "read"]))
        if naive.messages[message_id] == "pending":
            naive.messages[message_id] = "unread"
            log.add("team/message/delivered", delivered(message_id, naive.targets[message_id]))
            naive.moved()
        else:
            naive.messages[message_id] = "read"  # a receipt is no Team change
            log.add("team/message/read", delivered(message_id, naive.targets[message_id]))
    elif kind == "mode":
        log.add("team/mode", mode(data.draw(st.booleans())))  # no Team change either
    else:
        attempt_quiescence(data, naive, log)


def attempt_quiescence(data: Any, naive: Naive, log: Log) -> None:
    """Try a quiescence record (sometimes with a wrong stalled list); the fold must agree with the oracle."""
    state = log.fold()
    expected = naive.stalled()
    wrong = data.draw(st.booleans()) and data.draw(st.integers(0, 9)) == 0
    payload = stalled_payload(expected)
    if wrong:
        payload["ready"] = [*payload["ready"], "task-404"]
    probe = Log()
    probe.events = list(log.events)
    candidate = evolve(state, probe.add("team/quiescent", quiescent(payload)))
    if naive.quiet:
        assert candidate.failure is not None and candidate.failure.rule == FoldRule.QUIESCENCE_REPEATED
    elif not naive.durably_quiet():
        assert candidate.failure is not None and candidate.failure.rule == FoldRule.QUIESCENCE_WHILE_BUSY
    elif wrong:
        assert candidate.failure is not None and candidate.failure.rule == FoldRule.QUIESCENCE_STALLED_MISMATCH
    else:
        assert candidate.failure is None and candidate.quiet and candidate.quiescence is not None
        assert candidate.quiescence.stalled == expected and candidate.position == len(probe.events)
        log.events = probe.events
        naive.quiet = True


def check(naive: Naive, state: TeamState) -> None:
    assert state.failure is None
    assert durably_quiet(state) == naive.durably_quiet()
    assert state.quiet == naive.quiet
    for waiting in (False, True):
        assert may_record(state, waiting=waiting) == naive.may_record(waiting)
    assert stalled_work(state) == naive.stalled()


class TestAgainstTheNaiveOracle:
    @settings(max_examples=200, deadline=None)
    @given(st.data())
    def test_random_operation_sequences(self, data: Any) -> None:
        """After every operation the fold's quiescence answers equal the oracle's, and a record obeys them."""
        naive, log = Naive(), Log()
        check(naive, log.fold())
        for _ in range(data.draw(st.integers(1, 40))):
            step(data, naive, log)
            check(naive, log.fold())


class TestRules:
    def test_a_quiet_team_needs_a_change_before_the_next_record(self) -> None:
        """Receipts and mode records are no change; a task record is."""
        log = Log()
        log.task("task-1")
        log.add("team/quiescent", quiescent({"ready": ["task-1"]}))
        assert log.fold().quiet
        log.mode(False)
        again = evolve(log.fold(), log.add("team/quiescent", quiescent({"ready": ["task-1"]})))
        assert again.failure is not None and again.failure.rule == FoldRule.QUIESCENCE_REPEATED
        log.events.pop()
        log.task("task-1", 2, status="in_progress", owner_id=TEAM)
        state = log.fold()
        assert not state.quiet and state.quiescence is not None and state.quiescence.seq == 2
        assert may_record(state, waiting=False)

    def test_an_empty_team_is_reported_only_to_a_waiter(self) -> None:
        """A root that never used the Team records nothing on its own; a waiter there learns it is alone."""
        state = Log().fold()
        assert not may_record(state, waiting=False) and may_record(state, waiting=True)
        assert stalled_work(state) == TeamStalled()

    def test_a_failed_stream_never_records(self) -> None:
        log = Log()
        log.task("task-1", 2)  # must begin at revision 1
        assert log.fold().failure is not None and not may_record(log.fold(), waiting=True)
