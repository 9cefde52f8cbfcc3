"""Browser view and publications (§11.1; cases 19-21) and the G1 remote (cases 24-25)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from dsh_team.errors import TeamCode, TeamError
from dsh_team.core.team_view import BrowserMember, TeamView, build_view
from dsh_team.views.projection import Publisher
from dsh_team.views.remote import RemoteTeam

from team_builders import Log
from team_host import faulty_log, add_member, child, lead, open_host, service, team


class TestView:
    async def test_view_lists_roster_and_live_tasks(self, tmp_path: Path) -> None:
        """Lead row first, rostered members with phase/error, non-deleted task views (case 19)."""
        host = await open_host(tmp_path)
        root, (alpha,) = await team(host, "alpha")
        broken = await child(host, root, "child-b")
        await add_member(host, root, broken.id, "broken", "failed")
        teams = service(host)
        await teams.create_task(root, subject="a", description="d", write_scopes=["src"])
        await teams.create_task(root, subject="b", description="d", write_scopes=["src/x"])
        await teams.update_task(root, task_id="task-1", expected_revision=1, action="claim")
        await teams.create_task(root, subject="c", description="d")
        await teams.update_task(root, task_id="task-3", expected_revision=1, action="claim")
        await teams.update_task(root, task_id="task-3", expected_revision=2, action="delete")
        view = teams.view(alpha)
        assert view.members[0] == BrowserMember(id="lead", name="lead", role="lead", phase="active")
        assert [(m.name, m.phase) for m in view.members[1:]] == [("alpha", "active"), ("broken", "failed")]
        assert [t.id for t in view.tasks] == ["task-1", "task-2"]
        assert view.tasks[0].owner_name == "lead" and view.tasks[1].write_scope_warnings == ("write scopes overlap with task-1",)
        assert view.enabled is True and view.failure is None
        assert teams.view(root) is view  # memoised
        await host.close()

    def test_failed_member_rows_carry_their_error(self) -> None:
        """A failed roster record shows its error text in the row."""
        log = Log()
        log.member("m1", "alpha")
        log.member("m1", "alpha", "failed", error="provider missing")
        assert build_view(log.fold(), True).members[1] == BrowserMember("m1", "alpha", "teammate", "failed", "provider missing")


class TestPublication:
    def test_publishes_only_roster_task_mode_or_failure_changes(self) -> None:
        """Mailbox-only and unrelated events publish nothing; failure publishes once (cases 20-21)."""
        publisher = Publisher()
        seen: list[tuple[str, TeamView]] = []
        handle = publisher.subscribe(lambda team_id, view: seen.append((team_id, view)))
        log = Log()
        from dsh_team.core.fold import evolve
        from dsh_team.core.state import initial_state

        state = initial_state("lead")
        assert publisher.publish(state, True) is not None and len(seen) == 1
        assert [m.name for m in seen[0][1].members] == ["lead"]
        for item in (log.task("task-1"), log.queued("msg-1", "m1"), log.add("turn/start", {"turn": 1})):
            state = evolve(state, item)
            publisher.publish(state, True)
        assert len(seen) == 2 and seen[1][1].tasks[0].id == "task-1"
        assert publisher.publish(state, False) is not None and len(seen) == 3
        failed = evolve(state, log.task("task-1", 9))
        publisher.publish(failed, False)
        assert seen[-1][1].failure == 'team task "task-1" revision is not contiguous (9 after 1)'
        assert [t.id for t in seen[-1][1].tasks] == ["task-1"]
        publisher.publish(evolve(failed, log.task("task-2")), False)
        assert len(seen) == 4
        other = initial_state("other")
        publisher.publish(other, True)
        assert seen[-1][0] == "other"
        handle.dispose()
        handle.dispose()
        publisher.forget("other")
        publisher.publish(other, True)
        assert len(seen) == 5

    def test_listener_failures_are_contained(self) -> None:
        """A broken listener does not stop the next one."""
        from dsh_team.core.state import initial_state

        publisher = Publisher()
        got: list[str] = []

        def broken(team_id: str, view: TeamView) -> None:
            raise RuntimeError("listener bug")

        publisher.subscribe(broken)
        publisher.subscribe(lambda team_id, view: got.append(team_id))
        publisher.publish(initial_state("lead"), True)
        assert got == ["lead"]

    async def test_live_sessions_publish_their_own_views(self, tmp_path: Path) -> None:
        """Through the host, a task append publishes once for its Lead session only (case 21)."""
        host = await open_host(tmp_path)
        teams = service(host)
        seen: list[str] = []
        teams.subscribe(lambda team_id, view: seen.append(team_id))
        first = await lead(host)
        second = await lead(host, "second")
        await teams.create_task(first, subject="a", description="d")
        await teams.create_task(second, subject="b", description="d")
        first.session.append("turn/start", {"turn": 1})
        assert seen == ["lead", "second"]
        await host.close()


class _Raising:
    """A service double for the remote's error mapping (the remote is a pure adapter)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def create_task(self, agent: Any, **fields: Any) -> Any:
        raise self.error

    update_task = create_task


