"""Whether a session durably holds a message: history, durable pending inbox, own suffix only."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dsh_team.errors import TeamError
from dsh_team.mail.holdings import SessionMessages, await_accepted, creation_aborted
from dsh_team.mail.message_index import MessageIndex, fold_messages, own_descriptor
from host_spec.errors import SessionNotFoundError
from host_spec.events import Event, EventType, InboxSplice, SubagentDescriptor, json_encode
from host_spec.records import AbortSignal, CancelCause

from kit_waits import ready_work_ran, until
from roster_kit import lead, open_team, teams_of
from team_host import faulty_log

TEAM_SOURCE = {"kind": "team-message", "team_id": "lead", "message_id": "team-message-1", "sender_id": "a", "sender_name": "a"}


def ev(seq: int, type_: str, data: Any) -> Event:
    raw = data if isinstance(data, bytes) else json_encode(data)
    return Event(seq=seq, time=seq, type=type_, data=msgspec.Raw(raw))


def message(message_id: str, source: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": [{"type": "text", "text": "x"}], "source": source or {"kind": "user"}}


def splice(*, inserted: list[Any] = (), removed: list[str] = (), outcome: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"target": "next-step", "inserted": list(inserted), "removed_ids": list(removed)}
    if outcome:
        body["outcome"] = outcome
    return body


class TestMessageIndex:
    def test_pending_then_claimed_is_held_throughout(self) -> None:
        """An inserted item is held while pending and after its claim into the history."""
        index = fold_messages([ev(1, EventType.INBOX_SPLICED, splice(inserted=[message("m1")]))])
        assert index.holds("m1") and not index.holds("m2")
        index.fold([
            ev(2, EventType.INBOX_SPLICED, splice(removed=["m1"], outcome="claimed")),
            ev(3, EventType.USER_MESSAGE, message("m1")),
        ])  # fmt: skip
        assert index.holds("m1")

    def test_cancelled_items_are_no_longer_held(self) -> None:
        """A discarded inbox item vanished: the target does not hold it any more."""
        index = fold_messages([
            ev(1, EventType.INBOX_SPLICED, splice(inserted=[message("m1", TEAM_SOURCE)])),
            ev(2, EventType.INBOX_SPLICED, splice(removed=["m1", "never"], outcome="canceled")),
        ])  # fmt: skip
        assert not index.holds("m1") and not index.holds("team-message-1")

    def test_team_messages_are_recognised_by_their_source_id(self) -> None:
        """A host-assigned message id still de-duplicates through the Team source's message id."""
        index = fold_messages([ev(1, EventType.INBOX_SPLICED, splice(inserted=[message("host-id", TEAM_SOURCE)]))])
        assert index.holds("team-message-1") and index.holds("host-id")
        recorded = fold_messages([ev(1, EventType.USER_MESSAGE, message("host-id-2", TEAM_SOURCE))])
        assert recorded.holds("team-message-1") and recorded.holds("host-id-2")

    def test_user_sourced_messages_prove_an_accepted_prompt(self) -> None:
        """Only a ``user`` source counts as the provisioned prompt, pending or recorded."""
        team_only = fold_messages([ev(1, EventType.INBOX_SPLICED, splice(inserted=[message("t", TEAM_SOURCE)]))])
        assert not team_only.holds_user_message()
        pending = fold_messages([ev(1, EventType.INBOX_SPLICED, splice(inserted=[message("p")]))])
        assert pending.holds_user_message()
        recorded = fold_messages([ev(1, EventType.USER_MESSAGE, message("r"))])
        assert recorded.holds_user_message()
        odd = fold_messages([ev(1, EventType.USER_MESSAGE, message("o", {"kind": 7}))])
        assert odd.holds("o") and not odd.holds_user_message()

    def test_unreadable_and_unrelated_events_hold_nothing(self) -> None:
        """A torn or foreign payload is skipped, never a crash."""
        index = fold_messages([
            ev(1, EventType.USER_MESSAGE, b'{"nope": 1}'),
            ev(2, EventType.INBOX_SPLICED, b"[1]"),
            ev(3, EventType.TURN_START, {"turn": 1}),
            ev(4, EventType.USER_MESSAGE, message("ok")),
        ])  # fmt: skip
        assert index.holds("ok") and MessageIndex().position == 0


