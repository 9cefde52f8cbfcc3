"""Team folds carried across a session's activations equal the same folds done from scratch.

A teammate sleeps on disk and wakes per message; its journal, the invariant's fold
and its message index continue where its last activation stopped
(:mod:`host_spec.carry`). Each check here compares the continued fold with a
from-scratch fold of the same log (the naive oracle) on random logs.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_team.core.fold import replay
from dsh_team.log.journals import Journals
from dsh_team.mail.holdings import SessionMessages
from dsh_team.mail.message_index import fold_messages
from dsh_team.mail.receipts import scan_receipts
from dsh_team_invariant.invariant import TeamStreamInvariant
from host_spec.events import EventType, SessionHeader
from host_spec.host.store.session import Session
from host_spec.host.store.sessions import PersistedSession
from host_spec.messages import text_block

from team_builders import TEAM, delivered, member, queued, task
from test_team_fold_properties import STREAMS

HEADER = SessionHeader(id=TEAM, created_at=0)


def _grown(events: list[Any], items: list[tuple[str, Any]]) -> Session:
    """A new activation of the session: the old log plus ``items`` appended to it."""
    session = Session(HEADER, events=list(events), durable_seq=len(events))
    for kind, payload in items:
        session.append(kind, payload if not isinstance(payload, bytes) else {"raw": payload.decode()})
    return session


def _chunks(items: list[Any], rng: random.Random) -> list[list[Any]]:
    chunks, index = [], 0
    while index < len(items):
        size = rng.randint(0, 6)
        chunks.append(items[index : index + size])
        index += size
    return [*chunks, []]


class TestJournalCarry:
    @settings(max_examples=100, deadline=None)
    @given(STREAMS, st.integers(0, 1000))
    def test_a_resumed_journal_equals_a_fresh_replay(self, items: list[tuple[str, Any]], seed: int) -> None:
        """Drop, resume, append, repeat: each continued state equals replaying the whole log."""
        journals = Journals()
        events: list[Any] = []
        for chunk in _chunks(items, random.Random(seed)):
            session = _grown(events, chunk)
            journal = journals.get(session)
            assert journal.state == replay(session.events, TEAM)
            assert journal.position == replay(session.events[: session.durable_seq], TEAM).position
            events = list(session.events)
            journals.drop(session)

    def test_a_continued_journal_announces_its_state_like_a_fresh_one(self) -> None:
        """A new journal tells its listener about a non-empty Team state, carried or folded."""
        changed: list[Any] = []
        journals = Journals(on_change=lambda journal: changed.append(journal.state))
        first = _grown([], [("team/task", task("task-1"))])
        journals.get(first)
        journals.drop(first)
        assert len(changed) == 1
        again = Session(HEADER, events=list(first.events), durable_seq=1)
        journals.get(again)
        assert len(changed) == 2 and changed[1] == replay(again.events, TEAM)
        empty = _grown([], [("turn/start", {"turn": 1})])
        empty = Session(SessionHeader(id="quiet", created_at=0), events=list(empty.events), durable_seq=1)
        journals.get(empty)
        journals.drop(empty)
        journals.get(Session(empty.header, events=list(empty.events), durable_seq=1))
        assert len(changed) == 2  # nothing to announce for a log without Team records

    def test_a_log_that_lost_its_tail_is_folded_again(self) -> None:
        journals = Journals()
        first = _grown([], [("team/task", task("task-1")), ("team/task", task("task-2"))])
        journals.get(first)
        journals.drop(first)
        shorter = Session(HEADER, events=list(first.events)[:1], durable_seq=1)
        state = journals.get(shorter).state
        assert list(state.tasks.tasks.keys()) == ["task-1"]


class TestInvariantCarry:
    @settings(max_examples=100, deadline=None)
    @given(STREAMS, st.integers(0, 1000))
    def test_a_resumed_fold_equals_a_fresh_replay(self, items: list[tuple[str, Any]], seed: int) -> None:
        invariant = TeamStreamInvariant()
        events: list[Any] = []
        for chunk in _chunks(items, random.Random(seed)):
            session = _grown(events, chunk)
            invariant.created(session)
            assert invariant.state(session) == replay(session.events, TEAM)
            events = list(session.events)
            invariant.forget(session)

    def test_clear_forgets_the_carried_folds(self) -> None:
        invariant = TeamStreamInvariant()
        session = _grown([], [("team/member", member("m1", "alpha", "provisioning"))])
        invariant.created(session)
        invariant.forget(session)
        invariant.clear()
        again = Session(HEADER, events=list(session.events), durable_seq=1)
        assert invariant.state(again) == replay(again.events, TEAM)


# ---------------------------------------------------------------- message index and receipts

MESSAGE_IDS = ["team-message-1", "team-message-2", "team-message-3"]


def _own_item(rng: random.Random, counter: int) -> tuple[str, Any]:
    """One random event of a member's own log: Team mail, other mail, replies, inbox splices."""
    message_id = rng.choice(MESSAGE_IDS)
    team_id = rng.choice([TEAM, TEAM, "other-team"])
    choice = rng.random()
    if choice < 0.35:
        source = {"kind": rng.choice(["team-message", "user"]), "team_id": team_id, "message_id": message_id}
        return EventType.USER_MESSAGE, {"id": f"u{counter}", "content": [text_block("x")], "source": source}
    if choice < 0.6:
        return EventType.ASSISTANT_MESSAGE, {"turn": 1, "step": 1, "content": []}
    if choice < 0.8:
        item = {"id": message_id, "content": [text_block("x")], "source": {"kind": "team-message", "message_id": message_id}}
        return EventType.INBOX_SPLICED, {"target": "next-step", "inserted": [item]}
    if choice < 0.9:
        return EventType.INBOX_SPLICED, {"target": "next-step", "removed_ids": [message_id], "outcome": "claimed"}
    return "team/message/queued", queued(message_id, "m1")


