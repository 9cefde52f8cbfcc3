"""The history readers of a Team on the PostgreSQL store whose live sessions keep only two events.

A Lead and two teammates run on a real server (:mod:`kit_postgres`) with the
kept window forced down to 2, so almost every event a reader asks a live
session for is read back from the store by seq. Each reader is run twice: over
the live sessions' event views and over the logs the store reads back whole
(the answers a session that kept every event in memory gives, and what the
``dsh`` commands print). They must agree byte for byte: ``dsh log``, ``dsh team
show --at`` (the fold starting over at every position), ``dsh trace export``,
a deleted task read back from its deleting record, and a resume in a new host.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from kit_postgres import shared_server

from dsh_team.core.fold import replay
from dsh_team.views.cli import show_command
from host_spec.cli import StoredLog
from host_spec.events import encode_event, encode_header
from host_spec.host.app import Host
from host_spec.host.cli.backend_reader import BackendReader
from host_spec.host.cli.extensions import discover_extensions
from host_spec.host.cli.main import main
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.store.postgres import PostgresStore
from host_spec.trace import TRACE_ENTRY_POINT_GROUP
from host_spec.trace_export import export_trace

from team_host import add_member, child, lead, service

KEPT = 2


async def _open(url: str) -> Host:
    host = await Host.open(url, None, ScriptedModel.from_mapping({}))
    host.sessions.kept_events = KEPT
    host.plugins.load("dsh-team", {})
    return host


class LiveReader(BackendReader):
    """The store's reader, except that a live session is read through its own (mostly forgotten) events."""

    def __init__(self, store: Any, host: Host) -> None:
        super().__init__(store)
        self.host = host

    def read(self, session_id: str, *, salvage: bool = False) -> StoredLog:
        session = self.host.sessions.get(session_id)
        if session is None:
            return super().read(session_id, salvage=salvage)
        return StoredLog(session.header, session.events)


class Env:
    """The CLI environment ``team show`` reads through: one fixed reader."""

    def __init__(self, reader: BackendReader) -> None:
        self.reader = reader

    def open_store(self, data_dir: Path) -> BackendReader:
        return self.reader


def _show(reader: BackendReader, at: int) -> str:
    args = argparse.Namespace(data_dir=Path("."), session_id="lead", at=at, json=True)
    out = io.StringIO()
    with redirect_stdout(out):
        show_command(args, Env(reader))
    return out.getvalue()


async def _cli(*argv: str) -> str:
    out = io.StringIO()

    def run() -> None:
        with redirect_stdout(out):
            assert main(list(argv)) == 0

    await asyncio.to_thread(run)
    return out.getvalue()


async def _busy_team(host: Host) -> tuple[Any, Any]:
    """A Lead, two teammates and a board with claimed, completed and deleted tasks."""
    root = await lead(host)
    teams = service(host)
    members = []
    for index, name in enumerate(("alice", "bob"), 1):
        member = await child(host, root, f"child-{index}", name=name)
        await add_member(host, root, member.id, name)
        for step in range(10):  # a teammate's own log, forgotten too
            member.session.append("test/note", {"step": step, "by": name})
            await member.session.flush()
        members.append(member)
    for number in range(1, 13):
        await teams.create_task(root, subject=f"step {number}", description=f"do part {number} " * 20)
    await teams.update_task(root, task_id="task-9", expected_revision=1, action="delete")  # long forgotten later
    for number, member in zip(range(1, 7), members * 3):
        await teams.update_task(member, task_id=f"task-{number}", expected_revision=1, action="claim")
    for number, member in zip(range(1, 5), members * 2):
        await teams.update_task(member, task_id=f"task-{number}", expected_revision=2, action="complete")
    await teams.update_task(root, task_id="task-10", expected_revision=1, action="delete")
    for session in host.sessions.list():
        await session.flush()
    return root, teams


@pytest.mark.timeout_s(180)
async def test_every_history_reader_answers_as_the_whole_stored_log(tmp_path: Path) -> None:
    url = shared_server().new_database()
    host = await _open(url)
    root, teams = await _busy_team(host)
    store = PostgresStore(url)
    stored = BackendReader(store)
    live = LiveReader(store, host)
    lead_session = host.sessions.get("lead")
    assert lead_session is not None
    length = lead_session.last_seq
    assert length > 25 and lead_session.held_events <= 2 * KEPT + 1  # the rest is read back from the store

    # The live views are the stored logs, event for event.
    for session in host.sessions.list():
        assert list(session.events) == store.read(session.id)[1]

    # dsh log --json: the command's lines are the live session's events, encoded.
    printed = (await _cli("log", "--store", url, "--json", "lead")).splitlines()
    assert printed == [encode_header(lead_session.header).decode()] + [encode_event(e).decode() for e in lead_session.events]

    # team show --at: the fold starting over at every position gives the same view.
    for at in range(0, length + 1):
        assert _show(live, at) == _show(stored, at), at
    whole = json.loads(_show(live, length))
    assert {task["id"] for task in whole["tasks"]} == {f"task-{n}" for n in range(1, 13)} - {"task-9", "task-10"}
    assert replay(lead_session.events, "lead") == replay(store.read("lead")[1], "lead")

    # trace export (the installed contributors too): the same spans from the live views as the command's.
    contributors = discover_extensions(TRACE_ENTRY_POINT_GROUP, what="trace contributor")
    await _cli("trace", "export", "--store", url, "--content", "--out", str(tmp_path / "trace.json"), "lead")
    exported = (tmp_path / "trace.json").read_bytes()
    assert export_trace(live, "lead", content=True, contributors=contributors).data == exported
    assert export_trace(live, "lead").data == export_trace(stored, "lead").data

    # A deleted task is read back whole from its deleting record (a forgotten event).
    deleted = teams.get_task(root, "task-9")
    assert (deleted.status, deleted.subject, deleted.revision) == ("deleted", "step 9", 2)
    board = teams.list_tasks(root)
    await host.close()

    # Resume in a new host: it forgets at its first flush and reads the same.
    again = await _open(url)
    resumed_session = await again.resume_session("lead")
    resumed = again.start_agent(resumed_session, name="lead", source="resume")
    again_teams = service(again)
    assert again_teams.list_tasks(resumed) == board
    await again_teams.create_task(resumed, subject="after resume", description="more")
    await resumed_session.flush()
    assert resumed_session.held_events <= 2 * KEPT + 1
    assert list(resumed_session.events) == store.read("lead")[1]
    assert again_teams.get_task(resumed, "task-9") == deleted
    assert [task.id for task in again_teams.list_tasks(resumed)] == [task.id for task in board] + ["task-13"]
    await again.close()
    store.close()