class TestOwnDescriptor:
    def test_the_first_version_two_descriptor_wins(self) -> None:
        """The first own descriptor decides; other versions and malformed ones mean "none"."""
        good = SubagentDescriptor(version=2, mode="continuable", provider="spawn", label="x")
        assert own_descriptor([ev(1, EventType.TURN_START, {"turn": 1}), ev(2, EventType.SUBAGENT_DESCRIPTOR, good)]) == good
        assert own_descriptor([ev(1, EventType.SUBAGENT_DESCRIPTOR, {"version": 3, "mode": "continuable", "provider": "p"})]) is None
        assert own_descriptor([ev(1, EventType.SUBAGENT_DESCRIPTOR, {"version": 2, "mode": "weird"})]) is None
        assert own_descriptor([]) is None


class TestSessionMessages:
    async def test_a_live_index_folds_only_new_own_events(self, tmp_path: Path) -> None:
        """Inherited (seed) events never count and each event is folded once."""
        host = await open_team(tmp_path)
        seed = [ev(1, EventType.USER_MESSAGE, message("inherited"))]
        session = await host.create_session("child", seed=seed, parent_session="p")
        messages = SessionMessages()
        assert not messages.holds(session, "inherited")
        session.append(EventType.INBOX_SPLICED, InboxSplice(target="next-turn", inserted=[message("own")]))
        index = messages.index(session)
        assert index.holds("own") and index.position == 2
        assert messages.index(session) is index  # no new events: same fold
        await host.close()
        fresh = await open_team(tmp_path)
        resumed = await fresh.resume_session("child")
        assert messages.index(resumed) is not index and messages.holds(resumed, "own")
        messages.forget(session)  # a stale object does not drop the new activation's index
        assert messages.index(resumed).position == 2
        await fresh.close()

    async def test_waiters_wake_on_the_next_event_or_disposal(self, tmp_path: Path) -> None:
        """``next_change`` ends on a poke for its own session only, or when the session is forgotten."""
        host = await open_team(tmp_path)
        root = await lead(host)
        other = await host.create_session("other")
        messages = SessionMessages()
        waiting = asyncio.ensure_future(messages.next_change(root.session, None))
        await until(lambda: messages.waiting_sessions() == 1, what="the wait to park")
        messages.poke(other)
        await ready_work_ran()
        assert not waiting.done()
        messages.poke(root.session)
        await waiting
        again = asyncio.ensure_future(messages.next_change(root.session, AbortSignal()))
        await until(lambda: messages.waiting_sessions() == 1, what="the second wait to park")
        messages.forget(root.session)
        await again
        assert messages.waiting_sessions() == 0
        await host.close()

    async def test_an_abort_ends_a_wait_with_its_reason(self, tmp_path: Path) -> None:
        """An exception reason is raised as is; any other reason becomes TEAM_DISPOSED."""
        host = await open_team(tmp_path)
        root = await lead(host)
        messages = SessionMessages()
        signal = AbortSignal()
        waiting = asyncio.ensure_future(messages.next_change(root.session, signal))
        survivor = asyncio.ensure_future(messages.next_change(root.session, None))
        await until(lambda: messages.waiting_sessions() == 1, what="both waits to park")
        signal.abort(CancelCause("user"))
        with pytest.raises(TeamError) as caught:
            await waiting
        assert caught.value.code == "TEAM_DISPOSED" and "teammate creation aborted" in caught.value.message
        assert not survivor.done()  # another waiter is unaffected
        messages.poke(root.session)
        await survivor
        boom = RuntimeError("stop")
        assert creation_aborted(boom) is boom
        await host.close()


