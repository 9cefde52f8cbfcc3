"""A checkpoint plus its tail folds to exactly the state of a full fold, for every fold; a bad one is never used.

Random Team histories (the Team fold's streams, controls, permission, cost and
side records, valid and broken, of this Team and another) are cut at a random
seq; the service's live folds capture a checkpoint there, it is stored and read
back, and a new activation of the whole log starts from it. Every fold must equal
the same fold run over the whole log from scratch (the naive oracle), and so must
the invariant's. A checkpoint that is corrupt, stale (beyond the log, another
event at its seq, another header) or of another schema is ignored with one
warning, and the folds are the full folds.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from dsh_team.checkpoint import NAME, SCHEMA, LiveFolds, TeamCheckpoint, decode_checkpoint, encode_checkpoint, load_checked
from dsh_team.controls.ledger import LiveControls, replay_controls
from dsh_team.core.fold import replay
from dsh_team.cost.ledger import LiveLedgers, replay_costs
from dsh_team.cost.records import BudgetRecord, ChargeRecord, Spend
from dsh_team.log.journals import Journals
from dsh_team.permissions.ledger import LivePermissions, replay_permissions
from dsh_team.permissions.records import AnsweredRecord, RequestedRecord
from dsh_team.log.member_records import fold_latest
from dsh_team.roster.roles import ROLE_RECORDS, RoleBook, RoleRecord, RoleSpec
from dsh_team.roster.shutdown import SHUTDOWN_RECORDS, ShutdownBook, ShutdownRecord
from dsh_team.worktrees.merge import MergeBook
from dsh_team.worktrees.records import MERGE_RECORDS, WORKTREE_RECORDS, WorktreeRecord
from dsh_team.worktrees.room import WorktreeBook
from dsh_team_invariant.invariant import TeamStreamInvariant
from host_spec.events import Event, SessionHeader
from host_spec.host.store.session import Session
from host_spec.testing import MemoryCheckpoints

from team_builders import TEAM, event, raw_event, task
from test_controls_fold import RECORD as CONTROL_RECORD
from test_controls_fold import KINDS as CONTROL_KINDS
from test_team_fold_properties import MAIL, MEMBERS, OTHER, TASKS

HEADER = SessionHeader(id=TEAM, created_at=7)
MEMBER_IDS = st.sampled_from(["m1", "m2"])
TEAMS = st.sampled_from([TEAM, TEAM, TEAM, "ancestor"])

CONTROLS = CONTROL_RECORD.map(lambda record: (CONTROL_KINDS[type(record)], record))
COSTS = st.one_of(
    st.builds(
        lambda member, seq, calls, task_id, team: (
            "team/cost",
            ChargeRecord(1, team, member, seq, Spend(calls, 10 * calls, calls, 0), task_id),
        ),
        MEMBER_IDS, st.integers(1, 6), st.integers(0, 3), st.sampled_from([None, "task-1"]), TEAMS,
    ),
    st.builds(
        lambda kind, value, member: ("team/budget", BudgetRecord(1, TEAM, kind, value, value, member)),
        st.sampled_from(["tokens", "calls"]), st.integers(1, 3), st.sampled_from([None, "m1"]),
    ),
)  # fmt: skip
PERMISSIONS = st.one_of(
    st.builds(
        lambda ask: ("permission/requested",
                     RequestedRecord(1, TEAM, f"ask-{ask}", f"key-{ask}", "alpha", "m1", "bash", "{}", "default", 9)),
        st.integers(1, 3),
    ),
    st.builds(
        lambda ask, decision: ("permission/answered", AnsweredRecord(1, TEAM, f"ask-{ask}", decision, "user")),
        st.integers(1, 3), st.sampled_from(["allow", "deny"]),
    ),
)  # fmt: skip
SIDE = st.one_of(
    st.builds(
        lambda member, role, team: ("team/role", RoleRecord(1, team, member, role, RoleSpec(description=role))),
        MEMBER_IDS, st.sampled_from(["reviewer", "tester"]), TEAMS,
    ),
    st.builds(
        lambda member, phase, deadline: ("team/shutdown", ShutdownRecord(1, TEAM, member, phase, deadline)),
        MEMBER_IDS, st.sampled_from(["requested", "approved", "declined", "stopped", "released"]),
        st.sampled_from([None, 1_700_000_000_000]),
    ),
    st.builds(
        lambda member: ("team/worktree", WorktreeRecord(1, TEAM, member, f"n-{member}", "/repo", f"/wt/{member}",
                                                        f"dsh/{TEAM}/{member}")),
        MEMBER_IDS,
    ),
    st.just(("team/role", b'{"version": 1, "team_id": "lead"}')),  # unreadable: logged and skipped
)  # fmt: skip
HISTORIES = st.lists(
    st.one_of(TASKS, TASKS, MEMBERS, MAIL, OTHER, CONTROLS, COSTS, PERMISSIONS, SIDE), min_size=1, max_size=40
)
#: A prefix that makes the Team fold non-empty, so every cut point has a checkpoint to take.
START = [("team/task", task("task-1"))]


def events_of(items: list[tuple[str, Any]]) -> list[Event]:
    return [
        raw_event(seq, kind, payload) if isinstance(payload, bytes) else event(seq, kind, msgspec.to_builtins(payload))
        for seq, (kind, payload) in enumerate(items, 1)
    ]


def live_folds() -> LiveFolds:
    return LiveFolds(
        Journals(), LiveControls(), LivePermissions(), LiveLedgers(), RoleBook(), ShutdownBook(), WorktreeBook(),
        MergeBook(),
    )


def activation(events: list[Event], header: SessionHeader = HEADER) -> Session:
    """One activation of the log (every event durable, as after a resume)."""
    return Session(header, events=list(events), durable_seq=len(events))


def every_fold(folds: LiveFolds, session: Session) -> dict[str, Any]:
    return {
        "team": folds.journals.get(session).state,
        "controls": folds.controls.state(session),
        "permissions": folds.permissions.state(session),
        "costs": folds.costs.ledger(session),
        "roles": dict(folds.roles.latest(session)),
        "shutdowns": dict(folds.shutdowns.latest(session)),
        "worktrees": dict(folds.worktrees.latest(session)),
        "merges": dict(folds.merges.latest(session)),
    }


def full_folds(events: list[Event]) -> dict[str, Any]:
    """The oracle: each fold's whole-log replay, written independently of the live folds."""
    return {
        "team": replay(events, TEAM),
        "controls": replay_controls(events, TEAM),
        "permissions": replay_permissions(events, TEAM),
        "costs": replay_costs(events, TEAM),
        "roles": fold_latest(ROLE_RECORDS, events, TEAM, {}),
        "shutdowns": fold_latest(SHUTDOWN_RECORDS, events, TEAM, {}),
        "worktrees": fold_latest(WORKTREE_RECORDS, events, TEAM, {}),
        "merges": fold_latest(MERGE_RECORDS, events, TEAM, {}),
    }


