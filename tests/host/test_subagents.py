"""Continuable children: history, durable start, rollback and host-only delivery (real JSONL store)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from host_spec import hookimpl
from host_spec.errors import DshError, InvariantError, SubagentError
from host_spec.events import EventType, SubagentDescriptor
from host_spec.host.children.providers import completed_prefix
from host_spec.messages import text_block, user_message
from host_spec.records import AbortSignal, Violation

from _subagent_kit import (
    BLOCK,
    Gates,
    Recorder,
    open_host,
    pending_ids,
    start_child,
    start_root,
    stored,
    until,
    until_released,
    user_texts,
)


def code_of(excinfo: pytest.ExceptionInfo[DshError]) -> str:
    return excinfo.value.code


class TestHistory:
    async def test_fresh_child_inherits_nothing(self, tmp_path: Path) -> None:
        """A spawn child's log starts with its own descriptor: no seed, header names the parent."""
        host = await open_host(tmp_path, {"lead": [{"text": "hello"}], "fresh": [{"text": "ok"}]})
        try:
            root = await start_root(host, "hi")
            child_id = await start_child(host, root, "fresh")
            await until_released(host, child_id)
        finally:
            await host.close()
        header, events = stored(tmp_path, child_id)
        assert (header.parent_session, header.origin, header.seed_length, header.delegation_depth) == (
            root.id, "subagent", 0, 1,
        )
        assert events[0].type == EventType.SUBAGENT_DESCRIPTOR
        descriptor = events[0].decode(SubagentDescriptor)
        assert (descriptor.version, descriptor.mode, descriptor.provider, descriptor.label) == (
            2, "continuable", "spawn", "fresh",
        )
        assert user_texts(events) == ["go"]

    async def test_fork_copies_exactly_the_completed_turn_prefix(self, tmp_path: Path) -> None:
        """A fork child inherits the parent's events through the last turn/end; the open turn and pending inbox stay behind."""
        gates = Gates()
        script = {"lead": [{"text": "turn one"}, {"tool_calls": [BLOCK]}], "forked": [{"text": "forked ok"}]}
        host = await open_host(tmp_path, script, plugins=(("gates", gates),))
        try:
            root = await start_root(host, "first")
            root.followup(user_message("second"))
            await gates.parked("lead")
            queued = user_message("queued for the lead")
            root.followup(queued)
            prefix = list(completed_prefix(root.session.events))
            assert prefix and prefix[-1].type == EventType.TURN_END
            assert len(prefix) < len(root.session.events)
            child_id = await start_child(host, root, "forked", provider="fork")
            await until_released(host, child_id)
            gates.open("lead")
        finally:
            await host.close()
        header, events = stored(tmp_path, child_id)
        assert header.seed_length == len(prefix)
        assert [(e.seq, e.type, bytes(e.data)) for e in events[: len(prefix)]] == [
            (e.seq, e.type, bytes(e.data)) for e in prefix
        ]
        own = events[header.seed_length :]
        assert own[0].type == EventType.SUBAGENT_DESCRIPTOR
        assert queued.id not in pending_ids(own) and "queued for the lead" not in user_texts(own)
        assert user_texts(own) == ["go"]
        assert "second" not in user_texts(events)  # the in-flight turn is not inherited

    async def test_fork_child_model_sees_the_inherited_conversation(self, tmp_path: Path) -> None:
        """The forked child's model request starts with the parent's completed turn."""
        script = {"lead": [{"text": "the secret is 7"}], "forked": [{"when": "secret is 7", "text": "I know 7"}]}
        host = await open_host(tmp_path, script)
        try:
            root = await start_root(host, "remember")
            child_id = await start_child(host, root, "forked", provider="fork")
            await until_released(host, child_id)
            requests = [r for r in host.model.requests if r.agent_name == "forked"]
        finally:
            await host.close()
        assert requests[0].reply["text"] == "I know 7"
        assert [m.get("role") for m in requests[0].messages] == ["user", "assistant", "user"]

    async def test_fork_without_a_completed_turn_has_no_seed(self, tmp_path: Path) -> None:
        """Forking a parent that never finished a turn inherits nothing."""
        host = await open_host(tmp_path, {"forked": [{"text": "ok"}]})
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "forked", provider="fork")
            await until_released(host, child_id)
        finally:
            await host.close()
        assert stored(tmp_path, child_id)[0].seed_length == 0


