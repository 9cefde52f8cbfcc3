"""Continuable children at the edges: cancellation mid-acceptance, admission cutoff, unreadable or locked logs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest
import structlog

from _subagent_kit import (
    BLOCK,
    Gates,
    open_host,
    pending_ids,
    start_child,
    start_root,
    stored,
    until_released,
    user_texts,
)
from host_spec import hookimpl
from host_spec.errors import SessionLockedError, DshError, SubagentError
from host_spec.events import Event, EventType, SessionHeader, SubagentDescriptor, encode_event, encode_header
from host_spec.host.children.residency import aggregate, log_release_failure
from host_spec.host.store.jsonl import JsonlStore
from host_spec.messages import text_block, user_message
from host_spec.records import AbortSignal, CancelCause, Violation


class TestAcceptance:
    async def test_a_cancel_during_the_acceptance_flush_keeps_the_accepted_child(self, tmp_path: Path) -> None:
        """Cancelling the caller while the prompt is being made durable finishes acceptance, keeps the child, then cancels."""
        gates = Gates()
        host = await open_host(tmp_path, {"kid": [{"tool_calls": [BLOCK]}]}, plugins=(("gates", gates),))
        try:
            root = await start_root(host)
            task = asyncio.ensure_future(host.continuations.start_continuable(
                child_id="kid-1", provider="spawn", label="kid", prompt=[text_block("go")], parent=root
            ))
            while host.agents.get("kid-1") is None:
                await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert host.continuations.is_resident("kid-1")
            events = stored(tmp_path, "kid-1")[1]
            assert events[0].type == EventType.SUBAGENT_DESCRIPTOR
            assert pending_ids(events) or any(e.type == EventType.USER_MESSAGE for e in events)
            gates.open("kid")
        finally:
            await host.close()

    async def test_a_signal_aborted_after_the_agent_was_built_rolls_back(self, tmp_path: Path) -> None:
        """The caller's signal still counts until the prompt is admitted: the agent is disposed, nothing stays."""
        signal = AbortSignal()

        class Aborter:
            @hookimpl
            def dsh_agent_created(self, host: Any, agent: Any) -> None:
                if agent.session.header.parent_session is not None:
                    signal.abort("changed my mind")

        host = await open_host(tmp_path, {}, plugins=(("aborter", Aborter()),))
        try:
            root = await start_root(host)
            with pytest.raises(SubagentError) as excinfo:
                await host.continuations.start_continuable(
                    child_id="kid-1", provider="spawn", label="kid", prompt=[text_block("go")], parent=root, signal=signal
                )
            assert excinfo.value.code == "CANCELLED"
            assert host.agents.get("kid-1") is None and not host.sessions.exists("kid-1")
        finally:
            await host.close()
        assert not (tmp_path / "data" / "sessions" / "kid-1" / "session.jsonl").exists()