def _same_index(index: Any, events: Any) -> None:
    """``index`` answers every question as a from-scratch fold and scan of ``events`` do."""
    fresh = fold_messages(events)
    for team_id in (TEAM, "other-team"):
        read, seen = scan_receipts(events, team_id)
        for message_id in [*MESSAGE_IDS, "unknown"]:
            expected = "read" if message_id in read else "seen" if message_id in seen else None
            assert index.receipt(team_id, message_id) == expected
    for message_id in [*MESSAGE_IDS, *(f"u{i}" for i in range(40)), "unknown"]:
        assert index.holds(message_id) == fresh.holds(message_id)
        assert index.recorded(message_id) == fresh.recorded(message_id)
    assert index.holds_user_message() == fresh.holds_user_message()


class TestMessageIndexCarry:
    def test_live_and_stored_reads_continue_each_other(self) -> None:
        """Live, then stored, then live again: every continued index equals a fresh fold."""
        for seed in range(25):
            rng = random.Random(seed)
            messages = SessionMessages()
            events: list[Any] = []
            counter = 0
            for _ in range(8):
                items = []
                for _ in range(rng.randint(0, 5)):
                    counter += 1
                    items.append(_own_item(rng, counter))
                session = _grown(events, items)
                if rng.random() < 0.5:
                    _same_index(messages.index(session), session.events)
                    messages.forget(session)
                else:  # asleep: read from storage, then woken
                    stored = PersistedSession(session.header, tuple(session.events))
                    _same_index(messages.stored(stored), stored.events)
                    _same_index(messages.index(session), session.events)
                    messages.forget(session)
                events = list(session.events)

    def test_an_index_sees_only_the_own_events(self) -> None:
        """A fork's inherited prefix holds no mail of the child, carried or not."""
        seed = [task_event for task_event in _grown([], [(EventType.ASSISTANT_MESSAGE, {"content": []})]).events]
        header = SessionHeader(id="child", created_at=0, seed_length=1)
        session = Session(header, events=seed)
        session.append("team/message/delivered", delivered("team-message-1", "child"))
        messages = SessionMessages()
        assert not messages.index(session).holds("team-message-1")
        messages.forget(session)
        stored = PersistedSession(header, tuple(session.events))
        assert messages.stored(stored).position == 2
