"""Inbox: two queues projected from durable ``agent/inbox/spliced`` events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from _agent_kit import memory_session
from host_spec.errors import InvariantError
from host_spec.events import EventType, InboxSplice, SessionHeader
from host_spec.host.agents.inbox import NEXT_STEP, NEXT_TURN, Inbox
from host_spec.host.store.session import Session
from host_spec.messages import user_message


def _splices(session: Any) -> list[InboxSplice]:
    return [e.decode(InboxSplice) for e in session.events if e.type == EventType.INBOX_SPLICED]


class TestMutations:
    def test_insert_appends_the_splice_then_queues(self) -> None:
        """The durable fact comes first; the queues follow it."""
        session = memory_session()
        inbox = Inbox(session)
        message = user_message("hi", id="m1")
        assert inbox.insert(message, NEXT_TURN) is True
        (splice,) = _splices(session)
        assert splice.target == "next-turn" and splice.inserted[0]["id"] == "m1" and splice.outcome is None
        assert splice.inserted[0]["role"] == "user" and splice.inserted[0]["content"] == [{"type": "text", "text": "hi"}]
        assert inbox.next_turn == (message,)
        assert inbox.contains("m1")

    def test_pending_lists_next_step_before_next_turn(self) -> None:
        """Steering is delivered before queued prompts."""
        inbox = Inbox(memory_session())
        inbox.insert(user_message("t1", id="t1"), NEXT_TURN)
        inbox.insert(user_message("s1", id="s1"), NEXT_STEP)
        inbox.insert(user_message("t2", id="t2"), NEXT_TURN)
        assert [m.id for m in inbox.pending()] == ["s1", "t1", "t2"]
        assert inbox.has_pending()

    def test_duplicate_id_is_a_no_op(self) -> None:
        """A message id is pending at most once across both queues; nothing is written again."""
        session = memory_session()
        inbox = Inbox(session)
        inbox.insert(user_message("a", id="m"), NEXT_TURN)
        assert inbox.insert(user_message("a again", id="m"), NEXT_STEP) is False
        assert len(_splices(session)) == 1 and inbox.next_step == ()

    def test_claims_take_all_steps_and_one_turn_prompt(self) -> None:
        """A step boundary claims every next-step item; a turn claims one next-turn prompt."""
        session = memory_session()
        inbox = Inbox(session)
        for mid, target in (("s1", NEXT_STEP), ("s2", NEXT_STEP), ("t1", NEXT_TURN), ("t2", NEXT_TURN)):
            inbox.insert(user_message(mid, id=mid), target)
        assert [m.id for m in inbox.claim_step()] == ["s1", "s2"]
        assert inbox.claim_turn().id == "t1"
        assert [m.id for m in inbox.pending()] == ["t2"]
        claims = [s for s in _splices(session) if s.outcome == "claimed"]
        assert [(s.target, s.removed_ids) for s in claims] == [("next-step", ["s1", "s2"]), ("next-turn", ["t1"])]

    def test_empty_claims_write_nothing(self) -> None:
        """Claiming from empty queues appends no splice."""
        session = memory_session()
        inbox = Inbox(session)
        assert inbox.claim_step() == [] and inbox.claim_turn() is None
        assert session.last_seq == 0 and not inbox.has_pending()

    def test_clear_cancels_next_step_then_next_turn(self) -> None:
        """Clearing writes canceled splices, next-step first, and returns the discarded items."""
        session = memory_session()
        inbox = Inbox(session)
        inbox.insert(user_message("t", id="t"), NEXT_TURN)
        inbox.insert(user_message("s", id="s"), NEXT_STEP)
        assert [m.id for m in inbox.clear()] == ["s", "t"]
        cancels = _splices(session)[2:]
        assert [(s.target, s.removed_ids, s.outcome) for s in cancels] == [
            ("next-step", ["s"], "canceled"),
            ("next-turn", ["t"], "canceled"),
        ]
        assert inbox.pending() == () and not inbox.contains("s")
        assert inbox.clear() == []

    def test_vetoed_splice_leaves_the_queues_unchanged(self) -> None:
        """If an invariant vetoes the append, the live queues do not move."""

        class Veto:
            armed = False

            def pre_append(self, session: Any, event: Any) -> None:
                if self.armed:
                    raise InvariantError("test", "no more splices")

            def committed(self, session: Any, event: Any) -> None:
                pass

            def flushed(self, session: Any, seq: int) -> None:
                pass

        veto = Veto()
        inbox = Inbox(Session(SessionHeader(id="v", created_at=0), observer=veto))
        inbox.insert(user_message("a", id="a"), NEXT_TURN)
        veto.armed = True
        with pytest.raises(InvariantError):
            inbox.insert(user_message("b", id="b"), NEXT_TURN)
        with pytest.raises(InvariantError):
            inbox.claim_turn()
        assert [m.id for m in inbox.pending()] == ["a"]


class TestRebuild:
    def test_replaying_the_splices_rebuilds_both_queues(self) -> None:
        """A new inbox over the same log has exactly the same pending items."""
        session = memory_session()
        inbox = Inbox(session)
        for mid, target in (("s1", NEXT_STEP), ("t1", NEXT_TURN), ("t2", NEXT_TURN), ("s2", NEXT_STEP)):
            inbox.insert(user_message(mid, id=mid), target)
        inbox.claim_turn()
        inbox.claim_step()
        inbox.insert(user_message("s3", id="s3"), NEXT_STEP)
        again = Inbox(session)
        assert again.next_step == inbox.next_step and again.next_turn == inbox.next_turn
        assert [m.id for m in again.pending()] == ["s3", "t2"]
        assert again.contains("t2") and not again.contains("t1")

    def test_fork_child_does_not_inherit_pending_work(self) -> None:
        """Splices in the inherited prefix are not replayed."""
        parent = memory_session("p")
        Inbox(parent).insert(user_message("parent work", id="pw"), NEXT_TURN)
        seed = list(parent.events)
        child = Session(SessionHeader(id="c", created_at=0, seed_length=len(seed)), events=seed)
        assert Inbox(child).pending() == ()

    async def test_pending_items_survive_a_restart_on_disk(self, tmp_path: Path) -> None:
        """After flush, a fresh process rebuilds the same queues from the JSONL log."""
        from host_spec.host.store.sessions import SessionStore
        from host_spec.host.store.jsonl import JsonlStore
        store = SessionStore(JsonlStore(tmp_path), None)
        session = store.create("agent-1")
        inbox = Inbox(session)
        inbox.insert(user_message("keep me", id="k"), NEXT_TURN)
        inbox.insert(user_message("steer", id="s"), NEXT_STEP)
        inbox.claim_step()
        await store.flush(session)
        await store.dispose(session)

        again = SessionStore(JsonlStore(tmp_path), None)
        resumed = again.resume("agent-1")
        rebuilt = Inbox(resumed)
        assert [m.id for m in rebuilt.pending()] == ["k"]
        assert rebuilt.next_turn[0].content == [{"type": "text", "text": "keep me"}]
        await again.dispose(resumed)