class TestAdmission:
    async def test_a_closed_manager_refuses_new_work(self, tmp_path: Path) -> None:
        """After close, starts and deliveries fail with DRAINING."""
        host = await open_host(tmp_path, {})
        try:
            root = await start_root(host)
            await host.continuations.close()
            with pytest.raises(SubagentError) as started:
                await start_child(host, root, "kid")
            with pytest.raises(SubagentError) as delivered:
                await host.continuations.deliver(root, "x", [text_block("hi")], source={"kind": "user"})
            assert started.value.code == delivered.value.code == "DRAINING"
        finally:
            await host.close()

    async def test_a_child_being_drained_cannot_reach_its_own_children(self, tmp_path: Path) -> None:
        """Once a release starts, the releasing agent can neither start nor message children (DRAINING)."""
        gates = Gates()
        host = await open_host(tmp_path, {"kid": [{"tool_calls": [BLOCK]}]}, plugins=(("gates", gates),))
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid")
            await gates.parked("kid")
            kid = host.agents.get(child_id)
            drain = asyncio.ensure_future(host.continuations.drain(root, [child_id]))
            await asyncio.sleep(0)
            with pytest.raises(SubagentError) as excinfo:
                await start_child(host, kid, "grandkid")
            assert excinfo.value.code == "DRAINING"
            await drain
            assert not host.continuations.is_resident(child_id)
        finally:
            await host.close()

    async def test_draining_an_idle_child_discards_its_kept_inbox(self, tmp_path: Path) -> None:
        """An interrupted child idles with kept mail; draining it cancels that mail durably."""
        gates = Gates()
        host = await open_host(tmp_path, {"kid": [{"tool_calls": [BLOCK]}]}, plugins=(("gates", gates),))
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid")
            await gates.parked("kid")
            kept = await host.continuations.deliver(
                root, child_id, [text_block("kept")], source={"kind": "user"}, mode="followup"
            )
            host.continuations.interrupt(child_id, root)
            await host.agents.get(child_id).when_idle()
            await host.continuations.drain(root, [child_id])
        finally:
            await host.close()
        assert kept not in pending_ids(stored(tmp_path, child_id)[1])

    async def test_disposing_a_parent_releases_its_children_first(self, tmp_path: Path) -> None:
        """host.dispose_agent stops the parent, releases its busy child (mail kept), then disposes the parent."""
        gates = Gates()
        host = await open_host(tmp_path, {"kid": [{"tool_calls": [BLOCK]}]}, plugins=(("gates", gates),))
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid")
            await gates.parked("kid")
            kept = await host.continuations.deliver(
                root, child_id, [text_block("kept")], source={"kind": "user"}, mode="followup"
            )
            await host.dispose_agent(root)
            assert not host.continuations.is_resident(child_id) and host.agents.get(child_id) is None
        finally:
            await host.close()
        assert kept in pending_ids(stored(tmp_path, child_id)[1])

    async def test_a_notice_for_a_parent_that_is_gone_is_dropped(self, tmp_path: Path) -> None:
        """A child that settles after its parent vanished (disposed behind the host's back) is still released cleanly."""
        gates = Gates()
        host = await open_host(tmp_path, {"kid": [{"tool_calls": [BLOCK]}, {"text": "late"}]}, plugins=(("gates", gates),))
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid")
            await gates.parked("kid")
            await host.continuations.deliver(root, child_id, [text_block("more")], source={"kind": "user"})
            await host.agents.dispose(root)
            gates.open("kid")
            await until_released(host, child_id)
        finally:
            await host.close()
        assert not any(e.type == EventType.USER_MESSAGE for e in root.session.events)
        assert user_texts(stored(tmp_path, child_id)[1]) == ["go", "more"]


class TestUnreadableChildren:
    async def test_a_corrupt_child_log_is_not_resumable(self, tmp_path: Path) -> None:
        """A child whose committed log is unreadable cannot be woken; the error says so."""
        host = await open_host(tmp_path, {})
        try:
            root = await start_root(host)
            directory = tmp_path / "data" / "sessions" / "broken"
            directory.mkdir(parents=True)
            header = encode_header(SessionHeader(id="broken", created_at=1, parent_session=root.id)).decode()
            turn_end = encode_event(
                Event(seq=2, time=1, type="turn/end", data=msgspec.Raw(b'{"turn":1,"reason":{"kind":"completed"}}'))
            ).decode()
            (directory / "session.jsonl").write_text(f"{header}\nnot json\n{turn_end}\n")
            with pytest.raises(SubagentError) as excinfo:
                await host.continuations.deliver(root, "broken", [text_block("hi")], source={"kind": "user"})
            assert excinfo.value.code == "NOT_RESUMABLE"
        finally:
            await host.close()

    async def test_a_sleeping_child_cannot_be_taken_by_another_writer_while_its_root_is_live(self, tmp_path: Path) -> None:
        """One process per Team: another writer is refused the child (SESSION_LOCKED naming the root); delivery works."""
        host = await open_host(tmp_path, {"kid": [{"text": "done"}, {"text": "again"}]})
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid", notify=False)
            await until_released(host, child_id)
            with pytest.raises(SessionLockedError) as excinfo:
                JsonlStore(tmp_path / "data").resume(child_id)  # another writer
            assert excinfo.value.details["root"] == root.id and root.id in excinfo.value.message
            await host.continuations.deliver(root, child_id, [text_block("hi")], source={"kind": "user"})
            assert host.agents.get(child_id) is not None
        finally:
            await host.close()
        JsonlStore(tmp_path / "data").resume(child_id)[0].close()  # released with the host

    async def test_a_vetoed_cold_resume_releases_the_session(self, tmp_path: Path) -> None:
        """A plugin veto while re-building the child leaves it asleep and resumable later."""
        vetoing = {"on": False}

        class Veto:
            @hookimpl
            def dsh_agent_created(self, host: Any, agent: Any) -> None:
                if vetoing["on"] and agent.session.header.parent_session is not None:
                    raise DshError("not now", code="TEST_VETO")

        host = await open_host(tmp_path, {"kid": [{"text": "one"}, {"text": "two"}]}, plugins=(("veto", Veto()),))
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid", notify=False)
            await until_released(host, child_id)
            vetoing["on"] = True
            with pytest.raises(DshError) as excinfo:
                await host.continuations.deliver(root, child_id, [text_block("hi")], source={"kind": "user"})
            assert excinfo.value.code == "TEST_VETO" and host.sessions.get(child_id) is None
            vetoing["on"] = False
            await host.continuations.deliver(root, child_id, [text_block("hi")], source={"kind": "user"})
            await until_released(host, child_id)
        finally:
            await host.close()

    async def test_a_live_agent_that_is_not_a_child_is_unauthorized(self, tmp_path: Path) -> None:
        """Delivering to another live root (not a continuable child) is UNAUTHORIZED."""
        host = await open_host(tmp_path, {})
        try:
            root = await start_root(host)
            other = await start_root(host, name="other")
            with pytest.raises(SubagentError) as excinfo:
                await host.continuations.deliver(root, other.id, [text_block("hi")], source={"kind": "user"})
            assert excinfo.value.code == "UNAUTHORIZED"
        finally:
            await host.close()


