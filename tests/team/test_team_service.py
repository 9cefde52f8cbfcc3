"""TeamService against a real reference host with JSONL persistence (membership, tasks, durability)."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import msgspec
import pytest

from dsh_team.errors import TeamError
from dsh_team.core.fold import replay
from host_spec.events import SubagentDescriptor

from team_host import faulty_log, add_member, child, lead, open_host, resume_lead, service, team


class TestMembership:
    async def test_every_root_is_the_lead_of_its_own_team(self, tmp_path: Path) -> None:
        """A root agent's Team id is its session id and its name is ``lead``."""
        host = await open_host(tmp_path)
        root = await lead(host)
        membership = service(host).membership(root)
        assert (membership.root, membership.team_id, membership.role, membership.name) == (root, "lead", "lead", "lead")
        assert membership.is_lead and membership.member_id == "lead"
        await host.close()

    async def test_stale_copies_and_disposed_agents_are_not_members(self, tmp_path: Path) -> None:
        """Only the exact registered live object is a credential."""
        host = await open_host(tmp_path)
        root = await lead(host)
        teams = service(host)
        assert teams.try_membership(copy.copy(root)) is None
        assert teams.try_membership(object()) is None
        with pytest.raises(TeamError) as caught:
            teams.membership(copy.copy(root))
        assert caught.value.code == "TEAM_NOT_MEMBER"
        await host.dispose_agent(root)
        assert teams.try_membership(root) is None
        await host.close()

    async def test_children_resolve_by_roster_then_descriptor(self, tmp_path: Path) -> None:
        """Rostered children are teammates; described workers are nobody; plain forks lead (cases 14-15)."""
        host = await open_host(tmp_path)
        root, (alpha,) = await team(host, "alpha")
        teams = service(host)
        member = teams.membership(alpha)
        assert (member.role, member.name, member.team_id, member.root) == ("teammate", "alpha", "lead", root)
        pending = await child(host, root, "child-p")
        await add_member(host, root, pending.id, "pending", "provisioning")
        assert teams.membership(pending).role == "teammate"
        failed = await child(host, root, "child-f")
        await add_member(host, root, failed.id, "broken", "failed")
        assert teams.membership(failed).role == "lead"  # failed members are no members
        worker = await child(host, root, "child-w")
        assert teams.membership(worker).role == "lead"
        worker.session.append("subagent/descriptor", SubagentDescriptor(version=2, mode="continuable", provider="spawn"))
        assert teams.try_membership(worker) is None  # the scan picks up the later descriptor
        assert teams.try_membership(worker) is None
        fork = await child(host, root, "child-k")
        forked = teams.membership(fork)
        assert (forked.role, forked.team_id) == ("lead", "child-k")
        assert teams.list_tasks(fork) == []
        await host.close()

    async def test_orphans_and_corrupt_parent_streams(self, tmp_path: Path) -> None:
        """Without a live parent a described child is nobody; a corrupt parent stream keeps its members, whose reads fail."""
        host = await open_host(tmp_path)
        orphan_session = await host.create_session("orphan", parent_session="gone")
        orphan_session.append("subagent/descriptor", SubagentDescriptor(version=2, mode="continuable", provider="spawn"))
        orphan = host.start_agent(orphan_session, name="orphan")
        plain = host.start_agent(await host.create_session("plain", parent_session="gone"), name="plain")
        teams = service(host)
        assert teams.try_membership(orphan) is None
        assert teams.membership(plain).role == "lead"
        root, (alpha,) = await team(host, "alpha")
        root.session.append("team/task", {"version": 2, "team_id": "lead", "task": {"id": 1}})
        assert teams.membership(alpha).role == "teammate"
        for caller in (root, alpha):
            with pytest.raises(TeamError, match="team/task payload is invalid") as caught:
                teams.list_tasks(caller)
            assert caught.value.code == "TEAM_STREAM_FAILED"
        await host.close()


