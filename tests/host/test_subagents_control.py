"""Continuable children: interrupt, drain, settlement, notices, quiescence and shutdown."""

from __future__ import annotations

from pathlib import Path

import pytest

from _subagent_kit import (
    BLOCK,
    Gates,
    Recorder,
    open_host,
    pending_ids,
    start_child,
    start_root,
    stored,
    until_released,
    user_texts,
)
from host_spec.errors import SubagentError
from host_spec.events import EventType
from host_spec.messages import text_block
from host_spec.records import Handle


def turn_reasons(events: object) -> list[str]:
    return [e.value()["reason"]["kind"] for e in events if e.type == EventType.TURN_END]  # type: ignore[attr-defined]


class TestInterrupt:
    async def test_interrupt_cancels_the_turn_and_keeps_the_inbox(self, tmp_path: Path) -> None:
        """The running turn ends aborted; a queued message stays pending (durable, unclaimed) until the next wake."""
        gates = Gates()
        script = {"kid": [{"tool_calls": [BLOCK]}, {"text": "resumed work"}, {"text": "more"}]}
        host = await open_host(tmp_path, script, plugins=(("gates", gates),))
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid")
            await gates.parked("kid")
            queued = await host.continuations.deliver(
                root, child_id, [text_block("queued")], source={"kind": "user"}, mode="followup"
            )
            kid = host.agents.get(child_id)
            host.continuations.interrupt(child_id, root)
            await kid.when_idle()
            assert [m.id for m in kid.inbox.pending()] == [queued]
            assert host.continuations.is_resident(child_id)  # unclaimed work keeps it loaded
            await kid.session.flush()
            events = stored(tmp_path, child_id)[1]
            assert turn_reasons(events) == ["aborted"] and queued in pending_ids(events)
            await host.continuations.deliver(root, child_id, [text_block("go on")], source={"kind": "user"})
            await until_released(host, child_id)
        finally:
            await host.close()
        texts = user_texts(stored(tmp_path, child_id)[1])
        assert texts.count("queued") == 1 and texts.count("go on") == 1

    async def test_an_ancestor_may_interrupt_a_grandchild(self, tmp_path: Path) -> None:
        """Authority reaches down the live lineage, not only one edge."""
        gates = Gates()
        script = {"kid": [{"tool_calls": [BLOCK]}], "grandkid": [{"tool_calls": [BLOCK]}]}
        host = await open_host(tmp_path, script, plugins=(("gates", gates),))
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid")
            await gates.parked("kid")
            grand_id = await start_child(host, host.agents.get(child_id), "grandkid", notify=False)
            await gates.parked("grandkid")
            grandkid = host.agents.get(grand_id)
            host.continuations.interrupt(grand_id, root)
            await grandkid.when_idle()
            assert turn_reasons(grandkid.session.events) == ["aborted"]
            gates.open("kid")
        finally:
            await host.close()

    async def test_strangers_and_self_are_unauthorized_even_for_absent_targets(self, tmp_path: Path) -> None:
        """A non-ancestor, a stale handle or the target itself gets UNAUTHORIZED; the child's log is untouched."""
        gates = Gates()
        host = await open_host(tmp_path, {"kid": [{"tool_calls": [BLOCK]}]}, plugins=(("gates", gates),))
        try:
            root = await start_root(host)
            stranger = await start_root(host, name="stranger")
            stale = await start_root(host, name="stale")
            await host.dispose_agent(stale)
            child_id = await start_child(host, root, "kid")
            await gates.parked("kid")
            kid = host.agents.get(child_id)
            before = len(kid.session.events)
            for authority, target in [(stranger, child_id), (stale, "absent"), (kid, child_id), (kid, root.id)]:
                with pytest.raises(SubagentError) as excinfo:
                    host.continuations.interrupt(target, authority)
                assert excinfo.value.code == "UNAUTHORIZED", (authority.id, target)
            assert len(kid.session.events) == before and kid.status == "running"
            host.continuations.interrupt("absent", stranger)  # absent target: a no-op
            gates.open("kid")
        finally:
            await host.close()