def saved(events: list[Event], cut: int) -> MemoryCheckpoints:
    """The checkpoint a live activation of ``events[:cut]`` saves, stored (through its bytes) and returned."""
    checkpoint = live_folds().capture(activation(events[:cut]))
    assert checkpoint is not None and checkpoint.seq == cut
    store = MemoryCheckpoints()
    store.save(TEAM, NAME, cut, encode_checkpoint(checkpoint))
    return store


def resumed(store: MemoryCheckpoints, events: list[Event], header: SessionHeader = HEADER) -> tuple[bool, dict[str, Any]]:
    """A new activation of ``events`` started from the stored checkpoint: (was it used, every fold)."""
    session = activation(events, header)
    folds = live_folds()
    checkpoint = load_checked(store, header, session.events)
    if checkpoint is not None:
        folds.restore(session, checkpoint)
    return checkpoint is not None, every_fold(folds, session)


class TestIdentity:
    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(HISTORIES, st.data())
    def test_checkpoint_plus_tail_equals_the_full_fold_for_every_fold(self, items: list[Any], data: Any) -> None:
        events = events_of(START + items)
        cut = data.draw(st.integers(1, len(events)), label="cut")
        used, folds = resumed(saved(events, cut), events)
        assert used
        assert folds == full_folds(events)

    @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(HISTORIES, st.data())
    def test_the_invariant_judges_from_the_same_state(self, items: list[Any], data: Any) -> None:
        events = events_of(START + items)
        cut = data.draw(st.integers(1, len(events)), label="cut")
        store = saved(events, cut)
        invariant = TeamStreamInvariant(store)
        session = activation(events)
        assert invariant.state(session) == replay(events, TEAM)

    def test_both_readers_start_from_the_checkpoint_and_fold_only_the_tail(self) -> None:
        """A checkpoint whose mark fits but whose state was altered shows through: nothing before its seq is read."""
        events = _history()
        checkpoint = decode_checkpoint(saved(events, 3).load(TEAM, NAME)[1])  # type: ignore[index]
        altered = msgspec.structs.replace(checkpoint.team, mode=False)
        store = MemoryCheckpoints()
        store.save(TEAM, NAME, 3, encode_checkpoint(msgspec.structs.replace(checkpoint, team=altered)))
        session = activation(events)
        assert TeamStreamInvariant(store).state(session).mode is False
        folds = live_folds()
        restored = load_checked(store, HEADER, session.events)
        assert restored is not None
        folds.restore(session, restored)
        assert folds.journals.get(session).state.mode is False
        assert folds.journals.get(session).state.tasks.listed() == replay(events, TEAM).tasks.listed()

    def test_a_fold_carried_in_this_process_from_later_wins_over_an_older_checkpoint(self) -> None:
        events = _history()
        journals = Journals()
        first = activation(events)
        journals.get(first)
        journals.drop(first)  # carried at the end of the log
        checkpoint = decode_checkpoint(saved(events, 2).load(TEAM, NAME)[1])  # type: ignore[index]
        altered = msgspec.structs.replace(checkpoint.team, mode=False)
        assert journals.seed(activation(events), 2, altered).state == replay(events, TEAM)
        assert journals.seed(activation(events), 2, altered).state.mode is False  # nothing carried now: it is used

    @settings(max_examples=100, deadline=None)
    @given(HISTORIES)
    def test_a_round_trip_of_the_bytes_is_exact(self, items: list[Any]) -> None:
        events = events_of(START + items)
        session = activation(events)
        folds = live_folds()
        folds.journals.get(session).state.tasks.listed()  # a filled memo is not written
        checkpoint = folds.capture(session)
        assert checkpoint is not None
        assert decode_checkpoint(encode_checkpoint(checkpoint)) == checkpoint


