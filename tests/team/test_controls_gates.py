"""Quality gates through the real service: checks run as real commands in the workspace, every run is a durable record.

The oracle of each test is the workspace and the Lead's log as a restarted
process reads them from disk: what ran (a command appends to a file), what the
records say, and the task's status.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from dsh_team.controls import (
    CONTROLS_VERSION, TEAM_CHECK_FINISHED, TEAM_CHECK_STARTED, CheckFinishedRecord, CheckResult, CheckStartedRecord,
    CheckStep, check_steps,
)
from dsh_team.log.journal import Append
from dsh_team.config import TeamConfig
from dsh_team.core.snapshots import TeamTaskSnapshot
from dsh_team.errors import TeamError
from host_spec.host.store.jsonl import JsonlStore
from host_spec.records import AbortSignal

from controls_kit import lead_in, of_type, open_host, stored_controls, team_service, teammate, workspace

#: A check that passes once ``fixed`` exists, and counts its runs in ``runs.txt``.
CHECK = "echo run >> runs.txt; echo checking; test -f fixed || { echo 'fixed is missing' >&2; exit 2; }"


async def claimed(host: Any, member: Any, **create: Any) -> Any:
    service = team_service(host)
    task = await service.create_task(member, subject="build", description="build it", **create)
    return await service.update_task(member, task_id=task.id, expected_revision=1, action="claim")


def runs(root: Path) -> int:
    path = root / "runs.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


def lead_log(tmp_path: Path) -> list[Any]:
    return JsonlStore(tmp_path / "data").read("lead")[1]


class TestGatedComplete:
    async def test_a_failing_check_keeps_the_task_in_progress_then_a_fix_completes_it(self, tmp_path: Path) -> None:
        """TEAM_TASK_CHECK_FAILED carries the tail; the task stays in_progress; the next complete runs again and passes."""
        root = workspace(tmp_path)
        host = await open_host(tmp_path)
        try:
            lead = await lead_in(host, root)
            builder = await teammate(host, lead, "builder")
            service = team_service(host)
            task = await claimed(host, builder, checks=[CHECK])
            assert task.checks == (CHECK,)
            with pytest.raises(TeamError) as failed:
                await service.update_task(builder, task_id=task.id, expected_revision=2, action="complete")
            assert failed.value.code == "TEAM_TASK_CHECK_FAILED"
            assert "exited 2" in failed.value.message and "fixed is missing" in failed.value.message
            assert "stays in_progress" in failed.value.message
            current = service.get_task(builder, task.id)
            assert (current.status, current.revision) == ("in_progress", 2)
            (root / "fixed").write_text("yes")
            done = await service.update_task(builder, task_id=task.id, expected_revision=2, action="complete")
            assert (done.status, done.revision) == ("completed", 3)
        finally:
            await host.close()
        assert runs(root) == 2
        controls = stored_controls(tmp_path)
        first, second = controls.listed()
        assert first.finished is not None and not first.finished.passed
        assert first.finished.results[0].exit_code == 2 and "fixed is missing" in first.finished.results[0].tail
        assert second.finished is not None and second.finished.passed and not second.finished.rerun
        assert (first.started.member, first.started.revision) == ("builder", 2)
        types = [e.type for e in lead_log(tmp_path) if e.type.startswith("team/check") or e.type == "team/task"]
        assert types[-3:] == [TEAM_CHECK_STARTED, TEAM_CHECK_FINISHED, "team/task"]  # completed only after a pass
        assert controls.failure is None and not controls.open

    async def test_profile_gates_apply_to_every_task_and_named_checks_resolve(self, tmp_path: Path) -> None:
        """on_complete gates run after the task's own checks; a name from [checks] runs its command; repeats run once."""
        root = workspace(tmp_path)
        config = {"checks": {"unit": "echo unit >> order.txt"}, "gates": {"on_complete": ["echo gate >> order.txt", "unit"]}}
        host = await open_host(tmp_path, config)
        try:
            lead = await lead_in(host, root)
            service = team_service(host)
            plain = await claimed(host, lead)
            await service.update_task(lead, task_id=plain.id, expected_revision=2, action="complete")
            named = await claimed(host, lead, checks=["unit", "echo own >> order.txt"])
            await service.update_task(lead, task_id=named.id, expected_revision=2, action="complete")
        finally:
            await host.close()
        assert (root / "order.txt").read_text().split() == ["gate", "unit", "unit", "own", "gate"]
        steps = [run.started.steps for run in stored_controls(tmp_path).listed()]
        assert [(s.name, s.command) for s in steps[1]] == [
            ("unit", "echo unit >> order.txt"), (None, "echo own >> order.txt"), (None, "echo gate >> order.txt")
        ]

    async def test_without_gates_complete_appends_no_check_record(self, tmp_path: Path) -> None:
        host = await open_host(tmp_path)
        try:
            lead = await lead_in(host, workspace(tmp_path))
            task = await claimed(host, lead)
            await team_service(host).update_task(lead, task_id=task.id, expected_revision=2, action="complete")
        finally:
            await host.close()
        assert not stored_controls(tmp_path).runs

    async def test_a_rejected_completion_runs_nothing(self, tmp_path: Path) -> None:
        """A stale revision or a member that does not own the task fails before any record or command."""
        root = workspace(tmp_path)
        host = await open_host(tmp_path)
        try:
            lead = await lead_in(host, root)
            builder = await teammate(host, lead, "builder")
            other = await teammate(host, lead, "other", 2)
            service = team_service(host)
            task = await claimed(host, builder, checks=[CHECK])
            for caller, revision, code in ((builder, 1, "TEAM_TASK_STALE_REVISION"), (other, 2, "TEAM_TASK_UNAUTHORIZED")):
                with pytest.raises(TeamError) as refused:
                    await service.update_task(caller, task_id=task.id, expected_revision=revision, action="complete")
                assert refused.value.code == code
            with pytest.raises(TeamError) as unknown:
                await service.update_task(builder, task_id="task-9", expected_revision=1, action="complete")
            assert unknown.value.code == "TEAM_TASK_NOT_FOUND"
        finally:
            await host.close()
        assert runs(root) == 0 and not stored_controls(tmp_path).runs

    async def test_no_workspace_fails_loudly_and_writes_nothing(self, tmp_path: Path) -> None:
        for workspace_plugin, cwd in ((True, None), (False, workspace(tmp_path))):
            data = tmp_path / f"case-{workspace_plugin}"
            host = await open_host(data, workspace=workspace_plugin)
            try:
                lead = await lead_in(host, cwd)
                task = await claimed(host, lead, checks=["true"])
                with pytest.raises(TeamError) as failed:
                    await team_service(host).update_task(lead, task_id=task.id, expected_revision=2, action="complete")
                assert failed.value.code == "TEAM_TASK_CHECK_FAILED" and "no workspace" in failed.value.message
            finally:
                await host.close()
            assert not stored_controls(data).runs

    async def test_a_timeout_an_interrupt_and_a_refused_command_are_failures(self, tmp_path: Path) -> None:
        root = workspace(tmp_path)
        host = await open_host(tmp_path, {"gates": {"timeout_ms": 300}})
        try:
            lead = await lead_in(host, root)
            service = team_service(host)
            slow = await claimed(host, lead, checks=["sleep 5"])
            with pytest.raises(TeamError) as timed:
                await service.update_task(lead, task_id=slow.id, expected_revision=2, action="complete")
            assert 'check "sleep 5" timed out after 0.3 s and was killed.' in timed.value.message
            # sleep printed nothing: no bare "Output tail:" heading with nothing under it.
            assert timed.value.message.endswith("Fix it and complete again. It printed nothing.")
            signal = AbortSignal()
            host.call_soon(lambda: signal.abort("stop"))
            with pytest.raises(TeamError) as stopped:
                await service.update_task(lead, task_id=slow.id, expected_revision=2, action="complete", signal=signal)
            assert "was interrupted" in stopped.value.message
        finally:
            await host.close()
        results = [run.finished.results[-1] for run in stored_controls(tmp_path).listed() if run.finished]
        assert [(r.timed_out, r.interrupted, r.exit_code) for r in results] == [(True, False, None), (False, True, None)]
        assert [r.timeout_ms for r in results] == [300, None]

    async def test_a_command_the_runner_refuses_is_a_failed_run(self, tmp_path: Path) -> None:
        """A gate timeout above the workspace's bash maximum: the runner refuses, the run fails with its message."""
        host = await open_host(tmp_path, {"gates": {"timeout_ms": 700_000}})
        try:
            lead = await lead_in(host, workspace(tmp_path))
            task = await claimed(host, lead, checks=["true"])
            with pytest.raises(TeamError) as failed:
                await team_service(host).update_task(lead, task_id=task.id, expected_revision=2, action="complete")
            assert "exceeds the maximum" in failed.value.message
        finally:
            await host.close()

    async def test_a_second_completion_while_checks_run_is_refused(self, tmp_path: Path) -> None:
        root = workspace(tmp_path)
        (root / "hold").write_text("")
        host = await open_host(tmp_path)
        try:
            lead = await lead_in(host, root)
            service = team_service(host)
            task = await claimed(host, lead, checks=["while [ -f hold ]; do sleep 0.02; done"])
            first = asyncio.ensure_future(
                service.update_task(lead, task_id=task.id, expected_revision=2, action="complete")
            )
            while not service.controls_state(lead).open:
                await asyncio.sleep(0.01)
            with pytest.raises(TeamError) as running:
                await service.update_task(lead, task_id=task.id, expected_revision=2, action="complete")
            assert running.value.code == "TEAM_TASK_INVALID_TRANSITION" and "running already" in running.value.message
            (root / "hold").unlink()
            assert (await first).status == "completed"
        finally:
            await host.close()


