"""Checkpoints on a real host: written at a clean stop and every N events, loaded by a cold resume.

A real reference host over the JSONL store (real files, fsync, rename), the Team
service and the invariant plugin. A resume must give the state the log holds
whether it starts from a checkpoint or not; a checkpoint is shown to be used by
altering its state (its mark still fits): what the resumed Team reports then
comes from it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from structlog.testing import capture_logs

from dsh_team.api import TeamServiceAPI
from dsh_team.checkpoint import NAME, CheckpointKeeper, TeamCheckpoint, decode_checkpoint, encode_checkpoint
from dsh_team.config import TeamConfig
from dsh_team.errors import TeamConfigError
from dsh_team.service import TeamService
from host_spec.host.app import Host
from host_spec.host.cli.main import main
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.store.session import Session
from host_spec.testing import MemoryCheckpoints


async def open_host(path: Path, config: dict[str, Any] | None = None) -> Host:
    host = await Host.open(path, None, ScriptedModel.from_mapping({}))
    host.plugins.load("dsh-team", config or {})
    host.plugins.load("dsh-team-invariant")
    return host


def teams(host: Host) -> TeamService:
    found = host.service(TeamServiceAPI)
    assert isinstance(found, TeamService)
    return found


async def run_lead(path: Path, tasks: int, config: dict[str, Any] | None = None) -> int:
    """A Lead that creates ``tasks`` tasks and stops cleanly; returns its log length."""
    host = await open_host(path, config)
    try:
        lead = host.start_agent(await host.create_session("lead"), name="lead")
        for index in range(tasks):
            await teams(host).create_task(lead, subject=f"task {index}", description="checkpointed")
        return lead.session.last_seq
    finally:
        await host.close()


async def resumed_subjects(path: Path) -> list[str]:
    host = await open_host(path)
    try:
        lead = host.start_agent(await host.resume_session("lead"), name="lead", source="resume")
        return [task.subject for task in teams(host).list_tasks(lead)]
    finally:
        await host.close()


def stored(path: Path) -> TeamCheckpoint:
    found = JsonlStore(path).checkpoints.load("lead", NAME)
    assert found is not None
    return decode_checkpoint(found[1])


class TestWriting:
    async def test_a_clean_stop_writes_one_at_the_end_of_the_log(self, tmp_path: Path) -> None:
        length = await run_lead(tmp_path, 3, {"checkpoint_every": 0})
        checkpoint = stored(tmp_path)
        assert checkpoint.seq == length == len(JsonlStore(tmp_path).read("lead")[1])
        assert [task.subject for task in checkpoint.team.tasks.listed()] == ["task 0", "task 1", "task 2"]

    async def test_every_n_events_while_the_team_runs(self, tmp_path: Path) -> None:
        host = await open_host(tmp_path, {"checkpoint_every": 4})
        try:
            lead = host.start_agent(await host.create_session("lead"), name="lead")
            for index in range(9):
                await teams(host).create_task(lead, subject=f"task {index}", description="checkpointed")
            await teams(host).checkpoints.drain()  # the writer thread has stored what was queued
            running = stored(tmp_path)
            assert 4 <= running.seq < lead.session.last_seq
            assert len(running.team.tasks.listed()) < 9
        finally:
            await host.close()
        assert stored(tmp_path).seq == len(JsonlStore(tmp_path).read("lead")[1])

    async def test_a_member_session_gets_none(self, tmp_path: Path) -> None:
        host = await open_host(tmp_path, {"checkpoint_every": 1})
        try:
            session = await host.create_session("solo")
            session.append("note/test", {"n": 1})
            await session.flush()
        finally:
            await host.close()
        assert JsonlStore(tmp_path).checkpoints.load("solo", NAME) is None

    def test_the_interval_is_validated_by_name(self) -> None:
        assert TeamConfig().checkpoint_every == 10_000
        assert TeamConfig.from_mapping({"checkpoint_every": 0}).checkpoint_every == 0
        for bad in (-1, 1.5, "10", True, None, 2**53):
            with pytest.raises(TeamConfigError) as caught:
                TeamConfig.from_mapping({"checkpoint_every": bad})
            assert caught.value.path == "checkpoint_every"
            assert caught.value.message == "checkpoint_every must be zero or a positive safe integer"


class TestLoading:
    async def test_a_cold_resume_starts_from_it(self, tmp_path: Path) -> None:
        await run_lead(tmp_path, 3)
        checkpoint = stored(tmp_path)
        board = checkpoint.team.tasks
        renamed = board.tasks.set("task-1", msgspec.structs.replace(board.tasks["task-1"], subject="from the checkpoint"))
        altered = msgspec.structs.replace(
            checkpoint, team=msgspec.structs.replace(checkpoint.team, tasks=msgspec.structs.replace(board, tasks=renamed))
        )
        JsonlStore(tmp_path).checkpoints.save("lead", NAME, checkpoint.seq, encode_checkpoint(altered))
        assert await resumed_subjects(tmp_path) == ["from the checkpoint", "task 1", "task 2"]

    async def test_the_resumed_team_continues_and_its_next_checkpoint_equals_a_full_fold(self, tmp_path: Path) -> None:
        await run_lead(tmp_path, 2)
        host = await open_host(tmp_path)
        try:
            lead = host.start_agent(await host.resume_session("lead"), name="lead", source="resume")
            await teams(host).create_task(lead, subject="after the resume", description="tail")
        finally:
            await host.close()
        continued = stored(tmp_path)
        JsonlStore(tmp_path).checkpoints.path("lead", NAME).unlink()
        assert await resumed_subjects(tmp_path) == ["task 0", "task 1", "after the resume"]
        assert stored(tmp_path).team == continued.team  # rewritten at the clean stop from a full fold

    async def test_a_damaged_file_is_ignored_and_the_full_fold_runs(self, tmp_path: Path) -> None:
        await run_lead(tmp_path, 2)
        path = JsonlStore(tmp_path).checkpoints.path("lead", NAME)
        data = bytearray(path.read_bytes())
        data[-10] ^= 0x01
        path.write_bytes(bytes(data))
        with capture_logs() as logs:
            assert await resumed_subjects(tmp_path) == ["task 0", "task 1"]
        assert [entry["event"] for entry in logs if entry["log_level"] == "warning"] == ["checkpoint.damaged"]

    async def test_a_stale_checkpoint_is_ignored_with_one_warning(self, tmp_path: Path) -> None:
        await run_lead(tmp_path, 2)
        checkpoint = stored(tmp_path)
        beyond = msgspec.structs.replace(checkpoint, seq=checkpoint.seq + 5)
        JsonlStore(tmp_path).checkpoints.save("lead", NAME, beyond.seq, encode_checkpoint(beyond))
        with capture_logs() as logs:
            assert await resumed_subjects(tmp_path) == ["task 0", "task 1"]
        warnings = [entry for entry in logs if entry["log_level"] == "warning"]
        assert [entry["event"] for entry in warnings] == ["team.checkpoint_ignored"]
        assert "but the log holds" in warnings[0]["reason"]


class TestWithoutTheInvariant:
    async def test_the_service_alone_reads_and_uses_it(self, tmp_path: Path) -> None:
        await run_lead(tmp_path, 2)
        checkpoint = stored(tmp_path)
        altered = msgspec.structs.replace(checkpoint, team=msgspec.structs.replace(checkpoint.team, mode=False))
        JsonlStore(tmp_path).checkpoints.save("lead", NAME, checkpoint.seq, encode_checkpoint(altered))
        host = await Host.open(tmp_path, None, ScriptedModel.from_mapping({}))
        host.plugins.load("dsh-team", {})
        try:
            lead = host.start_agent(await host.resume_session("lead"), name="lead", source="resume")
            assert teams(host).journals.get(lead.session).state.mode is False
        finally:
            await host.close()


class TestHooks:
    async def test_a_lead_session_leaving_the_live_store_saves_its_checkpoint(self, tmp_path: Path) -> None:
        host = await open_host(tmp_path, {"checkpoint_every": 0})
        try:
            session = await host.create_session("lead")
            lead = host.start_agent(session, name="lead")
            await teams(host).create_task(lead, subject="one", description="d")
            await host.agents.dispose(lead)
            await host.release_session(session)
            await teams(host).checkpoints.drain()
            assert stored(tmp_path).seq == session.last_seq
        finally:
            await host.close()

    async def test_a_live_session_seen_again_keeps_its_fold(self, tmp_path: Path) -> None:
        """A second ``session_created`` (a plugin reload's replay) must not roll a live fold back to the checkpoint."""
        await run_lead(tmp_path, 2)
        host = await open_host(tmp_path)
        try:
            lead = host.start_agent(await host.resume_session("lead"), name="lead", source="resume")
            await teams(host).create_task(lead, subject="after", description="tail")
            journal = teams(host).journals.find("lead")
            teams(host).session_created(lead.session)
            assert teams(host).journals.find("lead") is journal
            assert [task.subject for task in teams(host).list_tasks(lead)] == ["task 0", "task 1", "after"]
        finally:
            await host.close()

    async def test_the_disposal_of_a_stale_session_object_saves_nothing(self, tmp_path: Path) -> None:
        host = await open_host(tmp_path)
        try:
            lead = host.start_agent(await host.create_session("lead"), name="lead")
            await teams(host).create_task(lead, subject="one", description="d")
            stale = Session(lead.session.header, events=list(lead.session.events), durable_seq=lead.session.last_seq)
            teams(host).session_disposed(stale)
            assert teams(host).journals.find("lead") is not None
            assert JsonlStore(tmp_path).checkpoints.load("lead", NAME) is None
        finally:
            await host.close()
        assert JsonlStore(tmp_path).checkpoints.load("lead", NAME) is not None


class _Failing(MemoryCheckpoints):
    """A store whose medium fails every save (a full disk)."""

    def save(self, session_id: str, name: str, seq: int, payload: bytes) -> None:
        raise OSError(28, "No space left on device")


class TestKeeper:
    async def test_a_failed_write_is_logged_and_forgotten(self, tmp_path: Path) -> None:
        await run_lead(tmp_path, 1)
        host = await open_host(tmp_path)
        try:
            session = await host.resume_session("lead")
            keeper = CheckpointKeeper(_Failing(), 1, teams(host).folds.capture)
            with capture_logs() as logs:
                assert keeper.save(session) is True
                await keeper.drain()
            assert [entry["event"] for entry in logs] == ["team.checkpoint_unsaved"]
            assert keeper.save(session) is False  # that seq was handled: not queued again
        finally:
            await host.close()

    async def test_nothing_is_saved_without_a_store_or_with_events_pending(self, tmp_path: Path) -> None:
        await run_lead(tmp_path, 1)
        host = await open_host(tmp_path)
        try:
            session = await host.resume_session("lead")
            assert CheckpointKeeper(None, 1, teams(host).folds.capture).save(session) is False
            store = MemoryCheckpoints()
            keeper = CheckpointKeeper(store, 1, teams(host).folds.capture)
            session.append("note/test", {"n": 1})
            assert keeper.save(session) is False  # not durable yet
            await session.flush()
            assert keeper.save(session) is True
            await keeper.drain()
            await keeper.drain()  # nothing pending, no writer: a no-op
            assert store.load("lead", NAME) is not None and store.load("lead", NAME)[0] == session.last_seq  # type: ignore[index]
        finally:
            await host.close()


def show_json(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> dict[str, Any]:
    capsys.readouterr()  # what the run before it logged
    assert main(["team", "show", "--json", "--data-dir", str(path), *extra, "lead"]) == 0
    shown: dict[str, Any] = json.loads(capsys.readouterr().out)
    return shown


class TestTeamShow:
    """``dsh team show`` is synchronous (it runs its own loop), so these tests are too."""

    def test_the_view_is_the_same_from_the_checkpoint_and_from_the_whole_log(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        asyncio.run(run_lead(tmp_path, 3))
        from_checkpoint = show_json(capsys, tmp_path)
        JsonlStore(tmp_path).checkpoints.path("lead", NAME).unlink()
        assert show_json(capsys, tmp_path) == from_checkpoint
        assert [task["subject"] for task in from_checkpoint["tasks"]] == ["task 0", "task 1", "task 2"]

    def test_it_starts_from_a_confirmed_checkpoint_but_not_at_an_earlier_seq(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        length = asyncio.run(run_lead(tmp_path, 2))
        checkpoint = stored(tmp_path)
        board = checkpoint.team.tasks
        renamed = board.tasks.set("task-1", msgspec.structs.replace(board.tasks["task-1"], subject="from the checkpoint"))
        altered = msgspec.structs.replace(
            checkpoint, team=msgspec.structs.replace(checkpoint.team, tasks=msgspec.structs.replace(board, tasks=renamed))
        )
        JsonlStore(tmp_path).checkpoints.save("lead", NAME, checkpoint.seq, encode_checkpoint(altered))
        assert [task["subject"] for task in show_json(capsys, tmp_path)["tasks"]] == ["from the checkpoint", "task 1"]
        at = show_json(capsys, tmp_path, "--at", str(length - 1))  # an earlier position folds the log itself
        assert "task 0" in [task["subject"] for task in at["tasks"]]
