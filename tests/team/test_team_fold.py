"""The pure Team fold: every replay rule of §3.2, Team mode, and copy-on-write."""

from __future__ import annotations

import immutables
import pytest

from dsh_team.core.fold import evolve, replay
from dsh_team.core.records import decode_payload
from dsh_team.core.state import initial_state, mode_enabled
from dsh_team.core.tombstones import restore

from team_builders import TEAM, Log, event, member, raw_event, task

INVALID_TASK = "persisted Agent Teams team/task payload is invalid"


class TestIgnoredEvents:
    def test_non_team_event_returns_the_same_state(self) -> None:
        """A turn event leaves the state object untouched."""
        state = initial_state(TEAM)
        assert evolve(state, event(1, "turn/start", {"turn": 1})) is state

    def test_foreign_records_are_ignored_even_when_malformed(self) -> None:
        """Records of another Team are skipped whatever their version or shape (cases 15, 16)."""
        state = initial_state(TEAM)
        foreign = [
            event(1, "team/task", task("task-1", team_id="ancestor")),
            event(2, "team/task", task("task-1", 5, team_id="ancestor", version=1)),
            event(3, "team/member", {"version": 2, "team_id": "ancestor", "member": {"id": 3}}),
            event(4, "team/message/queued", {"version": 9, "team_id": "other", "bogus": True}),
            event(5, "team/mode", {"version": 2, "team_id": "other", "enabled": "yes"}),
        ]
        for item in foreign:
            assert evolve(state, item) is state

    def test_inherited_records_do_not_leak_into_the_current_team(self) -> None:
        """A fork's inherited ancestor task is ignored; its own task-7 moves allocation to 8 (case 2)."""
        log = Log()
        log.task("task-1", team_id="ancestor")
        log.task("task-7")
        state = log.fold()
        assert list(state.tasks.tasks.keys()) == ["task-7"]
        assert state.tasks.next_task_number == 8
        assert state.position == 2


class TestFailure:
    def test_unreadable_selector_is_an_invalid_payload(self) -> None:
        """A record whose selector cannot be read fails the stream."""
        for data in (b'{"version": 2, "team_id": 1}', b"not json", b"[]"):
            state = evolve(initial_state(TEAM), raw_event(4, "team/task", data))
            assert state.failure.message == INVALID_TASK
            assert state.position == 4

    @pytest.mark.parametrize(
        "payload",
        [
            {**task("task-1"), "extra": True},
            task("task-1", status="nope"),
            {"version": 2, "team_id": TEAM, "task": {**task("task-1")["task"], "revision": "1"}},
            {"version": 2, "team_id": TEAM},
        ],
    )
    def test_current_version_payloads_are_validated(self, payload: dict[str, object]) -> None:
        """Wrong field types, extra keys and missing bodies fail with the invalid-payload text (case 9)."""
        assert evolve(initial_state(TEAM), event(1, "team/task", payload)).failure.message == INVALID_TASK

    def test_unsupported_versions_fail_and_freeze_the_state(self) -> None:
        """Version 0 (or 3) records of this Team fail; later valid events are ignored."""
        log = Log()
        log.task("task-1")
        log.task("task-2", version=0)
        log.task("task-3")
        state = replay(log.events, TEAM)
        assert state.failure.message == "unsupported Agent Teams event version 0"
        assert (state.failure.rule, state.failure.seq) == ("unsupported-version", 2)
        assert list(state.tasks.tasks.keys()) == ["task-1"]
        assert evolve(state, log.events[2]) is state
        malformed_v3 = evolve(initial_state(TEAM), event(1, "team/task", {"version": 3, "team_id": TEAM}))
        assert malformed_v3.failure.message == "unsupported Agent Teams event version 3"

    def test_failure_is_a_new_state_with_the_last_valid_collections(self) -> None:
        """Entering failure keeps members, tasks, mail and mode by identity (case 18)."""
        log = Log()
        log.member("m1", "worker")
        log.task("task-1")
        log.queued("msg-1", "m1")
        log.mode(True)
        good = log.fold()
        failed = evolve(good, event(9, "team/task", task("task-1", 5)))
        assert failed is not good
        assert failed.failure.message == 'team task "task-1" revision is not contiguous (5 after 1)'
        assert (failed.members, failed.tasks, failed.mail, failed.mode) == (good.members, good.tasks, good.mail, True)
        assert failed.members is good.members and failed.tasks is good.tasks and failed.mail is good.mail
        assert failed.position == 9

    def test_replay_stops_at_the_first_failure(self) -> None:
        """Replay returns the failed state without folding further events."""
        log = Log()
        log.task("task-1", 2)
        log.add_raw("team/task", b"garbage")
        state = log.fold()
        assert state.failure.message == 'team task "task-1" must begin at revision 1'
        assert state.position == 1