class TestToolEdges:
    async def test_tools_need_a_calling_agent(self, tmp_path: Path) -> None:
        """Called without an agent, the legacy tools fail with PARENT_UNAVAILABLE."""
        host = await open_host(tmp_path, {}, profile="headless")
        try:
            for name, args in (("subagent", '{"description":"d","prompt":"p"}'), ("list_agents", "{}")):
                result = await host.tools.execute(None, "c1", name, args, AbortSignal())
                assert result.error["code"] == "PARENT_UNAVAILABLE", name
        finally:
            await host.close()

    async def test_cancelling_the_caller_stops_a_one_shot_child(self, tmp_path: Path) -> None:
        """When the caller's turn is cancelled, the subagent call ends CANCELLED and the child's turn is aborted."""
        gates = Gates()
        script = {"lead": [{"tool_calls": [{"name": "subagent", "arguments": {"description": "kid", "prompt": "x"}}]}],
                  "kid": [{"tool_calls": [BLOCK]}]}
        host = await open_host(tmp_path, script, profile="headless", plugins=(("gates", gates),))
        try:
            root = await start_root(host)
            root.followup(user_message("go"))
            await gates.parked("kid")
            root.cancel(CancelCause("user"))
            await host.quiesce()
            results = [e.value() for e in root.session.events if e.type == EventType.TOOL_RESULT]
        finally:
            await host.close()
        assert results[0]["error"]["code"] == "CANCELLED"
        children = [i for i in JsonlStore(tmp_path / "data").list_ids() if i != root.id]
        kid = stored(tmp_path, children[0])[1]
        assert [e.value()["reason"]["kind"] for e in kid if e.type == EventType.TURN_END] == ["aborted"]
        assert kid[0].decode(SubagentDescriptor).label == "kid"

    async def test_a_caller_disposed_behind_the_hosts_back_still_ends_the_call(self, tmp_path: Path) -> None:
        """If the caller is already disposing, the tool cannot interrupt the child; it still ends CANCELLED."""
        gates = Gates()
        script = {"lead": [{"tool_calls": [{"name": "subagent", "arguments": {"description": "kid", "prompt": "x"}}]}],
                  "kid": [{"tool_calls": [BLOCK]}]}
        host = await open_host(tmp_path, script, profile="headless", plugins=(("gates", gates),))
        try:
            root = await start_root(host)
            root.followup(user_message("go"))
            await gates.parked("kid")
            await host.agents.dispose(root)
            results = [e.value() for e in root.session.events if e.type == EventType.TOOL_RESULT]
            assert results[0]["error"]["code"] == "CANCELLED"
            kid = next(a for a in host.agents.list() if a.name == "kid")
            assert kid.status == "running"  # left for the host's shutdown to release
        finally:
            await host.close()


