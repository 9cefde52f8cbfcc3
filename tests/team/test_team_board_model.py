"""Model-based checks: the board decisions + fold never diverge from a naive model.

The model below re-states the board rules in the most direct way (dicts, a whole-graph DFS on
every change) and shares no code with ``dsh_team``. Hypothesis drives both with
random members, actions, stale revisions and dependency lists.
"""

from __future__ import annotations

from functools import reduce
from typing import Any

import msgspec
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from dsh_team.errors import TeamError
from dsh_team.core.fold import evolve, replay
from dsh_team.core.actor import Actor
from dsh_team.core.board import decide_create, decide_update
from dsh_team.core.task_view import list_views

from team_builders import TEAM, BoardHarness

ACTORS = {TEAM: Actor(TEAM, "lead"), "w1": Actor("w1", "teammate"), "w2": Actor("w2", "teammate")}
ACTIVE = {"alpha": "w1", "beta": "w2"}
MAX_TASKS = 24  # high enough that creates rarely hit the limit and steps build real graphs
_UNIQUE = st.lists(st.integers(0, 19), max_size=3, unique=True)
BLOCKERS = st.one_of(_UNIQUE, _UNIQUE, _UNIQUE, st.lists(st.integers(0, 19), max_size=3), st.none())
SCOPES = st.none() | st.lists(st.sampled_from(["src", "src/a", "./src/", "docs", "docs/x/"]), max_size=2)


class Rejected(Exception):
    def __init__(self, code: str) -> None:
        self.code = code


def _scopes(values: list[str]) -> list[str]:
    result: list[str] = []
    for value in values:
        value = value.removeprefix("./").rstrip("/")
        if value not in result:
            result.append(value)
    return result


#: The optional fields each action reads (any other sent field is refused).
TAKES = {"edit": ("subject", "description", "write_scopes"), "set_dependencies": ("blocked_by",), "reassign": ("owner",)}