class TestTasks:
    async def test_members_share_one_board_through_the_lead_log(self, tmp_path: Path) -> None:
        """Teammates and the Lead create, claim and read tasks of the Lead's Team."""
        host = await open_host(tmp_path)
        root, (alpha, beta) = await team(host, "alpha", "beta")
        teams = service(host)
        created = await teams.create_task(alpha, subject="Write", description="docs", write_scopes=["docs/"])
        assert (created.id, created.revision, created.write_scopes) == ("task-1", 1, ("docs",))
        claimed = await teams.update_task(beta, task_id="task-1", expected_revision=1, action="claim")
        assert (claimed.owner_name, claimed.owner_id, claimed.status) == ("beta", beta.id, "in_progress")
        assert [v.id for v in teams.list_tasks(root)] == ["task-1"]
        assert claimed.position == root.session.last_seq  # a mutation's view names the position it reflects
        assert teams.get_task(alpha, "task-1") == msgspec.structs.replace(claimed, position=None)
        stored = [e for e in root.session.events if e.type == "team/task"]
        assert [e.value()["task"]["revision"] for e in stored] == [1, 2]
        assert root.session.durable_seq == root.session.last_seq
        with pytest.raises(TeamError) as caught:
            teams.get_task(alpha, "task-9")
        assert caught.value.code == "TEAM_TASK_NOT_FOUND"
        await host.close()

    async def test_rejections_append_nothing(self, tmp_path: Path) -> None:
        """A rejected mutation leaves the Lead log untouched."""
        host = await open_host(tmp_path)
        root = await lead(host)
        teams = service(host)
        before = root.session.last_seq
        for kwargs in ({"subject": " ", "description": "d"}, {"subject": "s", "description": "d", "write_scopes": [".."]}):
            with pytest.raises(TeamError):
                await teams.create_task(root, **kwargs)
        with pytest.raises(TeamError) as caught:
            await teams.update_task(root, task_id="task-1", expected_revision=1, action="claim")
        assert caught.value.code == "TEAM_TASK_NOT_FOUND"
        assert root.session.last_seq == before
        await host.close()

    async def test_concurrent_mutations_all_land_with_contiguous_revisions(self, tmp_path: Path) -> None:
        """16 members mutate concurrently (own tasks and one contended task): nothing is lost."""
        host = await open_host(tmp_path)
        root, members = await team(host, *(f"m{i}" for i in range(16)))
        teams = service(host)
        gate = faulty_log(root.session)
        shared = await teams.create_task(root, subject="shared", description="d")
        created = await asyncio.gather(
            *(teams.create_task(m, subject=f"s{i}", description="d") for i, m in enumerate(members))
        )
        assert sorted(int(v.id.split("-")[1]) for v in created) == list(range(2, 18))
        writes_before = gate.writes

        async def own(member: object, task_id: str) -> None:
            view = await teams.update_task(member, task_id=task_id, expected_revision=1, action="claim")
            for step in range(3):
                view = await teams.update_task(
                    member, task_id=task_id, expected_revision=view.revision, action="edit", subject=f"step {step}"
                )

        async def contend(label: str) -> None:
            while True:  # compare-and-set with retry: a stale read must never overwrite
                current = teams.get_task(root, shared.id)
                try:
                    await teams.update_task(
                        root, task_id=shared.id, expected_revision=current.revision, action="edit", subject=label
                    )
                    return
                except TeamError as error:
                    assert error.code == "TEAM_TASK_STALE_REVISION"

        await asyncio.gather(
            *(own(m, v.id) for m, v in zip(members, created, strict=True)),
            *(contend(f"edit-{i}") for i in range(16)),
        )
        records = [e.value()["task"] for e in root.session.events if e.type == "team/task"]
        for task_id in {r["id"] for r in records}:
            assert [r["revision"] for r in records if r["id"] == task_id] == list(
                range(1, 1 + sum(r["id"] == task_id for r in records))
            )
        assert teams.get_task(root, shared.id).revision == 17
        assert {teams.get_task(root, v.id).revision for v in created} == {5}
        assert gate.writes - writes_before < 16 * 4 + 16  # flushes were shared (group commit)
        assert root.session.durable_seq == root.session.last_seq
        await host.close()


class TestDurability:
    async def test_restart_refold_equals_the_live_state(self, tmp_path: Path) -> None:
        """After close and resume, the folded Team equals the state before the restart."""
        host = await open_host(tmp_path)
        root, (alpha,) = await team(host, "alpha")
        teams = service(host)
        await teams.create_task(root, subject="a", description="d")
        await teams.create_task(alpha, subject="b", description="d", blocked_by=["task-1"])
        await teams.update_task(alpha, task_id="task-1", expected_revision=1, action="claim")
        await teams.update_task(root, task_id="task-2", expected_revision=1, action="delete")
        await teams.set_enabled(root, True)
        before = teams.journals.get(root.session).state
        views = teams.list_tasks(root)
        await host.close()
        again = await open_host(tmp_path)
        resumed = await resume_lead(again)
        after = service(again).journals.get(resumed.session).state
        assert after == before
        assert after == replay(resumed.session.events, "lead")
        assert [v.id for v in service(again).list_tasks(resumed)] == [v.id for v in views]
        assert service(again).journals.get(resumed.session).position == before.position
        await again.close()

    async def test_a_deleted_task_reads_whole_from_the_log_while_the_board_keeps_a_tombstone(
        self, tmp_path: Path
    ) -> None:
        """Delete's result and get_task (live and after a restart) are the whole snapshot; the fold keeps id and revision."""
        host = await open_host(tmp_path)
        root = await lead(host)
        teams = service(host)
        await teams.create_task(root, subject="ship it", description="the release", write_scopes=["src/**"])
        before = teams.get_task(root, "task-1")
        deleted = await teams.update_task(root, task_id="task-1", expected_revision=1, action="delete")
        expected = msgspec.structs.replace(before, revision=2, status="deleted", ready=False, position=None)
        assert msgspec.structs.replace(deleted, position=None) == expected
        assert teams.get_task(root, "task-1") == expected
        kept = teams.journals.get(root.session).state.tasks.tasks["task-1"]
        assert (kept.subject, kept.description, kept.write_scopes) == ("", "", ())
        await host.close()
        again = await open_host(tmp_path)
        resumed = await resume_lead(again)
        assert service(again).get_task(resumed, "task-1") == expected
        await again.close()

    async def test_failed_flush_is_unconfirmed_but_visible_and_retried(self, tmp_path: Path) -> None:
        """A failed flush raises TEAM_TASK_PERSISTENCE_UNCONFIRMED; the task is visible; the next flush stores it."""
        host = await open_host(tmp_path)
        root = await lead(host)
        teams = service(host)
        gate = faulty_log(root.session)
        gate.fail_next()
        with pytest.raises(TeamError, match="read it before retrying") as caught:
            await teams.create_task(root, subject="s", description="d")
        assert caught.value.code == "TEAM_TASK_PERSISTENCE_UNCONFIRMED"
        assert teams.get_task(root, "task-1").revision == 1
        assert root.session.durable_seq < root.session.last_seq
        await teams.update_task(root, task_id="task-1", expected_revision=1, action="claim")
        assert root.session.durable_seq == root.session.last_seq
        await host.close()
        again = await open_host(tmp_path)
        resumed = await resume_lead(again)
        assert service(again).get_task(resumed, "task-1").revision == 2
        await again.close()
