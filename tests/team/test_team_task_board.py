"""Task board decisions (§7; reference cases 17-23) on a folded state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dsh_team.errors import TeamError
from dsh_team.core.actor import Actor
from dsh_team.core.board import decide_create, decide_update, require_task
from dsh_team.core.task_actions import ACTIONS
from dsh_team.core.task_view import list_views

from team_builders import TEAM, BoardHarness, Log

LEAD = Actor(TEAM, "lead")
ALPHA = Actor("w1", "teammate")
BETA = Actor("w2", "teammate")


def board(**kwargs: Any) -> BoardHarness:
    harness = BoardHarness(**kwargs)
    harness.add_member("w1", "alpha")
    harness.add_member("w2", "beta")
    harness.add_member("w3", "gamma", "provisioning")
    return harness


def code_of(action: Callable[[], object]) -> str:
    with pytest.raises(TeamError) as caught:
        action()
    return caught.value.code


class TestCreate:
    def test_create_returns_revision_one_pending_unowned(self) -> None:
        """Any member creates a trimmed, unowned, pending revision-1 task with normalised scopes."""
        harness = board()
        view = harness.create(ALPHA, "  Write docs ", " all of them ", write_scopes=["src", "./src/", "src", "docs\\api"])
        assert (view.id, view.revision, view.status, view.subject, view.description) == (
            "task-1", 1, "pending", "Write docs", "all of them"
        )  # fmt: skip
        assert view.write_scopes == ("src", "docs/api") and view.owner_id is None and view.ready

    def test_id_space_exhaustion_fails_loudly(self) -> None:
        """With ``task-(2**53-1)`` on the board, creation is TEAM_TASK_LIMIT (case 17)."""
        harness = board()
        harness.commit("team/task", Log().task("task-9007199254740991").value())
        with pytest.raises(TeamError, match="Team task id space exhausted") as caught:
            harness.create(LEAD)
        assert caught.value.code == "TEAM_TASK_LIMIT"

    def test_limit_counts_non_deleted_tasks_and_keeps_tombstones(self) -> None:
        """maxTasks 1: second create fails; after deleting task-1 the next id is task-2 (case 18)."""
        harness = board(max_tasks=1)
        harness.create(LEAD)
        assert code_of(lambda: harness.create(LEAD)) == "TEAM_TASK_LIMIT"
        harness.update(LEAD, "task-1", "delete")
        assert harness.create(LEAD).id == "task-2"
        assert require_task(harness.state, "task-1").status == "deleted"
        assert [view.id for view in list_views(harness.state)] == ["task-2"]

    @pytest.mark.parametrize(
        ("kwargs", "code"),
        [
            ({"subject": "  "}, "TEAM_INVALID_ARGUMENT"),
            ({"description": ""}, "TEAM_INVALID_ARGUMENT"),
            ({"subject": "x" * 201}, "TEAM_INVALID_ARGUMENT"),
            ({"description": "x" * 16385}, "TEAM_INVALID_ARGUMENT"),
            ({"subject": 3}, "TEAM_INVALID_ARGUMENT"),
            ({"blocked_by": ["task-9"]}, "TEAM_TASK_NOT_FOUND"),
            ({"blocked_by": ["task-1"]}, "TEAM_TASK_DEPENDENCY_CYCLE"),
            ({"blocked_by": "task-1"}, "TEAM_INVALID_ARGUMENT"),
            ({"blocked_by": [1]}, "TEAM_INVALID_ARGUMENT"),
            ({"write_scopes": "src"}, "TEAM_INVALID_ARGUMENT"),
            ({"write_scopes": ["/abs"]}, "TEAM_INVALID_WRITE_SCOPE"),
        ],
    )
    def test_malformed_requests_append_nothing(self, kwargs: dict[str, Any], code: str) -> None:
        """Blank/oversize text, bad blockers and bad scopes fail with their code; the log is unchanged."""
        harness = board()
        before = len(harness.log.events)
        request = {"subject": "s", "description": "d", **kwargs}
        assert code_of(lambda: decide_create(harness.state, LEAD, max_tasks=9, **request)) == code
        assert len(harness.log.events) == before

    def test_200_characters_is_the_subject_maximum(self) -> None:
        """A 200-character subject is accepted; 16384 for the description."""
        assert board().create(LEAD, "x" * 200, "y" * 16384).revision == 1


class TestCompareAndSet:
    def test_cas_ownership_dependencies_and_warnings(self) -> None:
        """Blocked claims, double claims, overlap warnings, non-owner edits and stale revisions (case 19)."""
        harness = board()
        first = harness.create(LEAD, write_scopes=["src/nested", "./src/nested/"])
        assert first.write_scopes == ("src/nested",)
        second = harness.create(LEAD, blocked_by=["task-1"], write_scopes=["src"])
        assert not second.ready
        assert code_of(lambda: harness.update(ALPHA, "task-2", "claim")) == "TEAM_TASK_BLOCKED"
        claimed = harness.update(ALPHA, "task-1", "claim")
        assert (claimed.status, claimed.owner_id, claimed.owner_name, claimed.revision) == ("in_progress", "w1", "alpha", 2)
        with pytest.raises(TeamError, match='already claimed by "alpha"') as caught:
            harness.update(BETA, "task-1", "claim")
        assert caught.value.code == "TEAM_TASK_ALREADY_CLAIMED"
        assert harness.view("task-2").write_scope_warnings == ("write scopes overlap with task-1",)
        assert harness.view("task-1").write_scope_warnings == ()
        assert code_of(lambda: harness.update(BETA, "task-1", "edit", subject="x")) == "TEAM_TASK_UNAUTHORIZED"
        with pytest.raises(TeamError, match='stale team task "task-1" revision 1; current revision is 2') as stale:
            harness.update(ALPHA, "task-1", "complete", revision=1)
        assert stale.value.code == "TEAM_TASK_STALE_REVISION"
        harness.update(ALPHA, "task-1", "complete")
        assert harness.view("task-2").ready
        harness.update(BETA, "task-2", "claim")
        released = harness.update(BETA, "task-2", "release")
        assert (released.status, released.ready, released.owner_id, released.owner_name) == ("pending", True, None, None)

    def test_claim_by_the_current_owner_is_an_invalid_transition_not_blocked(self) -> None:
        """Re-claiming one's own in-progress task says so (not "not ready"); a completed one is a transition too."""
        harness = board()
        harness.create(LEAD)
        harness.update(ALPHA, "task-1", "claim")
        with pytest.raises(TeamError, match="already in progress and owned by you") as caught:
            harness.update(ALPHA, "task-1", "claim")
        assert caught.value.code == "TEAM_TASK_INVALID_TRANSITION"
        harness.update(ALPHA, "task-1", "complete")
        assert code_of(lambda: harness.update(ALPHA, "task-1", "claim")) == "TEAM_TASK_INVALID_TRANSITION"

    def test_unowned_foreign_owner_name_falls_back_to_id(self) -> None:
        """A task owned by an id not on the roster reports that id as holder and no owner_name."""
        harness = board()
        harness.commit("team/task", Log().task("task-1", status="in_progress", owner_id="ghost").value())
        with pytest.raises(TeamError, match='already claimed by "ghost"'):
            harness.update(ALPHA, "task-1", "claim")
        assert harness.view("task-1").owner_name is None

    @pytest.mark.parametrize(
        ("kwargs", "code"),
        [
            ({"task_id": "", "expected_revision": 1, "action": "claim"}, "TEAM_INVALID_ARGUMENT"),
            ({"task_id": None, "expected_revision": 1, "action": "claim"}, "TEAM_INVALID_ARGUMENT"),
            ({"task_id": "task-9", "expected_revision": 1, "action": "claim"}, "TEAM_TASK_NOT_FOUND"),
            ({"task_id": "task-1", "expected_revision": 0, "action": "claim"}, "TEAM_INVALID_ARGUMENT"),
            ({"task_id": "task-1", "expected_revision": "1", "action": "claim"}, "TEAM_INVALID_ARGUMENT"),
            ({"task_id": "task-1", "expected_revision": 1, "action": "explode"}, "TEAM_INVALID_ARGUMENT"),
            ({"task_id": "task-1", "expected_revision": 1, "action": ["claim"]}, "TEAM_INVALID_ARGUMENT"),
        ],
    )
    def test_malformed_update_requests(self, kwargs: dict[str, Any], code: str) -> None:
        """Bad ids, revisions and unknown actions are typed errors."""
        harness = board()
        harness.create(LEAD)
        assert code_of(lambda: decide_update(harness.state, LEAD, **kwargs)) == code