class TestAwaitAccepted:
    async def test_a_live_session_resolves_only_when_its_own_inbox_holds_the_id(self, tmp_path: Path) -> None:
        """Unrelated sessions and events do not resolve the checkpoint; the splice does, once durable."""
        host = await open_team(tmp_path)
        teams = teams_of(host)
        child = await host.create_session("child")
        other = await host.create_session("other")
        messages = teams.coordination.messages
        waiting = asyncio.ensure_future(await_accepted(host.sessions, messages, "child", "m1"))
        await until(lambda: messages.waiting_sessions() == 1, what="the checkpoint to wait on child")
        other.append(EventType.INBOX_SPLICED, InboxSplice(target="next-turn", inserted=[message("m1")]))
        child.append(EventType.TURN_START, {"turn": 1})
        await ready_work_ran()
        assert not waiting.done()
        child.append(EventType.INBOX_SPLICED, InboxSplice(target="next-turn", inserted=[message("m1")]))
        await waiting
        assert child.durable_seq == child.last_seq
        await host.close()

    async def test_a_detached_session_is_read_from_storage(self, tmp_path: Path) -> None:
        """Stored and holding the id: resolved; stored without it: TEAM_PROVISIONING_CONFLICT."""
        host = await open_team(tmp_path)
        child = await host.create_session("child")
        child.append(EventType.INBOX_SPLICED, InboxSplice(target="next-turn", inserted=[message("m1")]))
        await host.release_session(child)
        messages = SessionMessages()
        await await_accepted(host.sessions, messages, "child", "m1")
        with pytest.raises(TeamError) as caught:
            await await_accepted(host.sessions, messages, "child", "unknown")
        assert caught.value.code == "TEAM_PROVISIONING_CONFLICT"
        await host.close()

    async def test_a_session_dropped_during_the_flush_is_read_from_storage(self, tmp_path: Path) -> None:
        """Dropped while the checkpoint's flush ran (nobody would wake a waiter on it): storage decides."""
        host = await open_team(tmp_path)
        teams = teams_of(host)
        child = await host.create_session("child")
        child.append(EventType.TURN_START, {"turn": 1})
        gate = faulty_log(child)
        gate.hold()
        waiting = asyncio.ensure_future(await_accepted(host.sessions, teams.coordination.messages, "child", "m1"))
        await gate.wait_entered()  # the checkpoint's flush is writing
        dropping = asyncio.ensure_future(host.discard_session(child))
        await until(dropping.done, what="the session to be discarded while its flush is held")
        gate.release()
        await dropping
        with pytest.raises(TeamError) as caught:  # the stored log never held m1
            await asyncio.wait_for(waiting, 5)
        assert caught.value.code == "TEAM_PROVISIONING_CONFLICT"
        await host.close()

    async def test_a_discarded_session_rejects_as_not_found(self, tmp_path: Path) -> None:
        """A live session that leaves without persistence ends the wait with the store's not-found error."""
        host = await open_team(tmp_path)
        teams = teams_of(host)
        child = await host.create_session("child")
        waiting = asyncio.ensure_future(await_accepted(host.sessions, teams.coordination.messages, "child", "m1"))
        await until(lambda: teams.coordination.messages.waiting_sessions() == 1, what="the checkpoint to wait on child")
        await host.discard_session(child)
        with pytest.raises(SessionNotFoundError):
            await waiting
        await host.close()

    async def test_an_abort_rejects_an_unresolved_checkpoint(self, tmp_path: Path) -> None:
        """Error reasons are raised as is; other reasons become TEAM_DISPOSED; pre-aborted fails at once."""
        host = await open_team(tmp_path)
        teams = teams_of(host)
        await host.create_session("child")
        messages = teams.coordination.messages
        signal = AbortSignal()
        waiting = asyncio.ensure_future(await_accepted(host.sessions, messages, "child", "m1", signal))
        await until(lambda: messages.waiting_sessions() == 1, what="the checkpoint to wait on child")
        signal.abort("string cancellation")
        with pytest.raises(TeamError) as caught:
            await waiting
        assert caught.value.code == "TEAM_DISPOSED"
        error = ValueError("mine")
        aborted = AbortSignal()
        aborted.abort(error)
        with pytest.raises(ValueError) as raised:
            await await_accepted(host.sessions, messages, "child", "m1", aborted)
        assert raised.value is error
        await host.close()

    async def test_a_message_that_arrives_during_the_flush_is_flushed_too(self, tmp_path: Path) -> None:
        """Held only after the flush began: the checkpoint loops and flushes again before resolving."""
        host = await open_team(tmp_path)
        child = await host.create_session("child")
        child.append(EventType.TURN_START, {"turn": 1})
        gate = faulty_log(child)
        gate.hold()
        waiting = asyncio.ensure_future(await_accepted(host.sessions, SessionMessages(), "child", "m1"))
        await gate.wait_entered()
        child.append(EventType.INBOX_SPLICED, InboxSplice(target="next-turn", inserted=[message("m1")]))
        gate.release()
        await waiting
        assert gate.writes == 2 and child.durable_seq == 2
        await host.close()