class TestDrain:
    async def test_drain_releases_descendants_child_first_and_discards_their_inbox(self, tmp_path: Path) -> None:
        """The grandchild is disposed before the child; pending items are durably canceled."""
        gates, recorder = Gates(), Recorder()
        script = {"kid": [{"tool_calls": [BLOCK]}], "grandkid": [{"tool_calls": [BLOCK]}]}
        host = await open_host(tmp_path, script, plugins=(("gates", gates), ("rec", recorder)))
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid")
            await gates.parked("kid")
            grand_id = await start_child(host, host.agents.get(child_id), "grandkid")
            await gates.parked("grandkid")
            queued = await host.continuations.deliver(
                root, child_id, [text_block("never")], source={"kind": "user"}, mode="followup"
            )
            await host.continuations.drain(root, [child_id, "absent"])
            assert not host.continuations.is_resident(child_id) and not host.continuations.is_resident(grand_id)
            assert host.agents.get(child_id) is None and host.agents.get(grand_id) is None
        finally:
            await host.close()
        disposed = [agent_id for agent_id, _ in recorder.of("disposed")]
        assert disposed.index(grand_id) < disposed.index(child_id)
        events = stored(tmp_path, child_id)[1]
        assert queued not in pending_ids(events) and "never" not in user_texts(events)
        assert turn_reasons(events) == ["aborted"]

    async def test_drain_of_someone_elses_child_is_refused_and_releases_nothing(self, tmp_path: Path) -> None:
        """A resident child of another parent in the list fails the whole drain with UNAUTHORIZED."""
        gates = Gates()
        script = {"kid": [{"tool_calls": [BLOCK]}], "other": [{"tool_calls": [BLOCK]}]}
        host = await open_host(tmp_path, script, plugins=(("gates", gates),))
        try:
            root = await start_root(host)
            stranger = await start_root(host, name="stranger")
            mine = await start_child(host, root, "kid")
            theirs = await start_child(host, stranger, "other")
            with pytest.raises(SubagentError) as excinfo:
                await host.continuations.drain(root, [mine, theirs])
            assert excinfo.value.code == "UNAUTHORIZED"
            assert host.continuations.is_resident(mine) and host.continuations.is_resident(theirs)
            await host.dispose_agent(stranger)
            with pytest.raises(SubagentError):
                await host.continuations.drain(stranger, [theirs])
            gates.open("kid")
            gates.open("other")
        finally:
            await host.close()


