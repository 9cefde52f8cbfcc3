"""SIGKILL a real ``dsh run`` at the durable points of provisioning and delivery, then ``dsh resume``.

Each test runs :mod:`crash_driver` (the Agent Teams profile, a scripted Lead that
spawns a fork reviewer and a fresh writer who message each other) in a
subprocess that kills itself with SIGKILL right after a chosen group commit. The
real ``dsh resume`` CLI then restarts the stored root. Whatever the point, after
the restart no provisioning record is left open, every queued message is
delivered and sits in its target's history exactly once, and names stay taken.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from dsh_team.errors import TeamError
from dsh_team.core.fold import replay
from host_spec.host.store.jsonl import JsonlStore

from roster_kit import history_ids, member_phases, open_team, pending_ids, spawn, teams_of, until

pytestmark = pytest.mark.slow

DRIVER = Path(__file__).with_name("crash_driver.py")
_SCRIPT = Path(sys.executable).with_name("dsh")
#: The installed ``dsh`` console script (the module entry point when it is not installed next to Python).
DSH = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "host_spec.host.cli.main"]

SCRIPT = {
    "lead": [
        {"text": "spawning", "tool_calls": [
            {"name": "spawn_teammate", "arguments": {"name": "beta", "description": "reviewer", "prompt": "review what alpha sends", "context": "fork"}},
            {"name": "spawn_teammate", "arguments": {"name": "alpha", "description": "writer", "prompt": "write the draft"}},
        ]},
        {"when": "draft reviewed", "text": "all done"},
    ],
    "alpha": [
        {"text": "drafting", "tool_calls": [{"name": "send_message", "arguments": {"target": "beta", "message": "draft ready"}}]},
        {"text": "alpha done"},
    ],
    "beta": [
        {"when": "draft ready", "text": "reviewing", "tool_calls": [{"name": "send_message", "arguments": {"target": "lead", "message": "draft reviewed"}}]},
        {"text": "beta done"},
    ],
}  # fmt: skip


def crash_then_resume(tmp_path: Path, point: str) -> Path:
    """Run the driver until it kills itself at ``point``, then ``dsh resume`` the stored root once."""
    data = tmp_path / "data"
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(DRIVER.parent), os.environ.get("PYTHONPATH")]))}
    crashed = subprocess.run(
        [sys.executable, str(DRIVER), str(data), str(script), point, "build the thing"],
        env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    if point == "none":
        assert crashed.returncode == 3, crashed.stderr.decode()[-2000:]
        return data
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr.decode()[-2000:]
    assert_in_window(data, point)
    resumed = subprocess.run(
        [*DSH, "resume", "--profile", "agent-teams", "--model", f"scripted:{script}", "--data-dir", str(data)],
        env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    errors = re.findall(rb"^dsh: [A-Z_]+: .*$", resumed.stderr, re.MULTILINE)  # "dsh: <code>: <message>"
    assert resumed.returncode in (0, 1) and not errors, resumed.stderr.decode()[-2000:]
    return data


def logs(data: Path) -> tuple[str, dict[str, Any], dict[str, list[Any]]]:
    """``(root id, folded Team state, events by session id)`` read straight from the files."""
    store = JsonlStore(data)
    events = {}
    root = None
    for session_id in store.list_ids():
        header, items = store.read(session_id)
        events[session_id] = items
        if header.parent_session is None:
            root = session_id
    assert root is not None
    return root, replay(events[root], root), events


class Queued(NamedTuple):
    """A message as its ``team/message/queued`` record on disk says (the fold keeps only open ones)."""

    id: str
    target_id: str
    content: list[dict[str, Any]]


def queued_messages(lead: list[Any]) -> list[Queued]:
    """Every message the Lead log queued, in log order: the oracle, read from the file, not the fold."""
    found = [e.value()["message"] for e in lead if e.type == "team/message/queued"]
    return [Queued(m["id"], m["target_id"], m["content"]) for m in found]


def delivered_ids(lead: list[Any]) -> list[str]:
    """Message ids of the Lead log's delivery records, one per record."""
    return [e.value()["message_id"] for e in lead if e.type == "team/message/delivered"]