class TestMembers:
    def test_lifecycle_provisioning_then_one_terminal_edge(self) -> None:
        """A member begins provisioning and settles once; the record keeps its roster slot."""
        log = Log()
        log.member("m1", "alpha")
        log.member("m2", "beta")
        log.member("m1", "alpha", "active", description="changed description is allowed")
        state = log.fold()
        assert [m.name for m in state.members.listed()] == ["alpha", "beta"]
        assert state.members.by_name("alpha").phase == "active"  # type: ignore[union-attr]
        assert state.members.by_name("gamma") is None

    @pytest.mark.parametrize(
        ("records", "failure"),
        [
            ([member("m1", "alpha", "active")], 'team member "m1" must begin provisioning'),
            (
                [member("m1", "alpha"), member("m1", "alpha", "active", provider="fork")],
                'team member "m1" changed immutable identity fields',
            ),
            (
                [member("m1", "alpha"), member("m1", "alpha", "failed", context="fork")],
                'team member "m1" changed immutable identity fields',
            ),
            (
                [member("m1", "alpha"), member("m1", "alpha", "active"), member("m1", "alpha", "failed")],
                'team member "m1" has an invalid active -> failed transition',
            ),
            (
                [member("m1", "alpha"), member("m1", "alpha", "provisioning")],
                'team member "m1" has an invalid provisioning -> provisioning transition',
            ),
            ([member("m1", "alpha"), member("m2", "alpha")], 'team member name "alpha" is reused by another member'),
            (
                [member("m1", "alpha"), member("m1", "other", "active")],
                'team member "m1" changed immutable identity fields',
            ),
        ],
    )
    def test_identity_and_lifecycle_rules(self, records: list[dict[str, object]], failure: str) -> None:
        """Each broken roster rule names its member (case 3)."""
        log = Log()
        for record in records:
            log.add("team/member", record)
        assert log.fold().failure.message == failure

    def test_failed_members_keep_their_error(self) -> None:
        """A failed terminal record keeps its error text."""
        log = Log()
        log.member("m1", "alpha")
        log.member("m1", "alpha", "failed", error="provider missing")
        assert log.fold().members.members["m1"].error == "provider missing"


