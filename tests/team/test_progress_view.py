"""The board as a run's progress items (``dsh.progress``, an ACP editor's plan), read from a real Team."""

from __future__ import annotations

from pathlib import Path

from dsh_team.views.progress import board_progress
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.progress import ProgressItem
from roster_kit import lead, open_team, teams_of


async def test_one_item_per_live_task_with_its_status_and_owner(tmp_path: Path) -> None:
    host = await open_team(tmp_path)
    try:
        root = await lead(host)
        assert board_progress(host, root) == []
        service = teams_of(host)
        first = await service.create_task(root, subject="write intro", description="d")
        second = await service.create_task(root, subject="write outro", description="d")
        gone = await service.create_task(root, subject="scrap", description="d")
        claimed = await service.update_task(root, task_id=first.id, expected_revision=1, action="claim")
        await service.update_task(root, task_id=first.id, expected_revision=claimed.revision, action="complete")
        await service.update_task(root, task_id=second.id, expected_revision=1, action="claim")
        await service.update_task(root, task_id=gone.id, expected_revision=1, action="delete")
        items = board_progress(host, root)
    finally:
        await host.close()
    assert items == [ProgressItem(f"{first.id} write intro (lead)", "completed"),
                     ProgressItem(f"{second.id} write outro (lead)", "in_progress")]


async def test_pending_unowned_and_no_team_plugin(tmp_path: Path) -> None:
    host = await open_team(tmp_path)
    try:
        root = await lead(host)
        task = await teams_of(host).create_task(root, subject="later", description="d")
        assert board_progress(host, root) == [ProgressItem(f"{task.id} later", "pending")]
    finally:
        await host.close()
    bare = await Host.open(tmp_path / "bare", None, ScriptedModel.from_mapping({}))
    try:
        assert board_progress(bare, await lead(bare)) is None  # nothing to say about a run without a Team
    finally:
        await bare.close()