class TestSteps:
    def test_check_steps_dedupes_by_command(self) -> None:
        config = TeamConfig.from_mapping({"checks": {"t": "make test"}, "gates": {"on_complete": ["make test", "lint"]}})
        task = TeamTaskSnapshot(id="task-1", revision=1, subject="s", description="d", status="pending", blocked_by=(),
                                write_scopes=(), checks=("t", "make test"))
        assert [(s.name, s.command) for s in check_steps(config, task)] == [("t", "make test"), (None, "lint")]

    @pytest.mark.parametrize("checks", [[""], ["  "], ["x" * 2001], ["a"] * 17, "make", [1]])
    async def test_bad_checks_are_refused_at_creation(self, tmp_path: Path, checks: Any) -> None:
        host = await open_host(tmp_path)
        try:
            lead = await lead_in(host, workspace(tmp_path))
            with pytest.raises(TeamError) as refused:
                await team_service(host).create_task(lead, subject="s", description="d", checks=checks)
            assert refused.value.code == "TEAM_INVALID_ARGUMENT" and refused.value.details["field"] == "checks"
        finally:
            await host.close()


async def cut_run(host: Any, lead: Any, task_id: str, revision: int, member: str, command: str, *,
                  finished: bool | None = None) -> str:
    """Append what a process killed during a check leaves: a started run (and, when ``finished`` is set, its end)."""
    journal = team_service(host).journals.get(lead.session)
    started = CheckStartedRecord(version=CONTROLS_VERSION, team_id=lead.id, run_id="check-cut", task_id=task_id,
                                 revision=revision, member=member, steps=(CheckStep(command=command),))
    await journal.transact(lambda state: Append(TEAM_CHECK_STARTED, started), what="run")
    if finished is not None:
        end = CheckFinishedRecord(version=CONTROLS_VERSION, team_id=lead.id, run_id="check-cut", passed=finished,
                                  results=(CheckResult(command=command, exit_code=0 if finished else 1),))
        await journal.transact(lambda state: Append(TEAM_CHECK_FINISHED, end), what="run")
    return "check-cut"


