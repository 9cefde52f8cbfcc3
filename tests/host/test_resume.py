"""``dsh resume`` continues what a crash stopped: interrupted turns restart, children with work wake.

Crash leftovers are written as real JSONL logs through the host's own session
layer (a turn opened and never closed, an inbox item never claimed), then a new
``Host`` resumes the root, exactly as ``dsh resume`` does in a new process.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from host_spec.errors import SubagentError
from host_spec.events import (
    EventType,
    InboxSplice,
    StepMark,
    SubagentDescriptor,
    ToolCallRecord,
    TurnEnd,
    TurnStart,
)
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.resume import RESUME_NOTICE, StoredWork, continue_run, stored_work
from host_spec.host.store.jsonl import JsonlStore
from host_spec.messages import AssistantMessage, message_text, user_message

ROOT = "root-1"


# ---------------------------------------------------------------- writing crash leftovers


def _pending(session: Any, text: str) -> None:
    item = msgspec.to_builtins(user_message(text))
    session.append(EventType.INBOX_SPLICED, InboxSplice(target="next-turn", inserted=[item]))


def _open_turn(session: Any, prompt: str) -> None:
    """A turn stopped inside a started tool call (what SIGKILL mid-tool leaves)."""
    message = user_message(prompt)
    session.append(EventType.INBOX_SPLICED, InboxSplice(target="next-turn", inserted=[msgspec.to_builtins(message)]))
    session.append(EventType.TURN_START, TurnStart(turn=1))
    session.append(EventType.INBOX_SPLICED, InboxSplice(target="next-turn", removed_ids=[message.id], outcome="claimed"))
    session.append(EventType.STEP_START, StepMark(turn=1, step=1))
    session.append(EventType.USER_MESSAGE, message)
    call = {"type": "tool-call", "id": "c1", "name": "slow", "arguments": "{}"}
    session.append(EventType.ASSISTANT_MESSAGE, AssistantMessage(turn=1, step=1, content=[call]))
    session.append(EventType.TOOL_CALL, ToolCallRecord(turn=1, step=1, call_id="c1", name="slow", arguments="{}"))


def _finished_turn(session: Any, prompt: str) -> None:
    _open_turn(session, prompt)
    session.append(EventType.TURN_END, TurnEnd(turn=1, reason={"kind": "completed"}))


def _child(host: Host, name: str, *, mode: str = "continuable") -> Awaitable[Any]:
    async def make() -> Any:
        session = await host.create_session(f"child-{name}", parent_session=ROOT, origin="subagent")
        descriptor = SubagentDescriptor(version=2, mode=mode, provider="spawn", label=f"{name} label", name=name)
        session.append(EventType.SUBAGENT_DESCRIPTOR, descriptor)
        return session

    return make()


async def _write(data: Path, build: Callable[[Host, Any], Awaitable[None]], *, root_turn: str = "open") -> None:
    """Write the root (and whatever ``build`` adds) as a crashed process would have left it."""
    host = await Host.open(data, None, ScriptedModel.from_mapping({}))
    try:
        root = await host.create_session(ROOT)
        if root_turn == "open":
            _open_turn(root, "start the job")
        elif root_turn == "done":
            _finished_turn(root, "start the job")
        await build(host, root)
        for session in list(host.sessions.list()):
            await session.flush()
            await host.release_session(session)
    finally:
        await host.close()


async def _nothing(host: Host, root: Any) -> None:
    return None


async def _resume(data: Path, script: dict[str, Any]) -> tuple[Host, Any]:
    host = await Host.open(data, None, ScriptedModel.from_mapping(script))
    try:
        agent = await host.resume(ROOT)
    finally:
        await host.close()
    return host, agent


def _user(store: JsonlStore, session_id: str) -> list[tuple[str, str]]:
    header, events = store.read(session_id)
    return [
        ((e.value().get("source") or {}).get("kind", "user"), message_text(e.value()["content"]))
        for e in events[header.seed_length :]
        if e.type == EventType.USER_MESSAGE
    ]


def _replies(host: Host, name: str) -> list[str]:
    return [r.reply["text"] for r in host.model.requests if r.agent_name == name]


# ---------------------------------------------------------------- tests


class TestStoredWork:
    async def test_folds_open_turns_and_unclaimed_items(self, tmp_path: Path) -> None:
        """An open last turn is ``interrupted``; inserted-minus-removed inbox items are ``pending``."""
        host = await Host.open(None, None, ScriptedModel.from_mapping({}))
        try:
            plain = await host.create_session("plain")
            assert stored_work(plain.own_events()) == StoredWork(interrupted=False, pending=0)
            assert not stored_work(plain.own_events()).any
            open_ = await host.create_session("open")
            _open_turn(open_, "go")
            assert stored_work(open_.own_events()) == StoredWork(interrupted=True, pending=0)
            _pending(open_, "later")
            work = stored_work(open_.own_events())
            assert work == StoredWork(interrupted=True, pending=1) and work.any
        finally:
            await host.close()


class TestRoot:
    async def test_an_interrupted_root_with_an_empty_inbox_continues(self, tmp_path: Path) -> None:
        """Resume closes the crashed turn, then a ``resume`` notice starts a turn that takes the next step."""
        await _write(tmp_path, _nothing)
        host, agent = await _resume(tmp_path, {"lead": [{"text": "crashed step"}, {"text": "carried on"}]})
        store = JsonlStore(tmp_path)
        assert _user(store, ROOT) == [("user", "start the job"), ("resume", RESUME_NOTICE)]
        assert _replies(host, "lead") == ["carried on"]  # the crashed step was recorded: not replayed
        codes = [(e.value().get("error") or {}).get("code") for e in store.read(ROOT)[1] if e.type == EventType.TOOL_RESULT]
        assert codes == ["TOOL_OUTCOME_UNKNOWN"]

    async def test_an_interrupted_root_with_pending_mail_gets_no_notice(self, tmp_path: Path) -> None:
        """Pending inbox items restart the root by themselves; no notice is added."""

        async def build(host: Host, root: Any) -> None:
            _pending(root, "queued before the crash")

        await _write(tmp_path, build)
        await _resume(tmp_path, {"lead": [{"text": "step one"}, {"text": "step two"}]})
        assert [kind for kind, _ in _user(JsonlStore(tmp_path), ROOT)] == ["user", "user"]

    async def test_a_finished_root_stays_finished(self, tmp_path: Path) -> None:
        """A balanced log with an empty inbox: resume runs no turn and adds nothing."""
        await _write(tmp_path, _nothing, root_turn="done")
        before = JsonlStore(tmp_path).read(ROOT)[1]
        host, _ = await _resume(tmp_path, {"lead": [{"text": "never"}]})
        assert host.model.requests == []
        assert len(JsonlStore(tmp_path).read(ROOT)[1]) == len(before)


class TestChildren:
    async def test_children_with_work_wake_and_idle_ones_stay_on_disk(self, tmp_path: Path) -> None:
        """A child with a pending prompt starts on it (no notice); an interrupted one gets a notice; others sleep."""

        async def build(host: Host, root: Any) -> None:
            pending = await _child(host, "pending")
            _pending(pending, "your first job")
            interrupted = await _child(host, "interrupted")
            _open_turn(interrupted, "a job")
            idle = await _child(host, "idle")
            _finished_turn(idle, "old job")
            one_shot = await _child(host, "oneshot", mode="one-shot")
            _pending(one_shot, "not continuable")

        await _write(tmp_path, build, root_turn="done")
        script = {
            "lead": [],
            "pending": [{"text": "did the first job"}],
            "interrupted": [{"text": "crashed step"}, {"text": "finished after restart"}],
            "idle": [{"text": "never"}],
            "oneshot": [{"text": "never"}],
        }
        host, _ = await _resume(tmp_path, script)
        store = JsonlStore(tmp_path)
        assert _user(store, "child-pending") == [("user", "your first job")]
        assert _replies(host, "pending") == ["did the first job"]
        assert _user(store, "child-interrupted") == [("user", "a job"), ("resume", RESUME_NOTICE)]
        assert _replies(host, "interrupted") == ["finished after restart"]
        assert _replies(host, "idle") == [] and _replies(host, "oneshot") == []

    async def test_a_child_that_cannot_be_resumed_is_skipped(self, tmp_path: Path) -> None:
        """A child whose log cannot be resumed (damaged) is logged and skipped; the others still continue."""

        async def build(host: Host, root: Any) -> None:
            good = await _child(host, "good")
            _pending(good, "work")
            bad = await _child(host, "bad")
            _pending(bad, "work too")

        await _write(tmp_path, build, root_turn="done")
        path = JsonlStore(tmp_path).path("child-bad")
        lines = path.read_bytes().splitlines(keepends=True)
        damaged = lines[0] + b"{garbage\n" + b"".join(lines[1:])  # a damaged committed line, not a torn tail
        path.write_bytes(damaged)
        host, _ = await _resume(tmp_path, {"lead": [], "good": [{"text": "done"}], "bad": [{"text": "never"}]})
        assert _replies(host, "good") == ["done"] and _replies(host, "bad") == []
        assert path.read_bytes() == damaged  # untouched

    async def test_resident_children_and_hosts_without_continuations(self, tmp_path: Path) -> None:
        """A child that is already resident is left alone; without continuations only the root continues."""

        async def build(host: Host, root: Any) -> None:
            child = await _child(host, "worker")
            _pending(child, "job")

        await _write(tmp_path, build, root_turn="done")
        host = await Host.open(tmp_path, None, ScriptedModel.from_mapping({"worker": [{"tool_calls": []}]}))
        try:
            root = host.start_agent(await host.resume_session(ROOT), name="lead", source="resume")
            woken = await host.continuations.wake(root, "child-worker")
            assert woken is host.agents.get("child-worker")
            assert await host.continuations.wake(root, "child-worker") is woken  # resident: as is
            assert await continue_run(host, root, interrupted=False) == []
            await host.quiesce()
            host.continuations = None
            assert await continue_run(host, root, interrupted=False) == []
        finally:
            await host.close()

    async def test_wake_checks_the_parent(self, tmp_path: Path) -> None:
        """Only the exact live parent may wake a child (``UNAUTHORIZED`` otherwise)."""

        async def build(host: Host, root: Any) -> None:
            await _child(host, "worker")

        await _write(tmp_path, build, root_turn="done")
        host = await Host.open(tmp_path, None, ScriptedModel.from_mapping({}))
        try:
            root = host.start_agent(await host.resume_session(ROOT), name="lead", source="resume")
            stranger = host.start_agent(await host.create_session("stranger"), name="x")
            with pytest.raises(SubagentError) as caught:
                await host.continuations.wake(stranger, "child-worker")
            assert caught.value.code == "UNAUTHORIZED"
            assert host.agents.get("child-worker") is None
            await host.agents.dispose(root)
            with pytest.raises(SubagentError):
                await host.continuations.wake(root, "child-worker")
        finally:
            await host.close()