class TestDependencies:
    def test_every_invalid_dependency_relation_is_rejected(self) -> None:
        """Missing blocker, self, indirect cycle, duplicates and bad scopes (case 20)."""
        harness = board()
        for _ in range(3):
            harness.create(LEAD)
        harness.update(LEAD, "task-2", "set_dependencies", blocked_by=["task-1"])
        harness.update(LEAD, "task-3", "set_dependencies", blocked_by=["task-2"])
        cases = {
            "TEAM_TASK_NOT_FOUND": ["task-404"],
            "TEAM_TASK_DEPENDENCY_CYCLE": ["task-3"],
            "TEAM_INVALID_ARGUMENT": ["task-2", "task-2"],
        }
        for code, blockers in cases.items():
            assert code_of(lambda b=blockers: harness.update(LEAD, "task-1", "set_dependencies", blocked_by=b)) == code
        with pytest.raises(TeamError, match="task-1 -> task-3 -> task-2 -> task-1"):
            harness.update(LEAD, "task-1", "set_dependencies", blocked_by=["task-3"])
        with pytest.raises(TeamError, match="a team task cannot block itself") as caught:
            harness.update(LEAD, "task-1", "set_dependencies", blocked_by=["task-1"])
        assert caught.value.code == "TEAM_TASK_DEPENDENCY_CYCLE"

    @pytest.mark.parametrize("scope", ["", ".", "..", "/root", "C:\\root", "C:root", "a//b", "a/../b"])
    def test_malformed_scopes(self, scope: str) -> None:
        """The eight rejected scope examples of §7.6 are TEAM_INVALID_WRITE_SCOPE."""
        harness = board()
        harness.create(LEAD)
        assert code_of(lambda: harness.create(LEAD, write_scopes=[scope])) == "TEAM_INVALID_WRITE_SCOPE"
        assert code_of(lambda: harness.update(LEAD, "task-1", "edit", write_scopes=["ok", scope])) == "TEAM_INVALID_WRITE_SCOPE"

    def test_dependencies_can_be_cleared(self) -> None:
        """An empty blocker list removes every edge and makes the task ready."""
        harness = board()
        harness.create(LEAD)
        harness.create(LEAD, blocked_by=["task-1"])
        view = harness.update(LEAD, "task-2", "set_dependencies", blocked_by=[])
        assert view.blocked_by == () and view.ready