class Model:
    """A direct, slow restatement of the board rules."""

    def __init__(self) -> None:
        self.tasks: dict[str, dict[str, Any]] = {}
        self.next = 1

    def live(self) -> list[dict[str, Any]]:
        return [task for task in self.tasks.values() if task["status"] != "deleted"]

    def done(self, task: dict[str, Any]) -> bool:
        return all(self.tasks[b]["status"] == "completed" for b in task["blocked_by"])

    def ready(self, task: dict[str, Any]) -> bool:
        return task["status"] == "pending" and self.done(task)

    def blockers(self, task_id: str, blockers: list[str]) -> list[str]:
        for index, blocker in enumerate(blockers):
            if blocker == task_id:
                raise Rejected("TEAM_TASK_DEPENDENCY_CYCLE")
            if blocker in blockers[:index]:
                raise Rejected("TEAM_INVALID_ARGUMENT")
            if blocker not in self.tasks or self.tasks[blocker]["status"] == "deleted":
                raise Rejected("TEAM_TASK_NOT_FOUND")
        return list(blockers)

    def reaching(self, task_id: str) -> list[str]:
        """Live tasks with a dependency path to ``task_id`` (an edge back from it closes a cycle)."""
        found: list[str] = []
        frontier = [task_id]
        while frontier:
            node = frontier.pop()
            for task in self.live():
                if node in task["blocked_by"] and task["id"] not in found:
                    found.append(task["id"])
                    frontier.append(task["id"])
        return found

    def acyclic_with(self, candidate: dict[str, Any]) -> bool:
        graph = {t["id"]: t["blocked_by"] for t in self.live()}
        graph[candidate["id"]] = candidate["blocked_by"]
        state: dict[str, int] = {}

        def visit(node: str) -> bool:
            if state.get(node) == 1:
                return False
            if state.get(node) == 2:
                return True
            state[node] = 1
            ok = all(visit(b) for b in graph[node])
            state[node] = 2
            return ok

        return all(visit(node) for node in graph)

    def create(self, blocked_by: list[str] | None, scopes: list[str] | None) -> dict[str, Any]:
        if len(self.live()) >= MAX_TASKS:
            raise Rejected("TEAM_TASK_LIMIT")
        task_id = f"task-{self.next}"
        candidate = {
            "id": task_id, "revision": 1, "subject": "s", "description": "d", "status": "pending",
            "blocked_by": self.blockers(task_id, blocked_by or []), "write_scopes": _scopes(scopes or []), "owner_id": None,
        }  # fmt: skip
        self.tasks[task_id] = candidate
        self.next += 1
        return candidate

    def update(self, actor: str, task_id: str, revision: int, action: str, **fields: Any) -> dict[str, Any]:
        current = self.tasks.get(task_id)
        if current is None:
            raise Rejected("TEAM_TASK_NOT_FOUND")
        if current["revision"] != revision:
            raise Rejected("TEAM_TASK_STALE_REVISION")
        if current["status"] == "deleted":
            raise Rejected("TEAM_TASK_DELETED")
        if any(value is not None and name not in TAKES.get(action, ()) for name, value in fields.items()):
            raise Rejected("TEAM_INVALID_ARGUMENT")  # a field the action does not read
        lead = actor == TEAM
        allowed = lead or current["owner_id"] == actor
        new = {**current, "revision": revision + 1}
        status = current["status"]
        if action == "claim":
            if current["owner_id"] not in (None, actor):
                raise Rejected("TEAM_TASK_ALREADY_CLAIMED")
            if status != "pending":  # one's own in-progress task, or a completed one
                raise Rejected("TEAM_TASK_INVALID_TRANSITION")
            if not self.ready(current):
                raise Rejected("TEAM_TASK_BLOCKED")
            new.update(status="in_progress", owner_id=actor)
        elif action == "reassign":
            if not lead:
                raise Rejected("TEAM_LEAD_REQUIRED")
            if status not in ("pending", "in_progress"):
                raise Rejected("TEAM_TASK_INVALID_TRANSITION")
            owner = (fields["owner"] or "").strip()
            if not owner:
                new.update(status="pending", owner_id=None)
            else:
                if not self.done(current):
                    raise Rejected("TEAM_TASK_BLOCKED")
                if owner != "lead" and owner not in ACTIVE:
                    raise Rejected("TEAM_MEMBER_NOT_FOUND")
                new.update(status="in_progress", owner_id=TEAM if owner == "lead" else ACTIVE[owner])
        elif action in ("release", "edit", "set_dependencies", "complete", "reopen", "delete"):
            if not allowed:
                raise Rejected("TEAM_TASK_UNAUTHORIZED")
            needs = {"release": "in_progress", "complete": "in_progress", "reopen": "completed"}.get(action)
            if needs is not None and status != needs:
                raise Rejected("TEAM_TASK_INVALID_TRANSITION")
            if action in ("release", "reopen"):
                new.update(status="pending", owner_id=None)
            elif action == "complete":
                new.update(status="completed")
            elif action == "edit":
                if fields["subject"] is None and fields["write_scopes"] is None:
                    raise Rejected("TEAM_INVALID_ARGUMENT")
                if fields["subject"] is not None:
                    new["subject"] = fields["subject"]
                if fields["write_scopes"] is not None:
                    new["write_scopes"] = _scopes(fields["write_scopes"])
            elif action == "set_dependencies":
                if fields["blocked_by"] is None:
                    raise Rejected("TEAM_INVALID_ARGUMENT")
                new["blocked_by"] = self.blockers(task_id, fields["blocked_by"])
            else:
                if any(task_id in t["blocked_by"] for t in self.live() if t["id"] != task_id):
                    raise Rejected("TEAM_TASK_HAS_DEPENDENTS")
                new["status"] = "deleted"
        else:
            raise Rejected("TEAM_INVALID_ARGUMENT")
        if new["status"] != "deleted" and not self.acyclic_with(new):
            raise Rejected("TEAM_TASK_DEPENDENCY_CYCLE")
        self.tasks[task_id] = new
        return new


def as_dict(snapshot: Any) -> dict[str, Any]:
    value = msgspec.structs.asdict(snapshot)
    value["blocked_by"] = list(value["blocked_by"])
    value["write_scopes"] = list(value["write_scopes"])
    assert value.pop("checks") == ()  # the model creates no gated tasks: checks stay empty
    return value