class TestTasks:
    def test_revisions_are_contiguous(self) -> None:
        """A new id starts at revision 1 and each later record is exactly one more (case 4)."""
        log = Log()
        log.task("task-1")
        log.task("task-1", 2, status="in_progress", owner_id="m1")
        log.task("task-1", 3, status="completed", owner_id="m1")
        assert log.fold().tasks.tasks["task-1"].revision == 3
        log.task("task-1", 3)
        assert log.fold().failure.message == 'team task "task-1" revision is not contiguous (3 after 3)'

    def test_new_id_must_begin_at_revision_one(self) -> None:
        """An unseen id at revision 2 fails."""
        log = Log()
        log.task("task-4", 2)
        assert log.fold().failure.message == 'team task "task-4" must begin at revision 1'

    @pytest.mark.parametrize(
        ("records", "failure"),
        [
            ([task("task-1", blocked_by=["task-9"])], 'blocker task "task-9" for "task-1" is missing or deleted'),
            ([task("task-1", blocked_by=["task-1"])], 'team task "task-1" cannot block itself'),
            (
                [task("task-1"), task("task-2", blocked_by=["task-1", "task-1"])],
                'team task "task-2" repeats blocker "task-1"',
            ),
            (
                [task("task-1"), task("task-2", blocked_by=["task-1"]), task("task-3", blocked_by=["task-2"]),
                 task("task-1", 2, blocked_by=["task-3"])],
                "task dependency cycle includes task-1 -> task-3 -> task-2 -> task-1",
            ),
            (
                [task("task-1"), task("task-2", blocked_by=["task-1"]), task("task-1", 2, status="deleted")],
                'blocker task "task-1" for "task-2" is missing or deleted',
            ),
            (
                [task("task-1"), task("task-1", 2, status="deleted"), task("task-2", blocked_by=["task-1"])],
                'blocker task "task-1" for "task-2" is missing or deleted',
            ),
        ],
    )  # fmt: skip
    def test_every_invalid_dependency_relation_fails(self, records: list[dict[str, object]], failure: str) -> None:
        """Missing, self, repeated, cyclic and deleted-blocker relations fail the stream (case 5)."""
        log = Log()
        for record in records:
            log.add("team/task", record)
        assert log.fold().failure.message == failure

    def test_dependency_edits_keep_reverse_edges_exact(self) -> None:
        """Changing, dropping and reviving blockers keeps the dependents map in step."""
        log = Log()
        for number in (1, 2, 3):
            log.task(f"task-{number}")
        log.task("task-3", 2, blocked_by=["task-1", "task-2"])
        log.task("task-4", blocked_by=["task-1"])
        state = log.fold()
        assert state.tasks.live_dependents("task-1") == ("task-3", "task-4")
        log.task("task-3", 3, blocked_by=["task-2"])
        log.task("task-4", 2, status="deleted", blocked_by=["task-1"])
        state = log.fold()
        assert state.tasks.live_dependents("task-1") == ()
        assert "task-1" not in state.tasks.dependents
        log.task("task-1", 2, status="deleted")
        log.task("task-1", 3, status="pending")
        log.task("task-4", 3, status="pending", blocked_by=["task-1", "task-3"])
        state = log.fold()
        assert state.failure is None
        assert state.tasks.live_dependents("task-1") == ("task-4",)
        assert [t.id for t in state.tasks.listed()] == ["task-1", "task-2", "task-3", "task-4"]

    def test_cycle_search_visits_shared_ancestors_once(self) -> None:
        """Adding an edge over a diamond of blockers is accepted and keeps both reverse edges."""
        log = Log()
        log.task("task-1")
        log.task("task-2", blocked_by=["task-1"])
        log.task("task-3", blocked_by=["task-1"])
        log.task("task-4", blocked_by=["task-2", "task-3"])
        log.task("task-5")
        log.task("task-5", 2, blocked_by=["task-4"])
        log.task("task-5", 3, blocked_by=["task-4", "task-1"])
        state = log.fold()
        assert state.failure is None
        assert state.tasks.live_dependents("task-1") == ("task-2", "task-3", "task-5")
        assert state.tasks.live_dependents("task-4") == ("task-5",)

    def test_deleted_tasks_stay_as_tombstones(self) -> None:
        """A deleted task leaves the listing and the board keeps only its tombstone; the log keeps its snapshot."""
        log = Log()
        log.task("task-1", owner_id="member-1")
        log.task("task-2")
        log.task("task-1", 2, status="deleted", owner_id="member-1")
        last = log.task("task-1", 3, status="deleted", subject="still a tombstone", owner_id="member-1")
        state = log.fold()
        assert [t.id for t in state.tasks.listed()] == ["task-2"]
        kept = state.tasks.tasks["task-1"]
        assert (kept.id, kept.revision, kept.status, kept.owner_id) == ("task-1", 3, "deleted", "member-1")
        assert (kept.subject, kept.description, kept.blocked_by, kept.write_scopes) == ("", "", (), ())
        assert state.changes.tasks["task-1"] == last.seq
        restored = restore(state, kept, log.events)
        assert restored.subject == "still a tombstone" and restored == decode_payload("team/task", last.data).task
        assert restore(state, state.tasks.tasks["task-2"], log.events) is state.tasks.tasks["task-2"]
        assert state.tasks.next_task_number == 3
        assert len(state.tasks.live) == 1

    def test_a_tombstone_of_an_older_record_restores_upcast(self) -> None:
        """A task deleted by a version-1 record restores as the fold read it (upcast)."""
        log = Log()
        log.task("task-1", version=1)
        log.task("task-1", 2, status="deleted", subject="old", version=1)
        state = log.fold()
        assert state.failure is None
        restored = restore(state, state.tasks.tasks["task-1"], log.events)
        assert (restored.subject, restored.status, restored.revision) == ("old", "deleted", 2)

    def test_a_new_task_may_be_born_deleted(self) -> None:
        """Replay does not re-validate transitions: a revision-1 tombstone is accepted unlisted."""
        log = Log()
        log.task("task-5", status="deleted", blocked_by=["task-404"])
        state = log.fold()
        assert state.failure is None and state.tasks.listed() == () and state.tasks.next_task_number == 6

    def test_nonstandard_ids_do_not_move_allocation(self) -> None:
        """Branded ids such as ``task-x`` or ``task-007`` are legal and leave numbering alone (case 6)."""
        log = Log()
        log.task("task-3")
        log.task("task-x")
        log.task("task-007")
        log.task("task-2")
        state = log.fold()
        assert state.failure is None and state.tasks.next_task_number == 4

    def test_numeric_id_outside_the_safe_range_is_invalid(self) -> None:
        """``task-9007199254740992`` fails payload validation (case 7)."""
        log = Log()
        log.task("task-9007199254740992")
        assert log.fold().failure.message == INVALID_TASK

    def test_largest_safe_id_pins_allocation(self) -> None:
        """After ``task-(2**53-1)`` the next number stays there so creation cannot wrap."""
        log = Log()
        log.task("task-9007199254740991")
        assert log.fold().tasks.next_task_number == 9007199254740991