class TestTransitions:
    def test_incomplete_mutations_and_invalid_transitions(self) -> None:
        """Blank fields, wrong-status transitions, empty edits and live-blocker deletion (case 21)."""
        harness = board()
        harness.create(LEAD)
        harness.create(LEAD, blocked_by=["task-1"])
        assert code_of(lambda: harness.update(LEAD, "task-1", "edit", subject=" ")) == "TEAM_INVALID_ARGUMENT"
        assert code_of(lambda: harness.update(LEAD, "task-1", "edit", description="")) == "TEAM_INVALID_ARGUMENT"
        assert code_of(lambda: require_task(harness.state, "task-404")) == "TEAM_TASK_NOT_FOUND"
        for action in ("release", "complete", "reopen"):
            assert code_of(lambda a=action: harness.update(LEAD, "task-1", a)) == "TEAM_TASK_INVALID_TRANSITION"
        assert code_of(lambda: harness.update(LEAD, "task-1", "edit")) == "TEAM_INVALID_ARGUMENT"
        assert code_of(lambda: harness.update(LEAD, "task-1", "set_dependencies")) == "TEAM_INVALID_ARGUMENT"
        with pytest.raises(TeamError, match='"task-1" still blocks "task-2"') as caught:
            harness.update(LEAD, "task-1", "delete")
        assert caught.value.code == "TEAM_TASK_HAS_DEPENDENTS"

    def test_lead_reassignment_completion_reopen_and_deletion(self) -> None:
        """Lead reassigns; teammates cannot; owner completes, reopens, claims, deletes (case 22)."""
        harness = board()
        harness.create(LEAD)
        view = harness.update(LEAD, "task-1", "reassign", owner=" alpha ")
        assert (view.status, view.owner_name) == ("in_progress", "alpha")
        with pytest.raises(TeamError, match="only the Team Lead can reassign tasks") as caught:
            harness.update(ALPHA, "task-1", "reassign", owner="beta")
        assert caught.value.code == "TEAM_LEAD_REQUIRED"
        harness.update(ALPHA, "task-1", "complete")
        assert code_of(lambda: harness.update(LEAD, "task-1", "reassign", owner="beta")) == "TEAM_TASK_INVALID_TRANSITION"
        reopened = harness.update(ALPHA, "task-1", "reopen")
        assert (reopened.status, reopened.owner_id) == ("pending", None)
        harness.update(BETA, "task-1", "claim")
        deleted = harness.update(BETA, "task-1", "delete")
        assert (deleted.status, deleted.owner_name) == ("deleted", "beta")
        assert list_views(harness.state) == []
        assert code_of(lambda: harness.update(LEAD, "task-1", "edit", subject="x")) == "TEAM_TASK_DELETED"

    def test_partial_edits_lead_ownership_unassignment_and_blocked_reassignment(self) -> None:
        """Partial edits, Lead claims as ``lead``, blank-owner unassign, blocked reassign (case 23)."""
        harness = board()
        harness.create(LEAD, write_scopes=["src/nested"])
        harness.create(LEAD, blocked_by=["task-1"], write_scopes=["src"])
        harness.create(LEAD, write_scopes=["docs"])
        assert code_of(lambda: harness.update(LEAD, "task-9", "claim", revision=1)) == "TEAM_TASK_NOT_FOUND"
        assert code_of(lambda: harness.update(LEAD, "task-2", "reassign", owner="alpha")) == "TEAM_TASK_BLOCKED"
        lead_claim = harness.update(LEAD, "task-1", "claim")
        assert (lead_claim.owner_id, lead_claim.owner_name) == (TEAM, "lead")
        harness.update(LEAD, "task-1", "edit", subject="new subject")
        harness.update(LEAD, "task-1", "edit", description="new description")
        edited = harness.update(LEAD, "task-1", "edit", write_scopes=["src/nested/"])
        assert (edited.subject, edited.description, edited.write_scopes, edited.revision) == (
            "new subject", "new description", ("src/nested",), 5
        )  # fmt: skip
        assert harness.view("task-2").write_scope_warnings == ("write scopes overlap with task-1",)
        assert harness.view("task-3").write_scope_warnings == ()
        unassigned = harness.update(LEAD, "task-1", "reassign", owner="  ")
        assert (unassigned.status, unassigned.owner_id) == ("pending", None)
        assert harness.update(LEAD, "task-1", "reassign", owner="lead").owner_name == "lead"
        assert harness.update(LEAD, "task-1", "reassign").owner_id is None

    @pytest.mark.parametrize(("owner", "code"), [("gamma", "TEAM_MEMBER_NOT_FOUND"), ("nobody", "TEAM_MEMBER_NOT_FOUND"), (7, "TEAM_INVALID_ARGUMENT")])
    def test_reassign_targets_active_members_only(self, owner: object, code: str) -> None:
        """Provisioning or unknown names and non-string owners are rejected."""
        harness = board()
        harness.create(LEAD)
        assert code_of(lambda: harness.update(LEAD, "task-1", "reassign", owner=owner)) == code

    def test_in_progress_task_can_change_hands(self) -> None:
        """Reassigning an in-progress task moves ownership while it stays in progress."""
        harness = board()
        harness.create(LEAD)
        harness.update(ALPHA, "task-1", "claim")
        view = harness.update(LEAD, "task-1", "reassign", owner="beta")
        assert (view.owner_name, view.status, view.revision) == ("beta", "in_progress", 3)

    def test_a_stale_revision_is_reported_before_deletion_and_authority(self) -> None:
        """§7.3 order: exists, then revision, then deleted, then the action's own rules."""
        harness = board()
        harness.create(LEAD)
        harness.create(LEAD)
        harness.update(LEAD, "task-1", "delete")
        stale_deleted = lambda: harness.update(LEAD, "task-1", "edit", revision=1, subject="x")  # noqa: E731
        assert code_of(stale_deleted) == "TEAM_TASK_STALE_REVISION"
        assert code_of(lambda: harness.update(LEAD, "task-1", "edit", subject="x")) == "TEAM_TASK_DELETED"
        stranger_stale = lambda: harness.update(ALPHA, "task-2", "edit", revision=7, subject="x")  # noqa: E731
        assert code_of(stranger_stale) == "TEAM_TASK_STALE_REVISION"
        assert code_of(lambda: harness.update(ALPHA, "task-2", "edit", subject="x")) == "TEAM_TASK_UNAUTHORIZED"

    @pytest.mark.parametrize("action", ["release", "edit", "set_dependencies", "complete", "reopen", "delete"])
    def test_unowned_tasks_are_lead_only_except_claim(self, action: str) -> None:
        """A teammate can only claim an unowned pending task."""
        harness = board()
        harness.create(LEAD)
        fields = {"edit": {"subject": "x"}, "set_dependencies": {"blocked_by": []}}.get(action, {})
        assert code_of(lambda: harness.update(ALPHA, "task-1", action, **fields)) == "TEAM_TASK_UNAUTHORIZED"

    def test_actions_list_matches_the_reference(self) -> None:
        """The eight actions of §7.3, in table order."""
        assert ACTIONS == ("claim", "release", "edit", "set_dependencies", "complete", "reopen", "reassign", "delete")