def _history() -> list[Event]:
    return events_of(
        START
        + [("team/task", task("task-2")), ("team/shutdown", ShutdownRecord(1, TEAM, "m1", "requested")),
           ("team/task", task("task-3"))]
    )  # fmt: skip


def _ignored(store: MemoryCheckpoints, events: list[Event], header: SessionHeader = HEADER) -> str:
    """Resume from ``store``: the folds must be the full folds, and one warning must say why."""
    with capture_logs() as logs:
        used, folds = resumed(store, events, header)
    assert not used
    assert folds == full_folds(events)
    warnings = [entry for entry in logs if entry["log_level"] == "warning"]
    assert [entry["event"] for entry in warnings] == ["team.checkpoint_ignored"]
    return str(warnings[0]["reason"])


class TestDetection:
    def test_a_corrupted_payload_is_ignored(self) -> None:
        events = _history()
        store = MemoryCheckpoints()
        payload = saved(events, 2).load(TEAM, NAME)[1]  # type: ignore[index]
        store.save(TEAM, NAME, 2, payload[: len(payload) // 2])
        assert _ignored(store, events).startswith("unreadable")

    def test_a_payload_of_another_shape_is_ignored(self) -> None:
        store = MemoryCheckpoints()
        store.save(TEAM, NAME, 2, msgspec.json.encode({"schema": SCHEMA, "team_id": TEAM}))
        assert _ignored(store, _history()).startswith("unreadable")

    def test_another_schema_is_ignored(self) -> None:
        events = _history()
        checkpoint = decode_checkpoint(saved(events, 2).load(TEAM, NAME)[1])  # type: ignore[index]
        store = MemoryCheckpoints()
        store.save(TEAM, NAME, 2, encode_checkpoint(msgspec.structs.replace(checkpoint, schema=SCHEMA + 1)))
        assert "schema" in _ignored(store, events)

    def test_a_checkpoint_beyond_the_log_is_ignored(self) -> None:
        """A crash dropped the unflushed tail after the checkpoint was taken (or the log was truncated)."""
        events = _history()
        assert "holds 3 events" in _ignored(saved(events, 4), events[:3])

    def test_another_event_at_its_seq_is_ignored(self) -> None:
        """The tail was dropped and refilled by another run: the event at the checkpoint's seq differs."""
        events = _history()
        store = saved(events, 3)
        refilled = [*events[:2], event(3, "team/task", msgspec.to_builtins(task("task-9")))]
        assert "differs at seq 3" in _ignored(store, refilled)

    def test_a_log_recreated_under_the_same_id_is_ignored(self) -> None:
        events = _history()
        assert "differs at seq 2" in _ignored(saved(events, 2), events, SessionHeader(id=TEAM, created_at=8))

    def test_a_seq_the_store_and_the_payload_disagree_on_is_ignored(self) -> None:
        events = _history()
        store = MemoryCheckpoints()
        store.save(TEAM, NAME, 3, saved(events, 2).load(TEAM, NAME)[1])  # type: ignore[index]
        assert "store says 3" in _ignored(store, events)

    def test_another_teams_checkpoint_is_ignored(self) -> None:
        events = _history()
        checkpoint = decode_checkpoint(saved(events, 2).load(TEAM, NAME)[1])  # type: ignore[index]
        store = MemoryCheckpoints()
        store.save(TEAM, NAME, 2, encode_checkpoint(msgspec.structs.replace(checkpoint, team_id="other")))
        assert "checkpoint of 'other'" in _ignored(store, events)

    def test_a_checkpoint_of_no_event_is_ignored(self) -> None:
        events = _history()
        checkpoint = decode_checkpoint(saved(events, 2).load(TEAM, NAME)[1])  # type: ignore[index]
        store = MemoryCheckpoints()
        store.save(TEAM, NAME, 0, encode_checkpoint(msgspec.structs.replace(checkpoint, seq=0)))
        assert "covers no event" in _ignored(store, events)

    def test_an_unreadable_store_is_ignored(self) -> None:
        class Broken(MemoryCheckpoints):
            def load(self, session_id: str, name: str) -> tuple[int, bytes] | None:
                raise OSError(5, "Input/output error")

        assert "unreadable" in _ignored(Broken(), _history())

    def test_the_invariant_reports_an_ignored_checkpoint_once_and_folds_in_full(self) -> None:
        events = _history()
        invariant = TeamStreamInvariant(saved(events, 4))
        with capture_logs() as logs:
            state = invariant.state(activation(events[:3]))
        assert state == replay(events[:3], TEAM)
        assert [entry["event"] for entry in logs if entry["log_level"] == "warning"] == ["team.checkpoint_ignored"]
        assert TeamStreamInvariant(MemoryCheckpoints()).state(activation(events)) == replay(events, TEAM)

    def test_the_invariant_hands_its_checkpoint_over_once(self) -> None:
        events = _history()
        invariant = TeamStreamInvariant(saved(events, 3))
        session = activation(events)
        handed = invariant.checkpoint(session)  # seeds the fold on first use
        assert handed is not None and handed.seq == 3
        assert invariant.checkpoint(session) is None
        assert invariant.state(session) == replay(events, TEAM)

    def test_nothing_saved_or_no_store_says_nothing(self) -> None:
        with capture_logs() as logs:
            assert load_checked(MemoryCheckpoints(), HEADER, _history()) is None
            assert load_checked(None, HEADER, _history()) is None
            assert load_checked(MemoryCheckpoints(), HEADER, []) is None
        assert logs == []

    def test_a_non_team_session_has_no_checkpoint(self) -> None:
        assert live_folds().capture(activation(events_of([("turn/start", {"turn": 1})]))) is None

    def test_an_unknown_type_cannot_be_encoded(self) -> None:
        events = _history()
        checkpoint = live_folds().capture(activation(events))
        assert isinstance(checkpoint, TeamCheckpoint)
        with pytest.raises(TypeError):
            encode_checkpoint(msgspec.structs.replace(checkpoint, roles={"m1": object()}))  # type: ignore[dict-item]