class TestStart:
    async def test_initial_prompt_is_durable_before_start_returns(self, tmp_path: Path) -> None:
        """When start_continuable returns, the file on disk holds the descriptor, then the prompt splice."""
        gates = Gates()
        host = await open_host(tmp_path, {"kid": [{"tool_calls": [BLOCK]}]}, plugins=(("gates", gates),))
        try:
            root = await start_root(host)
            child_id = host.continuations.new_child_id()
            got = await host.continuations.start_continuable(
                child_id=child_id, provider="spawn", label="kid", prompt=[text_block("go")], parent=root
            )
            header, events = stored(tmp_path, child_id)  # read before the child did anything else
            assert got[0] == child_id
            assert events[0].type == EventType.SUBAGENT_DESCRIPTOR
            assert got[1] in pending_ids(events) or "go" in user_texts(events)
            assert host.continuations.is_resident(child_id)
            gates.open("kid")
        finally:
            await host.close()

    async def test_name_is_kept_across_a_cold_resume(self, tmp_path: Path) -> None:
        """A child started with a name runs (and cold-resumes) under that name, not its label."""
        script = {"alice": [{"text": "first"}, {"when": "again", "text": "second"}]}
        host = await open_host(tmp_path, script)
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "a teammate", name="alice")
            await until_released(host, child_id)
            await host.continuations.deliver(root, child_id, [text_block("again")], source={"kind": "user"})
            resumed = host.agents.get(child_id)
            assert resumed is not None and resumed.name == "alice"
            await until_released(host, child_id)
        finally:
            await host.close()
        _, events = stored(tmp_path, child_id)
        assert events[0].decode(SubagentDescriptor).name == "alice"
        texts = [r.reply["text"] for r in host.model.requests if r.agent_id == child_id]
        assert texts == ["first", "second"]

    @pytest.mark.parametrize(
        ("kwargs", "code"),
        [
            ({"provider": "nope"}, "NO_PROVIDER"),
            ({"label": " "}, "INVALID_ARGUMENT"),
            ({"prompt": []}, "INVALID_ARGUMENT"),
            ({"child_id": ""}, "INVALID_ARGUMENT"),
            ({"name": ""}, "INVALID_ARGUMENT"),
        ],
    )
    async def test_bad_input_is_rejected_and_nothing_is_written(self, tmp_path: Path, kwargs: dict[str, Any], code: str) -> None:
        """Unknown provider and malformed arguments fail with a typed error; no session appears."""
        host = await open_host(tmp_path, {})
        try:
            root = await start_root(host)
            args = {"child_id": "kid-1", "provider": "spawn", "label": "kid", "prompt": [text_block("go")]}
            args.update(kwargs)
            with pytest.raises(SubagentError) as excinfo:
                await host.continuations.start_continuable(parent=root, **args)
            assert code_of(excinfo) == code
            assert not host.sessions.exists("kid-1") and host.agents.get("kid-1") is None
        finally:
            await host.close()
        assert not (tmp_path / "data" / "sessions" / "kid-1" / "session.jsonl").exists()

    async def test_a_child_id_in_use_is_rejected(self, tmp_path: Path) -> None:
        """DUPLICATE_CHILD for a live id and for a stored one; the stored log is untouched."""
        host = await open_host(tmp_path, {"kid": [{"text": "done"}]})
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid")
            await until_released(host, child_id)
            snapshot = {p: p.read_bytes() for p in (tmp_path / "data").rglob("session.jsonl")}
            for taken in (root.id, child_id):
                with pytest.raises(SubagentError) as excinfo:
                    await host.continuations.start_continuable(
                        child_id=taken, provider="spawn", label="kid", prompt=[text_block("go")], parent=root
                    )
                assert code_of(excinfo) == "DUPLICATE_CHILD"
            assert {p: p.read_bytes() for p in snapshot} == snapshot
        finally:
            await host.close()

    async def test_a_vetoed_descriptor_rolls_the_child_back(self, tmp_path: Path) -> None:
        """An invariant veto before acceptance leaves no session, no agent and no file; the session is announced disposed."""
        recorder = Recorder()

        class Veto:
            @hookimpl
            def dsh_pre_append(self, host: Any, session: Any, event: Any) -> Violation | None:
                return Violation("no children here") if event.type == EventType.SUBAGENT_DESCRIPTOR else None

        host = await open_host(tmp_path, {}, plugins=(("rec", recorder), ("veto", Veto())))
        try:
            root = await start_root(host)
            with pytest.raises(InvariantError):
                await host.continuations.start_continuable(
                    child_id="kid-1", provider="spawn", label="kid", prompt=[text_block("go")], parent=root
                )
            assert not host.sessions.exists("kid-1") and host.agents.get("kid-1") is None
            assert ("kid-1", None) in recorder.of("session_disposed")
            assert not host.continuations.is_resident("kid-1")
        finally:
            await host.close()
        assert not (tmp_path / "data" / "sessions" / "kid-1" / "session.jsonl").exists()

    async def test_a_vetoed_agent_rolls_the_child_back(self, tmp_path: Path) -> None:
        """A dsh_agent_created veto for the child undoes the descriptor too: nothing is resumable."""

        class Veto:
            @hookimpl
            def dsh_agent_created(self, host: Any, agent: Any) -> None:
                if agent.session.header.parent_session is not None:
                    raise DshError("no children", code="TEST_VETO")

        host = await open_host(tmp_path, {}, plugins=(("veto", Veto()),))
        try:
            root = await start_root(host)
            with pytest.raises(DshError) as excinfo:
                await host.continuations.start_continuable(
                    child_id="kid-1", provider="spawn", label="kid", prompt=[text_block("go")], parent=root
                )
            assert code_of(excinfo) == "TEST_VETO"
            assert not host.sessions.exists("kid-1")
        finally:
            await host.close()
        assert not (tmp_path / "data" / "sessions" / "kid-1" / "session.jsonl").exists()

    async def test_an_aborted_signal_cancels_before_anything_is_written(self, tmp_path: Path) -> None:
        """A signal aborted before the call yields CANCELLED and no session."""
        host = await open_host(tmp_path, {})
        try:
            root = await start_root(host)
            signal = AbortSignal()
            signal.abort("user left")
            with pytest.raises(SubagentError) as excinfo:
                await host.continuations.start_continuable(
                    child_id="kid-1", provider="spawn", label="kid", prompt=[text_block("go")], parent=root, signal=signal
                )
            assert code_of(excinfo) == "CANCELLED" and not host.sessions.exists("kid-1")
        finally:
            await host.close()

    async def test_a_parent_that_is_not_live_is_refused(self, tmp_path: Path) -> None:
        """A disposed parent object cannot start children (PARENT_UNAVAILABLE)."""
        host = await open_host(tmp_path, {})
        try:
            root = await start_root(host)
            await host.dispose_agent(root)
            with pytest.raises(SubagentError) as excinfo:
                await start_child(host, root, "kid")
            assert code_of(excinfo) == "PARENT_UNAVAILABLE"
        finally:
            await host.close()