def assert_in_window(data: Path, point: str) -> None:
    """The kill really happened inside the window the point names (read from the crashed files)."""
    root, state, events = logs(data)
    phases = list(member_phases(state).values())
    children = [sid for sid in events if sid != root]
    if point.endswith("-quiescent"):
        assert len(quiescence_seqs(events[root])) == (point == "after-quiescent"), point
        return
    if point in ("after-recorded", "after-reply"):
        mail = [m.id for m in queued_messages(events[root]) if m.target_id != root]
        recorded = [sid for sid in children if set(mail) & set(history_ids(events[sid]))]
        assert len(recorded) == 1, point
        assert bool(read_oracle(root, state, events)) == (point == "after-reply"), point
        return
    if point == "provisioning-before-child":
        assert phases == ["provisioning"] and children == []
        return
    if point == "provisioning-after-child":
        assert phases == ["provisioning"] and len(children) == 1
        assert len(pending_ids(events[children[0]])) + len(history_ids(events[children[0]])) == 1
        return
    undelivered = [m for m in queued_messages(events[root]) if m.id not in delivered_ids(events[root])]
    assert len(undelivered) == 1, point
    assert [m.id for m in state.mail.all_pending()] == [undelivered[0].id], point  # the fold agrees
    (message,) = undelivered
    held = pending_ids(events[message.target_id]) + history_ids(events[message.target_id]) if message.target_id in events else []
    assert (message.id in held) == (point != "after-queued"), point
    assert (message.target_id == root) == (point == "after-accepted-lead"), point


def assert_consistent(data: Path) -> tuple[str, Any, dict[str, list[Any]]]:
    """No open provisioning; every queued message delivered and in its target's history exactly once."""
    root, state, events = logs(data)
    assert state.failure is None
    assert "provisioning" not in member_phases(state).values()
    queued = queued_messages(events[root])
    assert len({m.id for m in queued}) == len(queued)  # each message queued once
    assert sorted(delivered_ids(events[root])) == sorted(m.id for m in queued)  # and delivered once
    assert not state.mail.pending and len(state.mail.messages) == state.mail.next_index - len(receipt_ids(events[root]))
    for message in queued:
        assert state.mail.is_delivered(message.id), message
        target = events[message.target_id]
        assert history_ids(target).count(message.id) == 1, (message.id, message.target_id)
        assert message.id not in pending_ids(target)
    return root, state, events


async def assert_names_reserved(tmp_path: Path, root_id: str, names: list[str]) -> None:
    host = await open_team(tmp_path)
    session = await host.resume_session(root_id)
    root = host.start_agent(session, name="lead", source="resume")
    for name in names:
        with pytest.raises(TeamError) as caught:
            await spawn(host, root, name)
        assert caught.value.code == "TEAM_MEMBER_NAME_TAKEN"
    assert [row.name for row in teams_of(host).list_members(root)][1:] == names
    await host.close()


def quiescence_seqs(events: list[Any]) -> list[int]:
    return [e.seq for e in events if e.type == "team/quiescent"]


def texts_of(events: list[Any], message_id: str) -> str:
    (value,) = [e.value() for e in events if e.type == "user/message" and e.value()["id"] == message_id]
    return "".join(block.get("text", "") for block in value["content"])


class TestUninterruptedRun:
    def test_the_scenario_completes_without_a_crash(self, tmp_path: Path) -> None:
        """Baseline: both teammates active, both messages delivered once, the Lead finished."""
        data = crash_then_resume(tmp_path, "none")
        root, state, events = assert_consistent(data)
        assert member_phases(state) == {"beta": "active", "alpha": "active"}
        assert len(queued_messages(events[root])) == 2 and state.mail.next_index == 2


class TestProvisioningCrashes:
    async def test_a_crash_before_the_child_exists_leaves_a_failed_member_and_a_reserved_name(self, tmp_path: Path) -> None:
        """Killed after the durable ``provisioning`` record: recovery records ``failed``; the name stays taken."""
        data = crash_then_resume(tmp_path, "provisioning-before-child")
        root, state, events = assert_consistent(data)
        assert member_phases(state) == {"beta": "failed"}
        assert (state.members.by_name("beta").error or "").startswith("child Session recovery failed")
        assert [sid for sid in events if sid != root] == []  # the child never reached the disk
        await assert_names_reserved(tmp_path, root, ["beta"])

    async def test_a_crash_after_the_child_prompt_flush_recovers_an_active_member(self, tmp_path: Path) -> None:
        """Killed after the child's prompt commit, before ``active``: recovery proves it ``active`` from the child log."""
        data = crash_then_resume(tmp_path, "provisioning-after-child")
        root, state, events = assert_consistent(data)
        assert member_phases(state) == {"beta": "active"}
        beta = state.members.by_name("beta")
        prompts = [i for i in history_ids(events[beta.id]) + pending_ids(events[beta.id])]
        assert len(prompts) == 1  # the initial prompt, exactly once
        await assert_names_reserved(tmp_path, root, ["beta"])


