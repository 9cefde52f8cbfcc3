"""The Team's write-scope audit of workspace writes: warnings in the tool result, rows in ``dsh team show``.

A real host with ``dsh-team`` and ``workspace``: a Lead and two teammates (roster
records written the way the roster writes them), tasks claimed through the
service, writes made through the workspace tools. The audit reaches the Team only
through the contract (``WriteAuditor``); the offline rows come from the members'
own ``workspace/write`` records, read back by the real ``dsh team show``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, strategies as st
from workspace_kit import agent_in, call, events_of, open_host

from dsh_team.api import TeamServiceAPI
from dsh_team.core.records import TEAM_MEMBER, VERSION, MemberRecord
from dsh_team.core.snapshots import TeamMemberSnapshot
from dsh_team.core.write_audit import covers
from dsh_team.log.journal import Append
from host_spec.host.cli.main import main
from host_spec.workspace import WORKSPACE_WRITE, FileWrite, WriteAuditor


async def add_member(host: Any, root: Any, member: Any, name: str) -> None:
    journal = host.service(TeamServiceAPI).journals.get(root.session)
    for phase in ("provisioning", "active"):
        snapshot = TeamMemberSnapshot(id=member.id, name=name, description=name, provider="spawn", context="fresh",
                                      phase=phase)
        record = MemberRecord(version=VERSION, team_id=root.id, member=snapshot)
        await journal.transact(lambda state, r=record: Append(TEAM_MEMBER, r), what="member")


async def team(data: Path, ws: Path) -> tuple[Any, Any, Any, Any]:
    host = await open_host(data, team=True)
    lead = await agent_in(host, ws, "lead")
    builder = await agent_in(host, ws, "child-1", parent=lead, name="builder")
    reviewer = await agent_in(host, ws, "child-2", parent=lead, name="reviewer")
    await add_member(host, lead, builder, "builder")
    await add_member(host, lead, reviewer, "reviewer")
    service = host.service(TeamServiceAPI)
    await service.create_task(lead, subject="module", description="write it", write_scopes=["src"])
    await service.create_task(lead, subject="review", description="review it", write_scopes=["docs/review.md"])
    await service.update_task(builder, task_id="task-1", expected_revision=1, action="claim")
    await service.update_task(reviewer, task_id="task-2", expected_revision=1, action="claim")
    return host, lead, builder, reviewer


async def dsh(*argv: str) -> int:
    """The real ``dsh`` entry point (it runs its own event loop, so off this one)."""
    return await asyncio.to_thread(main, list(argv))


async def show_json(capsys: pytest.CaptureFixture[str], data: Path, *extra: str) -> dict[str, Any]:
    capsys.readouterr()  # drop what the host logged before
    assert await dsh("team", "show", "--json", "--data-dir", str(data), *extra) == 0
    return json.loads(capsys.readouterr().out)


async def test_in_scope_out_of_scope_and_foreign_scope_writes(tmp_path: Path, capsys) -> None:
    ws, data = tmp_path / "ws", tmp_path / "data"
    ws.mkdir()
    host, lead, builder, reviewer = await team(data, ws)
    try:
        assert isinstance(host.service(WriteAuditor), WriteAuditor)
        own = await call(host, builder, "write_file", path="src/greet.py", content="x = 1\n")
        foreign = await call(host, builder, "write_file", path="docs/review.md", content="mine\n")
        crossing = await call(host, reviewer, "write_file", path="src/extra.py", content="y = 2\n")
        lead_write = await call(host, lead, "write_file", path="NOTES.md", content="n\n")
        records = [e.decode(FileWrite) for e in events_of(builder, WORKSPACE_WRITE)]
        causes = [e.cause for e in events_of(builder, WORKSPACE_WRITE)]
    finally:
        await host.close()
    assert "warnings" not in own.value
    assert foreign.value["warnings"] == [
        "docs/review.md is outside the write scopes of your task(s) task-1",
        "docs/review.md is inside the write scope of task-2, in progress by reviewer",
    ]
    assert crossing.value["warnings"] == [
        "src/extra.py is outside the write scopes of your task(s) task-2",
        "src/extra.py is inside the write scope of task-1, in progress by builder",
    ]
    assert lead_write.value["warnings"] == ["NOTES.md is written while you own no task in progress"]
    assert [(r.audit.member, r.audit.tasks, r.audit.in_scope) for r in records] == [
        ("builder", ("task-1",), True), ("builder", ("task-1",), False)]
    assert all(c.agent_id == "child-1" and c.tool == "write_file" and c.call_id for c in causes)
    assert (ws / "docs/review.md").read_text() == "mine\n"  # advisory: the write happened anyway

    doc = await show_json(capsys, data)
    rows = [(w["member"], w["path"], w["tasks"], w["in_scope"]) for w in doc["writes"]]
    assert rows == [("builder", "src/greet.py", ["task-1"], True), ("builder", "docs/review.md", ["task-1"], False),
                    ("reviewer", "src/extra.py", ["task-2"], False), ("lead", "NOTES.md", [], False)]
    assert doc["writes"][1]["call_id"] == causes[1].call_id and doc["writes"][1]["member_id"] == "child-1"
    assert await dsh("team", "show", "--data-dir", str(data)) == 0
    text = capsys.readouterr().out
    assert "Writes (4; 3 outside the writer's task scopes)" in text
    assert "builder docs/review.md: warning: docs/review.md is inside the write scope of task-2" in text
    assert (await show_json(capsys, data, "--at", "0"))["writes"] == []


async def test_a_task_without_write_scopes_limits_nothing(tmp_path: Path) -> None:
    """A task that declares no write scopes is no plan to be outside of: its owner's writes get no warning."""
    ws, data = tmp_path / "ws", tmp_path / "data"
    ws.mkdir()
    host, lead, builder, reviewer = await team(data, ws)
    try:
        service = host.service(TeamServiceAPI)
        await service.create_task(lead, subject="anything", description="no scopes")
        await service.update_task(lead, task_id="task-3", expected_revision=1, action="claim")
        free = await call(host, lead, "write_file", path="NOTES.md", content="n\n")
        foreign = await call(host, lead, "write_file", path="src/lead.py", content="z = 3\n")
        records = [e.decode(FileWrite) for e in events_of(lead, WORKSPACE_WRITE)]
    finally:
        await host.close()
    assert "warnings" not in free.value
    # Another member's scope still warns: that is the other member's plan.
    assert foreign.value["warnings"] == ["src/lead.py is inside the write scope of task-1, in progress by builder"]
    assert [(r.audit.tasks, r.audit.in_scope) for r in records] == [(("task-3",), True), (("task-3",), True)]