class TestDeliver:
    async def test_steer_to_a_running_child_lands_at_the_next_step(self, tmp_path: Path) -> None:
        """A steered message joins the child's running turn after the current step; the source is kept."""
        gates = Gates()
        script = {"kid": [{"tool_calls": [BLOCK]}, {"when": "hurry", "text": "hurried"}]}
        host = await open_host(tmp_path, script, plugins=(("gates", gates),))
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid")
            await gates.parked("kid")
            source = {"kind": "team-message", "team_id": root.id, "sender_name": "lead"}
            message_id = await host.continuations.deliver(
                root, child_id, [text_block("hurry")], source=source, message_id="m-1"
            )
            assert message_id == "m-1"
            assert "m-1" in pending_ids(stored(tmp_path, child_id)[1])  # durable on return
            gates.open("kid")
            await until_released(host, child_id)
        finally:
            await host.close()
        _, events = stored(tmp_path, child_id)
        turns = [e.value()["turn"] for e in events if e.type == EventType.TURN_START]
        assert turns == [1]
        steered = [e.value() for e in events if e.type == EventType.USER_MESSAGE and e.value()["id"] == "m-1"]
        assert len(steered) == 1 and steered[0]["source"] == source

    async def test_steer_to_an_idle_resident_child_starts_a_turn(self, tmp_path: Path) -> None:
        """A loaded idle child (it waits on its own child) starts a new turn on the same agent."""
        gates = Gates()
        script = {"kid": [{"tool_calls": [BLOCK]}, {"text": "turn one"}, {"when": "wake", "text": "awake"}],
                  "grandkid": [{"tool_calls": [BLOCK]}]}
        host = await open_host(tmp_path, script, plugins=(("gates", gates),))
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid")
            await gates.parked("kid")
            kid = host.agents.get(child_id)
            await start_child(host, kid, "grandkid", notify=False)
            gates.open("kid")
            await kid.when_idle()
            assert host.continuations.is_resident(child_id) and kid.status == "idle"
            await host.continuations.deliver(root, child_id, [text_block("wake")], source={"kind": "user"})
            assert host.agents.get(child_id) is kid
            await kid.when_idle()
            gates.open("grandkid")
            await until_released(host, child_id)
        finally:
            await host.close()
        _, events = stored(tmp_path, child_id)
        assert [e.value()["turn"] for e in events if e.type == EventType.TURN_START] == [1, 2]
        assert user_texts(events) == ["go", "wake"]

    async def test_steer_to_an_unloaded_child_cold_resumes_it(self, tmp_path: Path) -> None:
        """A child asleep on disk is resumed (a new agent, source resume) and answers the message."""
        recorder = Recorder()
        script = {"kid": [{"text": "first"}, {"when": "again", "text": "second"}]}
        host = await open_host(tmp_path, script, plugins=(("rec", recorder),))
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid")
            old = host.agents.get(child_id)
            await until_released(host, child_id)
            assert host.agents.get(child_id) is None
            await host.continuations.deliver(root, child_id, [text_block("again")], source={"kind": "user"})
            assert host.agents.get(child_id) not in (None, old)
            await until_released(host, child_id)
        finally:
            await host.close()
        assert [s for a, s in recorder.of("start") if a == child_id] == ["startup", "resume"]
        assert user_texts(stored(tmp_path, child_id)[1]) == ["go", "again"]

    async def test_followup_queues_a_later_turn(self, tmp_path: Path) -> None:
        """mode=followup never joins the running turn: it becomes the next turn's prompt."""
        gates = Gates()
        script = {"kid": [{"tool_calls": [BLOCK]}, {"text": "one"}, {"text": "two"}]}
        host = await open_host(tmp_path, script, plugins=(("gates", gates),))
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid")
            await gates.parked("kid")
            await host.continuations.deliver(root, child_id, [text_block("later")], source={"kind": "user"}, mode="followup")
            gates.open("kid")
            await until_released(host, child_id)
        finally:
            await host.close()
        events = stored(tmp_path, child_id)[1]
        later = next(e for e in events if e.type == EventType.USER_MESSAGE and "later" in str(e.value()))
        turn_starts = [e for e in events if e.type == EventType.TURN_START]
        assert later.seq > turn_starts[1].seq and len(turn_starts) == 2

    async def test_concurrent_deliveries_build_one_activation(self, tmp_path: Path) -> None:
        """Five concurrent deliveries to a sleeping child cold-resume it once; each message lands once."""
        recorder = Recorder()
        host = await open_host(tmp_path, {"kid": [{"text": "first"}]}, plugins=(("rec", recorder),))
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid")
            await until_released(host, child_id)
            sends = [
                host.continuations.deliver(root, child_id, [text_block(f"m{i}")], source={"kind": "user"})
                for i in range(5)
            ]
            ids = await asyncio.gather(*sends)
            assert len(set(ids)) == 5
            await until_released(host, child_id)
        finally:
            await host.close()
        assert [s for a, s in recorder.of("start") if a == child_id] == ["startup", "resume"]
        assert sorted(user_texts(stored(tmp_path, child_id)[1])) == ["go", "m0", "m1", "m2", "m3", "m4"]

    async def test_a_redelivered_pending_message_id_is_not_queued_twice(self, tmp_path: Path) -> None:
        """Delivering the same message id twice while it is pending records it once."""
        gates = Gates()
        host = await open_host(tmp_path, {"kid": [{"tool_calls": [BLOCK]}]}, plugins=(("gates", gates),))
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid")
            await gates.parked("kid")
            for _ in range(2):
                await host.continuations.deliver(
                    root, child_id, [text_block("x")], source={"kind": "user"}, mode="followup", message_id="dup"
                )
            gates.open("kid")
            await until_released(host, child_id)
        finally:
            await host.close()
        assert user_texts(stored(tmp_path, child_id)[1]).count("x") == 1

    async def test_only_the_exact_direct_parent_may_deliver(self, tmp_path: Path) -> None:
        """Grandparent, sibling, stranger and self are UNAUTHORIZED, resident or asleep; nothing is written."""
        gates = Gates()
        script = {"kid": [{"tool_calls": [BLOCK]}], "grandkid": [{"text": "done"}], "other": [{"text": "x"}]}
        host = await open_host(tmp_path, script, plugins=(("gates", gates),))
        try:
            root = await start_root(host)
            stranger = await start_root(host, name="stranger")
            child_id = await start_child(host, root, "kid")
            await gates.parked("kid")
            kid = host.agents.get(child_id)
            grand_id = await start_child(host, kid, "grandkid")
            await until_released(host, grand_id)
            resident_before = len(kid.session.events)
            disk_before = (tmp_path / "data" / "sessions" / grand_id / "session.jsonl").read_bytes()
            cases = [(root, grand_id), (stranger, child_id), (stranger, grand_id), (root, root.id)]
            for parent, target in cases:
                with pytest.raises(SubagentError) as excinfo:
                    await host.continuations.deliver(parent, target, [text_block("hi")], source={"kind": "user"})
                assert code_of(excinfo) == "UNAUTHORIZED", (parent.id, target)
            assert len(kid.session.events) == resident_before
            assert (tmp_path / "data" / "sessions" / grand_id / "session.jsonl").read_bytes() == disk_before
            assert host.agents.get(grand_id) is None
            gates.open("kid")
        finally:
            await host.close()

    async def test_a_disposed_parent_object_is_not_an_authority(self, tmp_path: Path) -> None:
        """A stale (disposed) parent handle cannot deliver, even to its own child."""
        host = await open_host(tmp_path, {"kid": [{"text": "done"}]})
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid")
            await until_released(host, child_id)
            await host.dispose_agent(root)
            with pytest.raises(SubagentError) as excinfo:
                await host.continuations.deliver(root, child_id, [text_block("hi")], source={"kind": "user"})
            assert code_of(excinfo) == "UNAUTHORIZED"
        finally:
            await host.close()

    async def test_what_cannot_be_resumed_is_not_resumable(self, tmp_path: Path) -> None:
        """Unknown ids and children without a continuable descriptor are NOT_RESUMABLE."""
        host = await open_host(tmp_path, {})
        try:
            root = await start_root(host)
            one_shot = await host.create_session("one-shot", parent_session=root.id, origin="subagent")
            one_shot.append(EventType.SUBAGENT_DESCRIPTOR, SubagentDescriptor(version=2, mode="one-shot", provider="spawn"))
            bare = await host.create_session("bare", parent_session=root.id)
            bare.append("note", {"x": 1})
            old = await host.create_session("old", parent_session=root.id)
            old.append(EventType.SUBAGENT_DESCRIPTOR, {"version": 1, "mode": "continuable", "provider": "spawn"})
            bad = await host.create_session("bad", parent_session=root.id)
            bad.append(EventType.SUBAGENT_DESCRIPTOR, {"version": 2, "mode": "continuable"})
            for session in (one_shot, bare, old, bad):
                await host.release_session(session)
            for target in ("nobody", "one-shot", "bare", "old", "bad"):
                with pytest.raises(SubagentError) as excinfo:
                    await host.continuations.deliver(root, target, [text_block("hi")], source={"kind": "user"})
                assert code_of(excinfo) == "NOT_RESUMABLE", target
        finally:
            await host.close()

    @pytest.mark.parametrize(
        ("kwargs", "code"),
        [
            ({"mode": "shout"}, "INVALID_ARGUMENT"),
            ({"content": []}, "INVALID_ARGUMENT"),
            ({"source": {"no": "kind"}}, "INVALID_ARGUMENT"),
            ({"message_id": ""}, "INVALID_ARGUMENT"),
        ],
    )
    async def test_malformed_deliveries_are_rejected(self, tmp_path: Path, kwargs: dict[str, Any], code: str) -> None:
        """Bad mode, content, source or message id fail before anything is routed."""
        host = await open_host(tmp_path, {})
        try:
            root = await start_root(host)
            args: dict[str, Any] = {"content": [text_block("hi")], "source": {"kind": "user"}}
            args.update(kwargs)
            content = args.pop("content")
            with pytest.raises(SubagentError) as excinfo:
                await host.continuations.deliver(root, "anyone", content, **args)
            assert code_of(excinfo) == code
        finally:
            await host.close()

    async def test_an_aborted_delivery_signal_is_cancelled(self, tmp_path: Path) -> None:
        """A delivery whose signal is already aborted is CANCELLED before routing."""
        host = await open_host(tmp_path, {})
        try:
            root = await start_root(host)
            signal = AbortSignal()
            signal.abort()
            with pytest.raises(SubagentError) as excinfo:
                await host.continuations.deliver(root, "x", [text_block("hi")], source={"kind": "user"}, signal=signal)
            assert code_of(excinfo) == "CANCELLED"
        finally:
            await host.close()

    async def test_a_delivery_racing_a_release_waits_then_resumes(self, tmp_path: Path) -> None:
        """A delivery that arrives while the child is being released cold-resumes it afterwards."""
        host = await open_host(tmp_path, {"kid": [{"text": "first"}, {"text": "second"}]})
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid")
            await host.agents.get(child_id).when_idle()
            await until(lambda: host.continuations.activation(child_id).releasing is not None, what="release")
            await host.continuations.deliver(root, child_id, [text_block("again")], source={"kind": "user"})
            await until_released(host, child_id)
        finally:
            await host.close()
        assert user_texts(stored(tmp_path, child_id)[1]) == ["go", "again"]