class TestMailbox:
    def test_queue_and_acknowledgement(self) -> None:
        """Queued messages stay pending per target in queue order until delivered."""
        log = Log()
        log.queued("msg-1", "m1")
        log.queued("msg-2", "m2")
        log.queued("msg-3", "m1")
        state = log.fold()
        assert [m.id for m in state.mail.pending_for("m1")] == ["msg-1", "msg-3"]
        assert [m.id for m in state.mail.all_pending()] == ["msg-1", "msg-2", "msg-3"]
        log.delivered("msg-1", "m1")
        log.delivered("msg-2", "m2")
        state = log.fold()
        assert state.mail.pending_count("m1") == 1 and state.mail.pending_count("m2") == 0
        assert state.mail.pending_for("m2") == ()
        assert [state.mail.is_delivered(i) for i in ("msg-1", "msg-2", "msg-3")] == [True, True, False]
        assert state.mail.message("msg-4") is None and state.mail.message("msg-3").target_id == "m1"
        assert "m2" not in state.mail.pending and state.mail.next_index == 3

    def test_a_read_message_is_settled_and_dropped(self) -> None:
        """The mailbox holds open messages only: a read one leaves it (body and all), its status stays ``read``."""
        log = Log()
        log.queued("msg-1", "m1", index=0)
        log.queued("msg-2", "m1", index=1)
        log.delivered("msg-1", "m1")
        log.read("msg-1", "m1")
        mail = log.fold().mail
        assert set(mail.messages) == {"msg-2"} and mail.message("msg-1") is None
        assert (mail.status("msg-1"), mail.status("msg-2")) == ("read", "queued")
        assert mail.is_delivered("msg-1") and mail.is_read("msg-1") and not mail.is_read("msg-2")
        assert mail.next_index == 2 and mail.legacy == immutables.Map() and mail.read_count("m1") == 1

    @pytest.mark.parametrize(
        ("steps", "failure"),
        [
            ([("q", "msg-1", "m1"), ("q", "msg-1", "m1")], 'team message "msg-1" was queued twice'),
            ([("q", "msg-1", "m1"), ("d", "msg-1", "m1"), ("r", "msg-1", "m1"), ("q", "msg-1", "m1")],
             'team message "msg-1" was queued twice'),  # an index-less id is remembered after it settles
            ([("d", "msg-1", "m1")], 'team message "msg-1" was delivered before queueing (or after it was read)'),
            ([("q", "msg-1", "m1"), ("d", "msg-1", "m1"), ("r", "msg-1", "m1"), ("d", "msg-1", "m1")],
             'team message "msg-1" was delivered before queueing (or after it was read)'),
            ([("q", "msg-1", "m1"), ("d", "msg-1", "m2")], 'team message "msg-1" target changed'),
            ([("q", "msg-1", "m1"), ("d", "msg-1", "m1"), ("d", "msg-1", "m1")], 'team message "msg-1" was delivered twice'),
            ([("q", "msg-1", "m1"), ("q", "msg-2", "m1"), ("d", "msg-1", "m1"), ("d", "msg-1", "m1")],
             'team message "msg-1" was delivered twice'),
        ],
    )  # fmt: skip
    def test_queue_and_acknowledgement_relations(self, steps: list[tuple[str, str, str]], failure: str) -> None:
        """Duplicate queueing, early, retargeted and repeated acknowledgements fail (case 8)."""
        log = Log()
        for kind, message_id, target in steps:
            {"q": log.queued, "d": log.delivered, "r": log.read}[kind](message_id, target)
        assert log.fold().failure.message == failure

    @pytest.mark.parametrize(
        ("steps", "rule"),
        [
            ([("msg-1", 0), ("msg-1", 0)], "message-queued-twice"),  # the same record appended twice
            ([("msg-1", 0), ("msg-2", 1), ("msg-1", 0)], "message-queued-twice"),
            ([("msg-1", 0), ("msg-1", 1)], "message-queued-twice"),  # an open id, even at the next index
            ([("msg-1", None), ("msg-1", 1)], "message-queued-twice"),  # an older record's id
            ([("msg-1", 0), ("msg-2", 0)], "message-queued-twice"),  # a stale index
            ([("msg-1", 1)], "message-index-skipped"),
            ([("msg-1", 0), ("msg-2", 2)], "message-index-skipped"),
        ],
    )  # fmt: skip
    def test_a_queue_index_that_is_not_the_next_fails(self, steps: list[tuple[str, int | None]], rule: str) -> None:
        """A current queued record carries its queue index: a repeat (stale index) or a gap breaks the stream."""
        log = Log()
        for message_id, index in steps:
            log.queued(message_id, "m1", index=index)
        failure = log.fold().failure
        assert failure is not None and failure.rule == rule and failure.seq == len(steps)

    def test_older_and_current_queued_records_share_one_queue_order(self) -> None:
        """Index-less records are numbered by the fold; a current record continues the count."""
        log = Log()
        log.queued("msg-1", "m1")
        log.queued("msg-2", "m1", index=1)
        log.queued("msg-3", "m1")
        state = log.fold()
        assert state.failure is None and state.mail.next_index == 3
        assert [m.id for m in state.mail.pending_for("m1")] == ["msg-1", "msg-2", "msg-3"]
        assert set(state.mail.legacy) == {"msg-1", "msg-3"}

    def test_a_settled_id_of_a_current_record_is_not_remembered(self) -> None:
        """The documented limit: ids are unique by construction (the writer's uuid); once a message
        with a queue index is read, a *new* record at the next index may carry its id again."""
        log = Log()
        log.queued("msg-1", "m1", index=0)
        log.delivered("msg-1", "m1")
        log.read("msg-1", "m1")
        log.queued("msg-1", "m1", index=1)
        state = log.fold()
        assert state.failure is None and state.mail.status("msg-1") == "queued"

    def test_retired_tool_result_blocks_fail_the_stream(self) -> None:
        """A queued message carrying a tool-result block is an invalid payload (case 1)."""
        log = Log()
        log.queued("msg-1", "m1", content=[{"type": "tool-result", "tool_call_id": "c", "content": []}])
        assert log.fold().failure.message == "persisted Agent Teams team/message/queued payload is invalid"