class TestSettlement:
    async def test_a_settled_child_is_released_and_its_parent_told(self, tmp_path: Path) -> None:
        """After a delivery, the settled child leaves residency and the parent gets a subagent-settled notice."""
        script = {"lead": [{"text": "noted"}], "kid": [{"text": "first"}, {"text": "the closing words"}]}
        host = await open_host(tmp_path, script)
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid", notify=False)
            await until_released(host, child_id)
            assert not any(e.type == EventType.USER_MESSAGE for e in root.session.events)  # no notice
            await host.continuations.deliver(root, child_id, [text_block("more")], source={"kind": "user"})
            await host.quiesce()
            notices = [e.value() for e in root.session.events if e.type == EventType.USER_MESSAGE]
        finally:
            await host.close()
        assert len(notices) == 1
        assert notices[0]["source"]["kind"] == "subagent-settled"
        assert notices[0]["source"]["sender_session_id"] == child_id
        assert "the closing words" in notices[0]["content"][0]["text"]

    async def test_a_child_waiting_on_its_own_child_stays_resident(self, tmp_path: Path) -> None:
        """An idle child that owns a resident child is not settled; it is released after the grandchild."""
        gates = Gates()
        script = {"kid": [{"tool_calls": [BLOCK]}], "grandkid": [{"tool_calls": [BLOCK]}]}
        host = await open_host(tmp_path, script, plugins=(("gates", gates),))
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid", notify=False)
            await gates.parked("kid")
            kid = host.agents.get(child_id)
            grand_id = await start_child(host, kid, "grandkid", notify=False)
            gates.open("kid")
            await kid.when_idle()
            assert not host.continuations.idle() or host.continuations.is_resident(child_id)
            assert host.continuations.is_resident(child_id)
            gates.open("grandkid")
            await until_released(host, grand_id)
            await until_released(host, child_id)
        finally:
            await host.close()

    async def test_quiesce_waits_for_notices_and_the_turns_they_start(self, tmp_path: Path) -> None:
        """host.quiesce returns only after the child settled and the parent answered its notice."""
        script = {"lead": [{"when": "closing", "text": "lead saw it"}], "kid": [{"text": "closing words"}]}
        host = await open_host(tmp_path, script)
        try:
            root = await start_root(host)
            await start_child(host, root, "kid")
            await host.quiesce()
            assert host.continuations.idle()
            texts = [r.reply["text"] for r in host.model.requests if r.agent_id == root.id]
        finally:
            await host.close()
        assert texts == ["lead saw it"]

    async def test_shutdown_keeps_pending_messages_on_disk(self, tmp_path: Path) -> None:
        """Closing the host releases a busy child without discarding its queued message."""
        gates = Gates()
        host = await open_host(tmp_path, {"kid": [{"tool_calls": [BLOCK]}]}, plugins=(("gates", gates),))
        root = await start_root(host)
        child_id = await start_child(host, root, "kid")
        await gates.parked("kid")
        queued = await host.continuations.deliver(
            root, child_id, [text_block("later")], source={"kind": "user"}, mode="followup"
        )
        await host.close()
        assert queued in pending_ids(stored(tmp_path, child_id)[1])
        with pytest.raises(SubagentError) as excinfo:
            await host.continuations.start_continuable(
                child_id="late", provider="spawn", label="x", prompt=[text_block("go")], parent=root
            )
        assert excinfo.value.code in ("DRAINING", "PARENT_UNAVAILABLE")


class TestProviders:
    async def test_plugins_can_add_providers_and_names_are_unique(self, tmp_path: Path) -> None:
        """A registered provider is usable by name; a second one under that name is DUPLICATE_PROVIDER."""

        class Echo:
            name = "echo-history"

            def prepare(self, parent: object) -> list[object]:
                return list(parent.session.events)  # type: ignore[attr-defined]

        host = await open_host(tmp_path, {"kid": [{"text": "ok"}]})
        try:
            root = await start_root(host, "hi")
            handle = host.continuations.register_provider(Echo())
            assert isinstance(handle, Handle) and "echo-history" in host.continuations.provider_names()
            with pytest.raises(SubagentError) as excinfo:
                host.continuations.register_provider(Echo())
            assert excinfo.value.code == "DUPLICATE_PROVIDER"
            inherited = len(root.session.events)
            child_id = await start_child(host, root, "kid", provider="echo-history", notify=False)
            await until_released(host, child_id)
            handle.dispose()
            with pytest.raises(SubagentError) as excinfo:
                await start_child(host, root, "kid", provider="echo-history")
            assert excinfo.value.code == "NO_PROVIDER"
        finally:
            await host.close()
        header, _ = stored(tmp_path, child_id)
        assert header.seed_length == inherited


class TestNoticeChoice:
    async def test_deliveries_can_opt_out_of_the_settlement_notice(self, tmp_path: Path) -> None:
        """deliver(notify=False) wakes the child without telling the parent when it settles."""
        host = await open_host(tmp_path, {"kid": [{"text": "one"}, {"text": "two"}]})
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid", notify=False)
            await until_released(host, child_id)
            await host.continuations.deliver(root, child_id, [text_block("more")], source={"kind": "user"}, notify=False)
            await host.quiesce()
            assert not any(e.type == EventType.USER_MESSAGE for e in root.session.events)
            assert host.continuations.fold_descriptor(stored(tmp_path, child_id)[1]).label == "kid"
        finally:
            await host.close()