async def test_no_verdict_with_team_mode_off_and_rows_without_audit(tmp_path: Path, capsys) -> None:
    ws, data = tmp_path / "ws", tmp_path / "data"
    ws.mkdir()
    host = await open_host(data, team=True)
    try:
        lead = await agent_in(host, ws, "lead")
        await host.service(TeamServiceAPI).set_enabled(lead, False)
        result = await call(host, lead, "write_file", path="a.txt", content="a\n")
        (record,) = [e.decode(FileWrite) for e in events_of(lead, WORKSPACE_WRITE)]
    finally:
        await host.close()
    assert "warnings" not in result.value and record.audit is None
    (row,) = (await show_json(capsys, data))["writes"]
    assert (row["member"], row["in_scope"], row["tasks"], row["warnings"]) == ("lead", None, [], [])


async def test_a_plain_subagent_and_a_host_without_the_team_get_no_verdict(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    host = await open_host(tmp_path / "data")  # no dsh-team: nobody provides a WriteAuditor
    try:
        assert host.find_service(WriteAuditor) is None
        agent = await agent_in(host, ws)
        result = await call(host, agent, "write_file", path="b.txt", content="b\n")
    finally:
        await host.close()
    assert result.ok and "warnings" not in result.value


@given(st.lists(st.sampled_from(["a", "b", "ab"]), min_size=1, max_size=3),
       st.lists(st.sampled_from(["a", "b", "ab"]), min_size=1, max_size=4))
def test_covers_is_the_path_prefix_rule(scope_parts, path_parts) -> None:
    scope, path = "/".join(scope_parts), "/".join(path_parts)
    naive = path_parts[: len(scope_parts)] == scope_parts  # component prefix, computed independently
    assert covers(scope, path) is naive


async def test_a_broken_team_stream_gives_no_verdict_and_a_bad_record_no_row(tmp_path: Path, capsys) -> None:
    ws, data = tmp_path / "ws", tmp_path / "data"
    ws.mkdir()
    host = await open_host(data, team=True)
    try:
        lead = await agent_in(host, ws, "lead")
        lead.session.append("team/task", {"version": 2, "team_id": "lead", "task": {"bogus": True}})
        result = await call(host, lead, "write_file", path="c.txt", content="c\n")
        lead.session.append(WORKSPACE_WRITE, {"path": 7})  # not a FileWrite: shown as nothing
    finally:
        await host.close()
    assert result.ok and "warnings" not in result.value  # no plan to judge by; the write is not stopped
    capsys.readouterr()
    assert await dsh("team", "show", "--json", "--data-dir", str(data)) == 3  # the stream failure is reported
    doc = json.loads(capsys.readouterr().out)
    assert [(w["path"], w["in_scope"]) for w in doc["writes"]] == [("c.txt", None)]