class TestRecovery:
    async def crashed(self, tmp_path: Path, command: str, finished: bool | None = None) -> Path:
        root = workspace(tmp_path)
        host = await open_host(tmp_path)
        try:
            lead = await lead_in(host, root)
            builder = await teammate(host, lead, "builder")
            task = await claimed(host, builder, checks=[command])
            await cut_run(host, lead, task.id, 2, "builder", command, finished=finished)
        finally:
            await host.close()
        return root

    async def resumed(self, tmp_path: Path) -> tuple[Any, Any]:
        host = await open_host(tmp_path)
        lead = await lead_in(host, None, resume=True)
        await host.quiesce()
        return host, lead

    async def test_a_cut_run_is_run_again_on_resume_and_completes_its_task(self, tmp_path: Path) -> None:
        root = await self.crashed(tmp_path, "echo run >> runs.txt")
        assert runs(root) == 0 and stored_controls(tmp_path).open  # started, never finished, never run
        host, lead = await self.resumed(tmp_path)
        try:
            service = team_service(host)
            assert service.get_task(lead, "task-1").status == "completed"
            assert not service.gates.unsettled(service.journals.get(lead.session))
        finally:
            await host.close()
        assert runs(root) == 1
        run = stored_controls(tmp_path).runs["check-cut"]
        assert run.finished is not None and run.finished.passed and run.finished.rerun
        told = [m["message"]["content"][0]["text"] for m in of_type(lead_log(tmp_path), "team/message/queued")]
        assert told == ["The checks of task-1 ran again after a restart and passed: it is completed."]

    async def test_a_failing_rerun_keeps_the_task_in_progress_and_tells_its_owner(self, tmp_path: Path) -> None:
        await self.crashed(tmp_path, "echo broken; exit 3")
        host, lead = await self.resumed(tmp_path)
        try:
            assert team_service(host).get_task(lead, "task-1").status == "in_progress"
        finally:
            await host.close()
        told = [m["message"]["content"][0]["text"] for m in of_type(lead_log(tmp_path), "team/message/queued")]
        assert len(told) == 1 and told[0].startswith("The checks ran again after a restart. task-1 stays in_progress")
        assert "exited 3" in told[0] and "broken" in told[0]
        host, lead = await self.resumed(tmp_path)  # settled: a second resume runs nothing again
        await host.close()
        assert len(stored_controls(tmp_path).listed()) == 1

    async def test_a_passed_run_whose_completion_was_cut_completes_on_resume(self, tmp_path: Path) -> None:
        root = await self.crashed(tmp_path, "echo run >> runs.txt", finished=True)
        host, lead = await self.resumed(tmp_path)
        try:
            assert team_service(host).get_task(lead, "task-1").status == "completed"
        finally:
            await host.close()
        assert runs(root) == 0  # it had passed: nothing runs again

    async def test_a_failed_finished_run_is_settled(self, tmp_path: Path) -> None:
        await self.crashed(tmp_path, "false", finished=False)
        host, lead = await self.resumed(tmp_path)
        try:
            assert team_service(host).get_task(lead, "task-1").status == "in_progress"
        finally:
            await host.close()
        assert not of_type(lead_log(tmp_path), "team/message/queued")

    async def test_recovery_without_a_workspace_is_logged_not_raised(self, tmp_path: Path) -> None:
        root = await self.crashed(tmp_path, "true")
        host = await open_host(tmp_path, workspace=False)
        try:
            lead = await lead_in(host, None, resume=True)
            await host.quiesce()
            assert team_service(host).get_task(lead, "task-1").status == "in_progress"
        finally:
            await host.close()
        assert stored_controls(tmp_path).open

    async def test_a_lead_run_is_settled_without_a_notice_and_a_live_run_is_left_alone(self, tmp_path: Path) -> None:
        root = workspace(tmp_path)
        host = await open_host(tmp_path)
        try:
            lead = await lead_in(host, root)
            task = await claimed(host, lead, checks=["echo run >> runs.txt"])
            run_id = await cut_run(host, lead, task.id, 2, "lead", "echo run >> runs.txt")
            service = team_service(host)
            journal = service.journals.get(lead.session)
            assert [run.started.run_id for run in service.gates.unsettled(journal)] == [run_id]
            service.gates.running.add(run_id)  # as while this process runs it: recovery leaves it alone
            assert not service.gates.unsettled(journal)
        finally:
            await host.close()
        host, lead = await self.resumed(tmp_path)
        try:
            assert team_service(host).get_task(lead, "task-1").status == "completed"
        finally:
            await host.close()
        assert runs(root) == 1 and not of_type(lead_log(tmp_path), "team/message/queued")