class TestRemote:
    async def test_remote_view_and_mutations(self, tmp_path: Path) -> None:
        """view lists the Lead; create is ok at revision 1; claim is ok at revision 2 as lead (case 24)."""
        host = await open_host(tmp_path)
        root = await lead(host)
        remote = service(host).remote
        assert remote.view(root) == {
            "enabled": True,
            "members": [{"id": "lead", "name": "lead", "role": "lead", "phase": "active"}],
            "tasks": [],
            "failure": None,
        }
        created = await remote.create_task(root, {"subject": "s", "description": "d"})
        assert created["ok"] is True and created["value"]["revision"] == 1
        claimed = await remote.update_task(root, {"task_id": "task-1", "expected_revision": 1, "action": "claim"})
        assert claimed["ok"] and (claimed["value"]["revision"], claimed["value"]["owner_name"]) == (2, "lead")
        assert msgspec.json.encode(claimed)  # JSON-ready
        stale = await remote.update_task(root, {"task_id": "task-1", "expected_revision": 1, "action": "release"})
        assert stale == {
            "ok": False,
            "error": {"code": "team-task-conflict", "reason": "TEAM_TASK_STALE_REVISION",
                      "message": 'stale team task "task-1" revision 1; current revision is 2'},
        }
        for request in ([], {"subject": "s"}, {"subject": "s", "description": "d", "owner": "x"}, {"task_id": "task-1"}):
            call = remote.create_task if "task_id" not in request else remote.update_task
            rejected = await call(root, request)
            assert rejected["ok"] is False and rejected["error"]["code"] == "team-rejected"
        await host.close()

    async def test_remote_view_carries_mode_and_failure_like_the_projection(self, tmp_path: Path) -> None:
        """A record the fold rejects shows as ``failure`` next to the last valid board; mode off shows."""
        host = await open_host(tmp_path)
        root = await lead(host)
        teams = service(host)
        await teams.create_task(root, subject="s", description="d")
        await teams.set_enabled(root, False)
        assert service(host).remote.view(root)["enabled"] is False
        task = {"id": "task-1", "subject": "s", "description": "d", "status": "pending", "revision": 9,
                "blocked_by": [], "write_scopes": []}
        root.session.append("team/task", {"version": 2, "team_id": "lead", "task": task})
        projected = teams.view(root)
        remote = service(host).remote.view(root)
        assert projected.failure is not None and "not contiguous" in projected.failure
        assert remote["failure"] == projected.failure and remote["enabled"] is projected.enabled is False
        assert [t["id"] for t in remote["tasks"]] == ["task-1"] and remote["tasks"][0]["revision"] == 1
        await host.close()

    async def test_unconfirmed_create_is_its_own_kind_not_a_rejection(self, tmp_path: Path) -> None:
        """A failed flush answers ok with the visible task and ``unconfirmed``; a client that reads sees one task."""
        host = await open_host(tmp_path)
        root = await lead(host)
        remote = service(host).remote
        faulty_log(root.session).fail_next()
        answer = await remote.create_task(root, {"subject": "s", "description": "d"})
        assert answer["ok"] is True and answer["value"]["id"] == "task-1" and answer["value"]["revision"] == 1
        assert answer["unconfirmed"]["code"] == "team-persistence-unconfirmed"
        assert "read it before retrying" in answer["unconfirmed"]["message"]
        assert "error" not in answer
        confirmed = await remote.create_task(root, {"subject": "t", "description": "d"})
        assert confirmed["ok"] is True and "unconfirmed" not in confirmed
        assert [t["id"] for t in remote.view(root)["tasks"]] == ["task-1", "task-2"]
        await host.close()

    async def test_team_errors_are_rejections_and_other_errors_propagate(self) -> None:
        """TeamError -> team-rejected; anything else rejects the call (case 25)."""
        rejected = await RemoteTeam(_Raising(TeamError("nope", TeamCode.TASK_BLOCKED))).create_task(  # type: ignore[arg-type]
            None, {"subject": "s", "description": "d"}
        )
        assert rejected == {"ok": False, "error": {"code": "team-rejected", "reason": "TEAM_TASK_BLOCKED", "message": "nope"}}
        with pytest.raises(RuntimeError, match="transport"):
            await RemoteTeam(_Raising(RuntimeError("transport"))).update_task(  # type: ignore[arg-type]
                None, {"task_id": "t", "expected_revision": 1, "action": "claim"}
            )
