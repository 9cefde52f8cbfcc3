"""A damaged header or a broken Team record is stated, never silently worked around.

Real JSONL logs written by the reference store; ``dsh`` runs in process through
its entry point (``team show``, ``resume``) and, for the Team failure during a
resume, as a real run whose teammates call Team tools.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from host_spec.host.cli.main import main
from host_spec.host.store.jsonl import JsonlStore
from host_spec.records import AbortSignal

from roster_kit import lead, open_team, spawn, until_released
from test_cli_show import write_session


def damage_header(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(b"{not a header" + data[data.index(b"\n") :])


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


class TestDamagedHeader:
    def test_the_only_root_with_a_damaged_header_is_corrupt_not_missing(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        """``team show`` and ``resume`` name the damaged file with SESSION_CORRUPT."""
        path = write_session(tmp_path, "r1", [("test/marker", {})])
        damage_header(path)
        for argv in (["team", "show"], ["resume"]):
            code, err = run(capsys, *argv, "--data-dir", str(tmp_path))
            assert code == 2 and f"dsh: SESSION_CORRUPT: {path}" in err, err
            assert "no root session" not in err

    def test_a_damaged_newest_root_is_never_replaced_by_an_older_one(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        """Two roots, the newest damaged: SESSION_CORRUPT, and the older root is not resumed or shown."""
        write_session(tmp_path, "old", [("test/marker", {})], created=1000)
        newest = write_session(tmp_path, "new", [("test/marker", {})], created=2000)
        before = JsonlStore(tmp_path).path("old").read_bytes()
        damage_header(newest)
        for argv in (["team", "show"], ["resume"]):
            code, err = run(capsys, *argv, "--data-dir", str(tmp_path))
            assert code == 2 and f"dsh: SESSION_CORRUPT: {newest}" in err, err
        assert JsonlStore(tmp_path).path("old").read_bytes() == before  # nothing ran on the older root
        code, _ = run(capsys, "team", "show", "--data-dir", str(tmp_path), "old")
        assert code == 0  # naming a healthy session still works


class TestBrokenTeamRecord:
    def test_resume_states_the_failure_with_its_seq(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """``dsh resume`` of a Lead log with a record the fold rejects says TEAM_STREAM_FAILED and the seq."""
        task = {"id": "task-1", "revision": 5, "subject": "s", "description": "d", "status": "pending",
                "blocked_by": [], "write_scopes": []}  # fmt: skip
        write_session(tmp_path, "r1", [("test/marker", {}), ("team/task", {"version": 2, "team_id": "r1", "task": task})])
        code, err = run(capsys, "resume", "--data-dir", str(tmp_path), "--profile", "agent-teams", "r1")
        assert "TEAM_STREAM_FAILED" in err and "seq=2" in err, err

    async def test_a_member_resumed_after_the_failure_gets_it_from_its_team_tools(self, tmp_path: Path) -> None:
        """Not ``unknown tool``: a teammate's Team tools stay and answer TEAM_STREAM_FAILED naming the seq."""
        host = await open_team(tmp_path, {"worker": [{"text": "ok"}]})
        host.plugins.load("dsh-team-tools", {})
        root = await lead(host)
        view = await spawn(host, root, "worker")
        await until_released(host, view.id)
        task = {"id": "task-1", "revision": 5, "subject": "s", "description": "d", "status": "pending",
                "blocked_by": [], "write_scopes": []}  # fmt: skip
        root.session.append("team/task", {"version": 2, "team_id": root.id, "task": task})
        seq = root.session.last_seq
        worker = host.start_agent(await host.resume_session(view.id), name="worker", source="resume")
        for name in ("send_message", "list_agents", "team_task_list"):
            arguments = '{"target": "lead", "message": "hi"}' if name == "send_message" else "{}"
            result = await host.tools.execute(worker, "c1", name, arguments, AbortSignal())
            assert result.error is not None and result.error["code"] == "TEAM_STREAM_FAILED", result.error
            assert f"failed at seq {seq}" in result.error["message"]
        await host.close()