@settings(max_examples=100, stateful_step_count=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
class BoardMachine(RuleBasedStateMachine):
    """Random board traffic from three members against the naive model."""

    def __init__(self) -> None:
        super().__init__()
        self.harness = BoardHarness(max_tasks=MAX_TASKS)
        self.harness.add_member("w1", "alpha")
        self.harness.add_member("w2", "beta")
        self.harness.add_member("w3", "gamma", "provisioning")
        self.model = Model()

    def _ids(self, picks: list[int] | None) -> list[str] | None:
        """Map blocker picks to mostly existing ids (pick 19 names a missing task)."""
        existing = list(self.model.tasks)
        if picks is None:
            return None
        return [existing[p % len(existing)] if existing and p < 19 else "task-404" for p in picks]

    def _run(self, expected: Any, actual: Any) -> None:
        try:
            want = expected()
        except Rejected as rejected:
            try:
                actual()
            except TeamError as error:
                assert error.code == rejected.code, (error.code, error.message, rejected.code)
                return
            raise AssertionError(f"expected {rejected.code}")
        snapshot = actual()
        assert as_dict(snapshot) == want
        self.harness.commit_task(snapshot)

    @initialize(count=st.integers(0, 4))
    def seed_board(self, count: int) -> None:
        for _ in range(count):
            self.create(TEAM, None, None)

    @rule(actor=st.sampled_from(sorted(ACTORS)), blocked_by=BLOCKERS, scopes=SCOPES)
    def create(self, actor: str, blocked_by: list[int] | None, scopes: list[str] | None) -> None:
        blockers = self._ids(blocked_by)
        state = self.harness.state
        self._run(
            lambda: self.model.create(blockers, scopes),
            lambda: decide_create(
                state, ACTORS[actor], subject="s", description="d", blocked_by=blockers,
                write_scopes=scopes, max_tasks=MAX_TASKS,
            ),
        )  # fmt: skip

    @rule(
        actor=st.sampled_from([*sorted(ACTORS), "owner", "owner"]),
        pick=st.integers(0, 19),
        skew=st.sampled_from([0, 0, 0, -1, 1]),
        action=st.sampled_from(["claim", "claim", "complete", "complete", "release", "edit", "set_dependencies", "complete", "reopen", "reassign", "delete", "bogus"]),
        subject=st.none() | st.just("renamed"),
        blocked_by=BLOCKERS,
        scopes=SCOPES,
        owner=st.sampled_from([None, "", " ", "lead", "alpha", " beta ", "gamma", "nobody"]),
        stray=st.sampled_from([False, False, False, True]),
    )  # fmt: skip
    def update(self, actor: str, pick: int, skew: int, action: str, subject: str | None,
               blocked_by: list[int] | None, scopes: list[str] | None, owner: str | None, stray: bool) -> None:  # fmt: skip
        existing = list(self.model.tasks)
        task_id = existing[pick % len(existing)] if existing and pick < 19 else "task-404"
        known = self.model.tasks.get(task_id)
        if actor == "owner":
            actor = (known or {}).get("owner_id") or TEAM
        revision = max(1, (known["revision"] if known else 1) + skew)
        fields = {"subject": subject, "blocked_by": self._ids(blocked_by), "write_scopes": scopes, "owner": owner}
        if not stray:  # mostly only the fields the action reads; sometimes stray ones, which are refused
            fields = {name: value if name in TAKES.get(action, ()) else None for name, value in fields.items()}
        state = self.harness.state
        self._run(
            lambda: self.model.update(actor, task_id, revision, action, **fields),
            lambda: decide_update(
                state, ACTORS[actor], task_id=task_id, expected_revision=revision, action=action, **fields
            ),
        )

    @rule(pick=st.integers(0, 99), back=st.integers(0, 99), extra=_UNIQUE, position=st.integers(0, 3))
    def propose_back_edge(self, pick: int, back: int, extra: list[int], position: int) -> None:
        """The Lead sets a task's blockers to include a task that already depends on it: a multi-task cycle.

        The back edge sits at a random position among other blockers, so the cycle
        may leave through any added blocker and run through any branch of the graph.
        """
        live = [t for t in self.model.live() if self.model.reaching(t["id"])]
        if not live:
            return
        task = live[pick % len(live)]
        reaching = self.model.reaching(task["id"])
        blockers = [b for b in self._ids(extra) or [] if b != task["id"]]
        blockers.insert(min(position, len(blockers)), reaching[back % len(reaching)])
        fields = {"subject": None, "blocked_by": blockers, "write_scopes": None, "owner": None}
        state = self.harness.state
        self._run(
            lambda: self.model.update(TEAM, task["id"], task["revision"], "set_dependencies", **fields),
            lambda: decide_update(
                state, ACTORS[TEAM], task_id=task["id"], expected_revision=task["revision"],
                action="set_dependencies", **fields,
            ),
        )  # fmt: skip

    @invariant()
    def board_matches_model(self) -> None:
        state = self.harness.state
        assert state.failure is None
        live = self.model.live()
        views = list_views(state)
        assert [v.id for v in views] == [t["id"] for t in live]
        assert [v.ready for v in views] == [self.model.ready(t) for t in live]
        assert state.tasks.next_task_number == self.model.next
        for task in live:
            expected = tuple(t["id"] for t in live if task["id"] in t["blocked_by"])
            assert state.tasks.live_dependents(task["id"]) == expected

    @invariant()
    def replay_equals_the_incremental_state(self) -> None:
        events = self.harness.log.events
        assert replay(events, TEAM) == self.harness.state
        assert reduce(evolve, events, replay((), TEAM)) == self.harness.state


TestBoardMachine = BoardMachine.TestCase