class TestDeliveryCrashes:
    @pytest.mark.parametrize("point", ["after-queued", "after-accepted", "after-accepted-lead"])
    async def test_every_accepted_message_reaches_its_target_exactly_once(self, tmp_path: Path, point: str) -> None:
        """Killed between queueing and acknowledging: after the restart both messages sit in history once."""
        data = crash_then_resume(tmp_path, point)
        root, state, events = assert_consistent(data)
        assert member_phases(state) == {"beta": "active", "alpha": "active"}
        by_text = {message.content[0]["text"]: message for message in queued_messages(events[root])}
        assert set(by_text) == {"draft ready", "draft reviewed"}
        ready, reviewed = by_text["draft ready"], by_text["draft reviewed"]
        assert texts_of(events[ready.target_id], ready.id) == f"Team message {ready.id} from alpha:draft ready"
        assert reviewed.target_id == root
        assert texts_of(events[root], reviewed.id) == f"Team message {reviewed.id} from beta:draft reviewed"
        await assert_names_reserved(tmp_path, root, ["beta", "alpha"])


def read_oracle(root: str, state: Any, events: dict[str, list[Any]]) -> set[str]:
    """Messages whose target's own log has an assistant reply after the message was recorded."""
    found: set[str] = set()
    for message in queued_messages(events[root]):
        target = events[message.target_id]
        recorded = [i for i, e in enumerate(target) if e.type == "user/message" and e.value()["id"] == message.id]
        if recorded and any(e.type == "assistant/message" for e in target[recorded[0] + 1 :]):
            found.add(message.id)
    return found


def receipt_ids(events: list[Any]) -> list[str]:
    return [e.value()["message_id"] for e in events if e.type == "team/message/read"]


class TestReceiptCrashes:
    @pytest.mark.parametrize("point", ["none", "after-recorded", "after-reply"])
    def test_receipts_match_the_targets_logs_once_after_a_crash_and_resume(self, tmp_path: Path, point: str) -> None:
        """Killed around a teammate's reply to Team mail: after ``dsh resume`` every message with a
        completed step after it has exactly one receipt, and no other message has one."""
        data = crash_then_resume(tmp_path, point)
        root, state, events = assert_consistent(data)
        receipts = receipt_ids(events[root])
        assert len(receipts) == len(set(receipts))
        assert set(receipts) == read_oracle(root, state, events)
        assert {m.id for m in queued_messages(events[root]) if state.mail.is_read(m.id)} == set(receipts)
        assert {m.id for m in queued_messages(events[root])} - set(receipts) == set(state.mail.messages)  # unread: open

    async def test_an_in_process_resume_rebuilds_the_lost_receipts(self, tmp_path: Path) -> None:
        """Killed right after the reply: the restarted Lead reconciles receipts from the targets' logs."""
        data = tmp_path / "data"
        script = tmp_path / "script.json"
        script.write_text(json.dumps(SCRIPT))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(DRIVER.parent), os.environ.get("PYTHONPATH")]))}
        crashed = subprocess.run(
            [sys.executable, str(DRIVER), str(data), str(script), "after-reply", "build the thing"],
            env=env, capture_output=True, timeout=120,
        )  # fmt: skip
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr.decode()[-2000:]
        root, _, _ = logs(data)
        host = await open_team(tmp_path, SCRIPT)
        session = await host.resume_session(root)
        lead = host.start_agent(session, name="lead", source="resume")
        journal = teams_of(host).journals.get(lead.session)
        _, crashed_state, crashed_events = logs(data)
        expected = read_oracle(root, crashed_state, crashed_events)
        assert expected  # the kill point guarantees a durable reply to a delivered message
        await until(lambda: all(journal.state.mail.is_read(m) for m in expected), what="the rebuilt receipts")
        await host.close()
        _, state, events = logs(data)
        receipts = receipt_ids(events[root])
        assert len(receipts) == len(set(receipts)) and expected <= set(receipts)


class TestQuiescenceCrashes:
    @pytest.mark.parametrize("point", ["before-quiescent", "after-quiescent"])
    def test_the_record_is_neither_lost_nor_duplicated(self, tmp_path: Path, point: str) -> None:
        """Killed just before the quiescence record or just after it is durable: after resume there is exactly one.

        An uninterrupted run of the same scenario also ends with exactly one, as its last Team record.
        """
        (tmp_path / "clean").mkdir()
        clean = logs(crash_then_resume(tmp_path / "clean", "none"))
        data = crash_then_resume(tmp_path, point)
        root, state, events = assert_consistent(data)
        for team_id, folded, by_session in (clean, (root, state, events)):
            seqs = quiescence_seqs(by_session[team_id])
            assert len(seqs) == 1 and folded.quiet and folded.position == seqs[0], point
        assert state.quiescence is not None and clean[1].quiescence is not None
        assert state.quiescence.stalled == clean[1].quiescence.stalled
