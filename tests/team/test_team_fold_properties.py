"""Property checks of the fold over random (valid, invalid and foreign) event streams."""

from __future__ import annotations

from functools import reduce
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_team.core.fold import evolve, replay
from dsh_team.core.state import TeamState, initial_state
from host_spec.events import Event

from team_builders import TEAM, delivered, event, member, mode, queued, raw_event, task

IDS = st.sampled_from(["task-1", "task-2", "task-3", "task-x"])
TEAMS = st.sampled_from([TEAM, TEAM, TEAM, TEAM, "ancestor"])

TASKS = st.builds(
    lambda i, r, s, b, t: ("team/task", task(i, r, status=s, blocked_by=b, team_id=t)),
    IDS, st.integers(1, 3), st.sampled_from(["pending", "in_progress", "completed", "deleted"]),
    st.lists(IDS, max_size=2), TEAMS,
)  # fmt: skip
MEMBERS = st.builds(
    lambda i, n, p, t: ("team/member", member(i, n, p, team_id=t)),
    st.sampled_from(["m1", "m2"]), st.sampled_from(["alpha", "beta"]),
    st.sampled_from(["provisioning", "active", "failed"]), TEAMS,
)  # fmt: skip
MAIL = st.builds(
    lambda kind, i, target, t, index: (
        ("team/message/queued", queued(i, target, team_id=t, index=index))
        if kind == "q"
        else (f"team/message/{'delivered' if kind == 'd' else 'read'}", delivered(i, target, team_id=t))
    ),
    st.sampled_from(["q", "q", "d", "d", "r"]), st.sampled_from(["msg-1", "msg-2", "msg-3"]),
    st.sampled_from(["m1", "m2"]), TEAMS, st.sampled_from([None, None, 0, 1, 2, 3]),
)  # fmt: skip
OTHER = st.sampled_from(
    [
        ("team/mode", mode(False)),
        ("team/mode", mode(True)),
        ("turn/start", {"turn": 1}),
        ("team/task", {"version": 1, "team_id": TEAM}),
        ("team/task", {"version": 1, "team_id": "ancestor", "junk": 1}),
        ("team/member", b"{not json"),
    ]
)
STREAMS = st.lists(st.one_of(TASKS, TASKS, MEMBERS, MAIL, OTHER), max_size=30)


def events_of(items: list[tuple[str, Any]]) -> list[Event]:
    return [
        raw_event(seq, kind, payload) if isinstance(payload, bytes) else event(seq, kind, payload)
        for seq, (kind, payload) in enumerate(items, 1)
    ]


class Applied:
    """The mail records a stream applied, by kind: the naive model the mailbox is checked against."""

    def __init__(self) -> None:
        self.queued: dict[str, str] = {}  # message id -> target, every applied queued record
        self.delivered: set[str] = set()
        self.read: set[str] = set()

    def add(self, item: Event) -> None:
        body = msgspec.json.decode(item.data)
        if item.type == "team/message/queued":
            self.queued[body["message"]["id"]] = body["message"]["target_id"]
            self.delivered.discard(body["message"]["id"])  # a settled id queued again starts over
            self.read.discard(body["message"]["id"])
        elif item.type == "team/message/delivered":
            self.delivered.add(body["message_id"])
        elif item.type == "team/message/read":
            self.read.add(body["message_id"])


def check_indexes(state: TeamState, applied: Applied) -> None:
    """The incremental indexes equal a naive recomputation from the snapshots and applied mail records."""
    board = state.tasks
    live = {i for i, t in board.tasks.items() if t.status != "deleted"}
    assert set(board.live.keys()) == live
    for task_id in live:
        naive = {i for i in live if task_id in board.tasks[i].blocked_by}
        assert set(board.live_dependents(task_id)) == naive
    mail = state.mail
    open_ = {m for m in applied.queued if m not in applied.read}
    assert set(mail.messages.keys()) == open_  # a read message is settled: dropped
    for target in set(applied.queued.values()):
        naive_pending = {m for m in open_ if applied.queued[m] == target and m not in applied.delivered}
        assert {m.id for m in mail.pending_for(target)} == naive_pending
        naive_unread = {m for m in open_ if applied.queued[m] == target and m in applied.delivered}
        assert {m.id for m in mail.unread_for(target)} == naive_unread
    for message_id in applied.queued:
        assert mail.is_delivered(message_id) == (message_id in applied.delivered)
        assert mail.is_read(message_id) == (message_id in applied.read)
    assert {name: mid for mid, m in state.members.members.items() for name in [m.name]} == dict(state.members.names)


class TestFoldProperties:
    @settings(max_examples=300, deadline=None)
    @given(STREAMS)
    def test_replay_equals_stepwise_evolution(self, items: list[tuple[str, Any]]) -> None:
        """replay(events) == reduce(evolve); ignored events keep identity; failure is terminal."""
        events = events_of(items)
        state = initial_state(TEAM)
        applied = Applied()
        queued_records = 0
        for item in events:
            after = evolve(state, item)
            if after is not state and after.failure is None and item.type.startswith("team/message/"):
                applied.add(item)
                queued_records += item.type == "team/message/queued"
            if state.failure is not None:
                assert after is state
            elif after is state:
                assert item.type == "turn/start" or b"ancestor" in bytes(item.data)
            elif item.type != "team/mode" or after.failure is not None:
                assert after.position == item.seq
            check_indexes(after, applied)
            assert after.mail.next_index == queued_records
            state = after
        assert replay(events, TEAM) == state == reduce(evolve, events, initial_state(TEAM))