class TestMode:
    def test_mode_records_select_the_roots_team_mode(self) -> None:
        """The latest own ``team/mode`` record is the selection; foreign ones are ignored."""
        log = Log()
        log.mode(False)
        log.mode(True, team_id="ancestor")
        state = log.fold()
        assert state.mode is False and state.position == 0
        log.mode(True)
        assert log.fold().mode is True

    def test_effective_mode(self) -> None:
        """Explicit selection wins; earlier Team records imply on; else the configured default."""
        empty = initial_state(TEAM)
        assert mode_enabled(empty, True) is True and mode_enabled(empty, False) is False
        log = Log()
        log.task("task-1")
        assert mode_enabled(log.fold(), False) is True
        roster = Log()
        roster.member("m1", "alpha")
        assert mode_enabled(roster.fold(), False) is True
        log.mode(False)
        assert mode_enabled(log.fold(), True) is False


class TestPurity:
    def test_folding_twice_gives_equal_independent_results(self) -> None:
        """The fold remembers nothing: the same event onto equal states gives equal, separate states."""
        log = Log()
        log.task("task-1")
        log.queued("msg-1", "m1")
        log.task("task-1", 2, status="completed")
        mine, theirs = replay(log.events[:2], TEAM), replay(log.events[:2], TEAM)
        first, second = evolve(mine, log.events[2]), evolve(theirs, log.events[2])
        assert first == second and first is not second
        assert evolve(mine, log.events[2]) is not first  # no memo: a second fold is a fresh value
        assert first.tasks.tasks["task-1"].revision == 2

    def test_a_no_op_keeps_the_callers_state(self) -> None:
        """Another Team's record returns exactly the state it was given."""
        foreign = event(1, "team/task", task("task-1", team_id="ancestor"))
        mine, theirs = initial_state(TEAM), initial_state(TEAM)
        assert evolve(mine, foreign) is mine
        assert evolve(theirs, foreign) is theirs

    def test_the_fold_module_holds_no_mutable_state(self) -> None:
        """No module-level dict, list, set or rebinding global in the fold or the core."""
        import ast
        from pathlib import Path

        import dsh_team.core as core

        for path in Path(core.__file__).parent.glob("*.py"):
            tree = ast.parse(path.read_text())
            assert not any(isinstance(node, ast.Global) for node in ast.walk(tree)), path.name
            for node in tree.body:
                value = getattr(node, "value", None)
                is_dunder = isinstance(node, ast.Assign) and any(
                    isinstance(target, ast.Name) and target.id.startswith("__") for target in node.targets
                )
                if not is_dunder:
                    assert not isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp)), (path.name, node.lineno)