class TestFailures:
    async def test_a_vetoed_notice_is_logged_and_the_release_completes(self, tmp_path: Path) -> None:
        """An invariant that refuses the settlement notice does not break the child's release."""

        class NoNotices:
            @hookimpl
            def dsh_pre_append(self, host: Any, session: Any, event: Any) -> Violation | None:
                if event.type == EventType.INBOX_SPLICED and b"subagent-settled" in bytes(event.data):
                    return Violation("no notices")
                return None

        host = await open_host(tmp_path, {"kid": [{"text": "one"}, {"text": "two"}]}, plugins=(("veto", NoNotices()),))
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid", notify=False)
            await until_released(host, child_id)
            await host.continuations.deliver(root, child_id, [text_block("more")], source={"kind": "user"})
            await until_released(host, child_id)
            assert not root.inbox.pending()
        finally:
            await host.close()

    def test_teardown_failures_aggregate_with_a_stable_code(self) -> None:
        """Several failures become one ACTIVATION_TEARDOWN_FAILED naming each; successes are ignored."""
        aggregate([None, 1], "nothing")
        with pytest.raises(SubagentError) as excinfo:
            aggregate([ValueError("a"), None, KeyError("b")], "drain")
        assert excinfo.value.code == "ACTIVATION_TEARDOWN_FAILED"
        assert "ValueError: a" in str(excinfo.value) and "KeyError" in str(excinfo.value)

    async def test_a_failed_background_release_is_logged(self) -> None:
        """The watcher's release task logs its failure instead of losing it."""
        loop = asyncio.get_running_loop()
        failed, ok, cancelled = loop.create_future(), loop.create_future(), loop.create_future()
        failed.set_exception(RuntimeError("boom"))
        ok.set_result(None)
        cancelled.cancel()
        with structlog.testing.capture_logs() as logs:
            for future in (failed, ok, cancelled):
                log_release_failure(future)
        assert [entry["event"] for entry in logs] == ["subagent.release_failed"]


class TestSettle:
    async def test_settle_reports_whether_the_child_left(self, tmp_path: Path) -> None:
        """settle: an absent child has left; a child idling with kept mail stays loaded."""
        gates = Gates()
        host = await open_host(tmp_path, {"kid": [{"tool_calls": [BLOCK]}]}, plugins=(("gates", gates),))
        try:
            root = await start_root(host)
            assert await host.continuations.settle("nobody") is True
            child_id = await start_child(host, root, "kid")
            await gates.parked("kid")
            await host.continuations.deliver(root, child_id, [text_block("kept")], source={"kind": "user"}, mode="followup")
            host.continuations.interrupt(child_id, root)
            assert await host.continuations.settle(child_id) is False
            assert host.continuations.is_resident(child_id)
        finally:
            await host.close()


class TestIdCollisions:
    async def test_an_id_locked_by_another_writer_is_a_duplicate_child(self, tmp_path: Path) -> None:
        """If another process is creating a session with the reserved id, the start fails DUPLICATE_CHILD."""
        host = await open_host(tmp_path, {})
        try:
            root = await start_root(host)
            other = JsonlStore(tmp_path / "data").create(SessionHeader(id="kid-1", created_at=1))
            try:
                with pytest.raises(SubagentError) as excinfo:
                    await host.continuations.start_continuable(
                        child_id="kid-1", provider="spawn", label="kid", prompt=[text_block("go")], parent=root
                    )
            finally:
                other.close()
            assert excinfo.value.code == "DUPLICATE_CHILD" and host.agents.get("kid-1") is None
        finally:
            await host.close()

    async def test_a_vetoed_fork_session_writes_nothing(self, tmp_path: Path) -> None:
        """A dsh_session_created veto of a fork child leaves no log, even though the seed is non-empty."""

        class Veto:
            @hookimpl
            def dsh_session_created(self, host: Any, session: Any) -> None:
                if session.header.parent_session is not None:
                    raise DshError("no", code="TEST_VETO")

        host = await open_host(tmp_path, {"lead": [{"text": "hello"}]}, plugins=(("veto", Veto()),))
        try:
            root = await start_root(host, "hi")
            with pytest.raises(DshError):
                await host.continuations.start_continuable(
                    child_id="kid-1", provider="fork", label="kid", prompt=[text_block("go")], parent=root
                )
            assert not host.sessions.exists("kid-1")
        finally:
            await host.close()
        assert not (tmp_path / "data" / "sessions" / "kid-1" / "session.jsonl").exists()
