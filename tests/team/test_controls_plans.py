"""Plan approval through the real service and the host's real tool pipeline.

A plan-gated teammate's ``write_file``, ``edit_file`` and ``bash`` come back as
``TEAM_PLAN_NOT_APPROVED`` results and nothing is written (the workspace is the
oracle); reads work; a submitted and approved plan frees them. Each step is a
durable ``team/plan`` record that a restarted process folds back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh_team.errors import TeamError
from host_spec.messages import text_block

from controls_kit import call, lead_in, of_type, open_host, stored_controls, team_service, teammate, workspace
from test_controls_gates import lead_log


def notices(tmp_path: Path) -> list[tuple[str, str]]:
    """``(target id, text)`` of every Team message in the Lead log."""
    return [(m["message"]["target_id"], m["message"]["content"][0]["text"])
            for m in of_type(lead_log(tmp_path), "team/message/queued")]


class TestWriteVeto:
    async def test_write_tools_refuse_until_the_plan_is_approved(self, tmp_path: Path) -> None:
        root = workspace(tmp_path)
        (root / "seen.txt").write_text("hello\n")
        host = await open_host(tmp_path)
        try:
            lead = await lead_in(host, root)
            planner = await teammate(host, lead, "planner", plan=True)
            free = await teammate(host, lead, "free", 2)
            for tool, arguments in (
                ("write_file", {"path": "new.txt", "content": "x"}),
                ("edit_file", {"path": "seen.txt", "old_string": "hello", "new_string": "bye"}),
                ("bash", {"command": "touch ran.txt"}),
            ):
                code, message = await call(host, planner, tool, **arguments)
                assert code == "TEAM_PLAN_NOT_APPROVED", (tool, code, message)
                assert 'plan="submit"' in message
            assert sorted(p.name for p in root.iterdir()) == ["seen.txt"]  # nothing was written or run
            assert (await call(host, planner, "read_file", path="seen.txt"))[0] is None  # reads are free
            assert (await call(host, free, "write_file", path="free.txt", content="x"))[0] is None  # not gated
            assert (await call(host, lead, "bash", command="true"))[0] is None  # the Lead never is

            service = team_service(host)
            await service.plan_step(planner, plan="submit", target="lead", text="1. edit seen.txt")
            assert (await call(host, planner, "bash", command="true"))[0] == "TEAM_PLAN_NOT_APPROVED"  # submitted only
            await service.plan_step(lead, plan="reject", target="planner", text="also add tests")
            assert (await call(host, planner, "bash", command="true"))[0] == "TEAM_PLAN_NOT_APPROVED"
            await service.plan_step(planner, plan="submit", target="lead", text="1. edit seen.txt 2. tests")
            await service.plan_step(lead, plan="approve", target="planner", text="", by="user")
            code, _ = await call(host, planner, "edit_file", path="seen.txt", old_string="hello", new_string="bye")
            assert code is None and (root / "seen.txt").read_text() == "bye\n"
        finally:
            await host.close()
        plan = stored_controls(tmp_path).plan("planner")
        assert plan is not None and (plan.status, plan.rounds, plan.by) == ("approved", 2, "user")
        assert plan.plan == "1. edit seen.txt 2. tests"
        texts = [text for _, text in notices(tmp_path)]
        assert texts[0].startswith("Plan from planner for approval") and texts[0].endswith("1. edit seen.txt")
        assert texts[1] == "Your plan was rejected; revise it and submit again. Feedback: also add tests"
        assert texts[3] == "Your plan is approved; you may write now."

    async def test_approval_survives_a_restart(self, tmp_path: Path) -> None:
        """The state is a fold of the Lead log: a new process reads it back, and the veto follows it."""
        root = workspace(tmp_path)
        host = await open_host(tmp_path)
        try:
            lead = await lead_in(host, root)
            planner = await teammate(host, lead, "planner", plan=True)
            await team_service(host).plan_step(planner, plan="submit", target="lead", text="plan")
            (root / "a.txt").write_text("a")
            assert (await call(host, planner, "read_file", path="a.txt"))[0] is None  # its log exists on disk
            await planner.session.flush()
        finally:
            await host.close()
        assert stored_controls(tmp_path).plan("planner").status == "submitted"  # type: ignore[union-attr]
        host = await open_host(tmp_path)
        try:
            lead = await lead_in(host, None, resume=True)
            session = await host.resume_session("child-1")
            planner = host.start_agent(session, name="planner", source="resume")
            assert (await call(host, planner, "bash", command="true"))[0] == "TEAM_PLAN_NOT_APPROVED"
            await team_service(host).plan_step(lead, plan="approve", target="planner", text="ok")
            assert (await call(host, planner, "bash", command="touch ok"))[0] is None
        finally:
            await host.close()
        assert (root / "ok").exists()

    async def test_a_gated_completion_needs_the_approval_too(self, tmp_path: Path) -> None:
        """Checks are commands: a teammate in planning cannot run them by completing a task."""
        root = workspace(tmp_path)
        host = await open_host(tmp_path)
        try:
            lead = await lead_in(host, root)
            planner = await teammate(host, lead, "planner", plan=True)
            service = team_service(host)
            task = await service.create_task(planner, subject="s", description="d", checks=["touch ran"])
            await service.update_task(planner, task_id=task.id, expected_revision=1, action="claim")
            with pytest.raises(TeamError) as refused:
                await service.update_task(planner, task_id=task.id, expected_revision=2, action="complete")
            assert refused.value.code == "TEAM_PLAN_NOT_APPROVED"
        finally:
            await host.close()
        assert not (root / "ran").exists() and not stored_controls(tmp_path).runs


class TestSteps:
    @pytest.mark.parametrize(
        ("who", "plan", "target", "text", "code"),
        [
            ("planner", "approve", "planner", "", "TEAM_LEAD_REQUIRED"),
            ("planner", "submit", "free", "p", "TEAM_PLAN_INVALID"),
            ("lead", "submit", "lead", "p", "TEAM_PLAN_INVALID"),
            ("lead", "approve", "planner", "", "TEAM_PLAN_INVALID"),  # nothing submitted yet
            ("lead", "approve", "free", "", "TEAM_PLAN_INVALID"),  # spawned without plan approval
            ("lead", "approve", "ghost", "", "TEAM_MEMBER_NOT_FOUND"),  # as `dsh team plan approve ghost` answers
            ("lead", "reject", "ghost", "no", "TEAM_MEMBER_NOT_FOUND"),
            ("free", "submit", "lead", "p", "TEAM_PLAN_INVALID"),
            ("planner", "later", "lead", "p", "TEAM_INVALID_ARGUMENT"),
            ("planner", "submit", "lead", "x" * 16385, "TEAM_INVALID_ARGUMENT"),
            ("planner", "submit", "lead", 3, "TEAM_INVALID_ARGUMENT"),
        ],
    )
    async def test_a_step_out_of_place_is_refused_and_writes_nothing(
        self, tmp_path: Path, who: str, plan: str, target: str, text: Any, code: str
    ) -> None:
        host = await open_host(tmp_path)
        try:
            lead = await lead_in(host, workspace(tmp_path))
            members = {"lead": lead, "planner": await teammate(host, lead, "planner", plan=True),
                       "free": await teammate(host, lead, "free", 2)}
            with pytest.raises(TeamError) as refused:
                await team_service(host).plan_step(members[who], plan=plan, target=target, text=text)
            assert refused.value.code == code
        finally:
            await host.close()
        assert len(stored_controls(tmp_path).plans) == 1 and not notices(tmp_path)

    async def test_the_refusal_says_no_plan_was_submitted_and_a_bare_reject_sends_no_empty_feedback(
        self, tmp_path: Path
    ) -> None:
        host = await open_host(tmp_path)
        try:
            lead = await lead_in(host, workspace(tmp_path))
            planner = await teammate(host, lead, "planner", plan=True)
            service = team_service(host)
            with pytest.raises(TeamError) as early:
                await service.plan_step(lead, plan="approve", target="planner", text="")
            assert early.value.message == '"planner" has not submitted a plan yet: cannot approve it'
            await service.plan_step(planner, plan="submit", target="lead", text="p")
            await service.plan_step(lead, plan="reject", target="planner", text="  ")
            with pytest.raises(TeamError) as again:
                await service.plan_step(lead, plan="reject", target="planner", text="")
            assert again.value.message == ('"planner" has not submitted a plan since the last was rejected: '
                                           "cannot reject it")
        finally:
            await host.close()
        assert [text for _, text in notices(tmp_path)][1] == "Your plan was rejected; revise it and submit again."

    async def test_approved_is_final(self, tmp_path: Path) -> None:
        host = await open_host(tmp_path)
        try:
            lead = await lead_in(host, workspace(tmp_path))
            planner = await teammate(host, lead, "planner", plan=True)
            service = team_service(host)
            await service.plan_step(planner, plan="submit", target="lead", text="p")
            await service.plan_step(lead, plan="approve", target="planner", text="")
            for caller, plan, target in ((planner, "submit", "lead"), (lead, "reject", "planner")):
                with pytest.raises(TeamError) as refused:
                    await service.plan_step(caller, plan=plan, target=target, text="again")
                assert refused.value.code == "TEAM_PLAN_INVALID"
                assert refused.value.message.startswith('"planner" already has an approved plan: cannot ')
        finally:
            await host.close()

    async def test_a_name_on_the_roster_cannot_become_plan_gated(self, tmp_path: Path) -> None:
        host = await open_host(tmp_path)
        try:
            lead = await lead_in(host, workspace(tmp_path))
            await teammate(host, lead, "free")
            service = team_service(host)
            with pytest.raises(TeamError) as taken:
                await service.plans.require(service.journals.get(lead.session), lead.id, "free")
            assert taken.value.code == "TEAM_MEMBER_NAME_TAKEN"
            await service.plans.require(service.journals.get(lead.session), lead.id, "later")
            await service.plans.require(service.journals.get(lead.session), lead.id, "later")  # a retried spawn
        finally:
            await host.close()
        assert list(stored_controls(tmp_path).plans) == ["later"]


class TestSpawn:
    async def test_spawn_records_the_approval_before_the_teammate_exists(self, tmp_path: Path) -> None:
        """plan_approval (or the profile default) writes ``required`` before the provisioning record."""
        host = await open_host(tmp_path, {"plan_approval": True})
        try:
            lead = await lead_in(host, workspace(tmp_path))
            service = team_service(host)
            spawn = {"description": "d", "prompt": [text_block("go")], "provider": "spawn"}
            with pytest.raises(TeamError) as bad:
                await service.spawn_teammate(lead, name="odd", plan_approval="yes", **spawn)
            assert bad.value.code == "TEAM_INVALID_ARGUMENT"
            await service.spawn_teammate(lead, name="by-default", **spawn)
            await service.spawn_teammate(lead, name="opted-out", plan_approval=False, **spawn)
            await host.quiesce()
        finally:
            await host.close()
        events = [e for e in lead_log(tmp_path) if e.type in ("team/plan", "team/member")]
        assert [(e.type, e.value().get("member")) for e in events][:2] == [("team/plan", "by-default"),
                                                                       ("team/member", events[1].value()["member"])]
        assert events[1].value()["member"]["name"] == "by-default"
        assert list(stored_controls(tmp_path).plans) == ["by-default"]