class TestCopyOnWrite:
    def test_each_event_replaces_only_its_collection(self) -> None:
        """Task, member, mail and mode events each swap exactly one part (case 17)."""
        state = initial_state(TEAM)
        after_task = evolve(state, event(1, "team/task", task("task-1")))
        assert after_task.tasks is not state.tasks
        assert after_task.members is state.members and after_task.mail is state.mail
        after_member = evolve(after_task, event(2, "team/member", member("m1", "alpha")))
        assert after_member.members is not after_task.members
        assert after_member.tasks is after_task.tasks and after_member.mail is after_task.mail
        log = Log()
        log.queued("msg-1", "m1")
        log.delivered("msg-1", "m1")
        after_queue = evolve(after_member, log.events[0])
        after_ack = evolve(after_queue, log.events[1])
        for changed, before in ((after_queue, after_member), (after_ack, after_queue)):
            assert changed.mail is not before.mail
            assert changed.tasks is before.tasks and changed.members is before.members
        after_mode = evolve(after_ack, event(5, "team/mode", {"version": 2, "team_id": TEAM, "enabled": False}))
        assert after_mode.mode is False
        assert (after_mode.tasks, after_mode.members, after_mode.mail) == (after_ack.tasks, after_ack.members, after_ack.mail)
        assert after_mode.tasks is after_ack.tasks

    def test_older_states_stay_valid(self) -> None:
        """Folding further never changes an earlier state (persistent collections)."""
        log = Log()
        log.task("task-1")
        first = log.fold()
        log.task("task-1", 2, status="in_progress", owner_id=TEAM)
        second = evolve(first, log.events[1])
        assert first.tasks.tasks["task-1"].status == "pending"
        assert second.tasks.tasks["task-1"].status == "in_progress"
        assert first.tasks.listed()[0].revision == 1 and second.tasks.listed()[0].revision == 2

    def test_listings_are_memoised_but_never_affect_equality(self) -> None:
        """A listed board equals a fresh fold of the same log."""
        log = Log()
        log.task("task-1")
        log.task("task-2", status="in_progress", owner_id="m1")
        log.member("m1", "alpha")
        listed = log.fold()
        assert listed.tasks.listed() is listed.tasks.listed()
        assert listed.tasks.in_progress() is listed.tasks.in_progress()
        assert listed.members.listed() is listed.members.listed()
        assert listed == log.fold()
        assert repr(listed.tasks.memo) == "Memo()" and hash(listed.tasks.memo) == 0
        assert listed.tasks.memo != {}
