"""Folds carried across activations: a woken session continues its folds, and equals a fresh fold."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import msgspec
import pytest

from _agent_kit import make_kit
from host_spec.carry import CarriedFolds, LogMark
from host_spec.events import Event, SessionHeader
from host_spec.host.agents.agent import Agent
from host_spec.host.agents.inbox import NEXT_STEP, NEXT_TURN, Inbox
from host_spec.host.agents.repair import fold_tail
from host_spec.host.agents.scope import Scope
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.store.sequence_views import Extended, Prefix
from host_spec.host.store.session import Session
from host_spec.host.store.sessions import SessionStore
from host_spec.messages import user_message


def _event(seq: int, text: str = "x") -> Event:
    return Event(seq=seq, time=seq, type="test/event", data=msgspec.Raw(msgspec.json.encode({"text": text})))


HEADER = SessionHeader(id="s", created_at=1)


class TestLogMark:
    def test_a_longer_log_with_the_same_event_at_the_mark_continues(self) -> None:
        events = [_event(1), _event(2)]
        mark = LogMark.of(HEADER, events, 2)
        assert mark.continues(HEADER, [*events, _event(3)])
        assert mark.continues(HEADER, events)

    def test_a_shorter_log_another_event_or_another_header_does_not(self) -> None:
        events = [_event(1), _event(2)]
        mark = LogMark.of(HEADER, events, 2)
        assert not mark.continues(HEADER, events[:1])  # a dropped tail
        assert not mark.continues(HEADER, [_event(1), _event(2, "other")])
        assert not mark.continues(SessionHeader(id="s", created_at=2), events)

    def test_an_empty_fold_continues_any_log_of_the_same_header(self) -> None:
        mark = LogMark.of(HEADER, [], 0)
        assert mark.last is None
        assert mark.continues(HEADER, [_event(1)])
        assert not mark.continues(SessionHeader(id="t", created_at=1), [])


class TestCarriedFolds:
    def test_take_returns_a_continued_fold_once(self) -> None:
        folds: CarriedFolds[str] = CarriedFolds()
        events = [_event(1)]
        folds.keep(HEADER, events, 1, "fold")
        assert len(folds) == 1
        assert folds.take(HEADER, [*events, _event(2)]) == (1, "fold")
        assert folds.take(HEADER, events) is None  # taken: gone

    def test_a_fold_the_log_does_not_continue_is_dropped(self) -> None:
        folds: CarriedFolds[str] = CarriedFolds()
        folds.keep(HEADER, [_event(1), _event(2)], 2, "fold")
        assert folds.take(HEADER, [_event(1)]) is None
        assert len(folds) == 0

    def test_the_least_recently_kept_fold_goes_first(self) -> None:
        folds: CarriedFolds[int] = CarriedFolds(limit=2)
        headers = [SessionHeader(id=f"s{i}", created_at=0) for i in range(3)]
        folds.keep(headers[0], [], 0, 0)
        folds.keep(headers[1], [], 0, 1)
        folds.keep(headers[0], [], 0, 2)  # kept again: now the newest
        folds.keep(headers[2], [], 0, 3)
        assert len(folds) == 2
        assert folds.take(headers[1], []) is None
        assert folds.take(headers[0], []) == (0, 2)
        folds.drop("s2")
        assert folds.take(headers[2], []) is None


class TestPrefix:
    def test_a_prefix_never_shows_later_appends(self) -> None:
        items = [1, 2, 3]
        prefix = Prefix(items)
        items.append(4)
        assert len(prefix) == 3 and list(prefix) == [1, 2, 3] and prefix == (1, 2, 3)
        assert prefix[-1] == 3 and prefix[1:] == (2, 3)
        assert prefix != [1, 2, 3, 4] and prefix != "123"
        with pytest.raises(IndexError):
            prefix[3]
        assert repr(prefix) == "<prefix 3>"

    async def test_an_in_memory_snapshot_is_not_copied_and_stays_frozen(self) -> None:
        store = SessionStore(None, None)
        session = store.create("m")
        session.append("test/event", {"n": 1})
        await store.dispose(session)
        snapshot = await store.inspect("m")
        resumed = store.resume("m")
        resumed.append("test/event", {"n": 2})
        assert [e.seq for e in snapshot.events] == [1]  # the earlier snapshot did not grow
        assert [e.seq for e in resumed.events] == [1, 2]
        assert resumed.durable_seq == 1

    def test_an_extended_sequence_is_its_items_then_one_more(self) -> None:
        items = (1, 2)
        extended = Extended(Prefix([1, 2]), 3)
        assert len(extended) == 3 and list(extended) == [1, 2, 3] and extended == (1, 2, 3)
        assert extended[0] == 1 and extended[2] == 3 and extended[-1] == 3 and extended[-3] == 1
        assert extended[1:] == (2, 3) and extended != (1, 2) and extended != "123"
        assert Extended(items, 3) == Extended(items, 3)
        for bad in (3, -4):
            with pytest.raises(IndexError):
                extended[bad]
        assert repr(extended) == "<2 items and one more>"

    def test_a_live_session_refuses_to_hand_over_its_list(self) -> None:
        store = SessionStore(None, None)
        session = store.create("m")
        with pytest.raises(Exception, match="still live"):
            session.closed_events()


# ---------------------------------------------------------------- agents: carried == fresh


def _fresh(kit: Any, session: Any) -> Agent:
    """The oracle: an agent folded from the whole log (not published, nothing carried)."""
    return Agent(kit.registry.runtime, kit.registry.dispose, session, Scope(label="oracle"), name="w")


async def _activations(store: SessionStore, seed: int, rounds: int) -> int:
    """Random wakes of one session; after each, the carried agent must equal a fresh fold."""
    rng = random.Random(seed)
    kit = make_kit({"w": [{"text": f"reply {i}"} for i in range(rounds * 2)]})
    session = store.create("w")
    counter = 0
    compared = 0
    for _ in range(rounds):
        agent = kit.registry.create(session, name="w", source="resume")
        for _ in range(rng.randint(0, 3)):
            counter += 1
            message = user_message(f"message {counter}", id=f"m{counter}")
            choice = rng.random()
            if choice < 0.4:
                agent.steer(message)
                await agent.when_idle()
            elif choice < 0.7:
                agent.followup(message)
                await agent.when_idle()
            else:  # left pending: the next activation starts with it
                agent.inbox.insert(message, rng.choice([NEXT_TURN, NEXT_STEP]))
        await agent.when_idle()
        oracle = _fresh(kit, session)
        assert list(agent.messages()) == list(oracle.messages())
        assert agent.inbox.next_turn == oracle.inbox.next_turn
        assert agent.inbox.next_step == oracle.inbox.next_step
        compared += 1
        await kit.registry.dispose(agent)
        await store.dispose(session)
        session = store.resume("w")
    return compared


class TestAgentCarry:
    @pytest.mark.timeout_s(120)
    @pytest.mark.parametrize("seed", range(4))
    async def test_a_woken_agent_equals_one_folded_from_scratch_in_memory(self, seed: int) -> None:
        assert await _activations(SessionStore(None, None), seed, 12) == 12

    @pytest.mark.timeout_s(120)
    async def test_a_woken_agent_equals_one_folded_from_scratch_on_disk(self, tmp_path: Path) -> None:
        assert await _activations(SessionStore(JsonlStore(tmp_path), None), 7, 8) == 8

    async def test_a_log_that_differs_at_the_mark_is_folded_from_scratch(self) -> None:
        """A carried fold is continued only when the log still holds the event it stopped at."""
        kit = make_kit({"w": [{"text": "one"}]})
        store = SessionStore(None, None)
        session = store.create("w")
        agent = kit.registry.create(session, name="w")
        agent.steer(user_message("first", id="a"))
        await agent.when_idle()
        await kit.registry.dispose(agent)
        await store.dispose(session)
        stored = await store.inspect("w")
        # The same header and length, another last event: not the log the fold was taken on.
        last = stored.events[-1]
        changed = msgspec.structs.replace(last, data=msgspec.Raw(b'{"turn":1,"reason":{"kind":"error"}}'))
        replacement = Session(stored.header, events=[*stored.events[:-1], changed])
        again = kit.registry.create(replacement, name="w")
        assert again.turn == 1
        assert list(again.messages()) == list(_fresh(kit, replacement).messages())
        await kit.registry.dispose(again)


# ---------------------------------------------------------------- long logs: the scans that run in C


class TestLongLogScans:
    def _log(self, head: list[tuple[str, Any]], filler: int) -> Session:
        session = Session(SessionHeader(id="long", created_at=0))
        for kind, data in head:
            session.append(kind, data)
        for index in range(filler):
            session.append("team/task", {"n": index})
        return session

    def test_the_newest_boundary_far_from_the_end_is_found(self) -> None:
        """A turn opened before a long run of other events is still the open turn (crash repair)."""
        session = self._log([("turn/start", {"turn": 1}), ("turn/end", {"turn": 1, "reason": {}}), ("turn/start", {"turn": 2})], 200)
        state = fold_tail(session.events)
        assert state.last_turn == 2 and state.open_turn == 2

    def test_a_long_log_without_turns_has_none(self) -> None:
        assert fold_tail(self._log([], 200).events) == fold_tail([])

    def test_a_closed_turn_far_from_the_end(self) -> None:
        session = self._log([("turn/start", {"turn": 3}), ("turn/end", {"turn": 3, "reason": {}})], 100)
        state = fold_tail(session.events)
        assert state.last_turn == 3 and state.open_turn is None

    def test_the_inbox_of_a_long_log_replays_only_its_splices(self) -> None:
        session = self._log([], 150)
        Inbox(session).insert(user_message("late", id="late"), NEXT_TURN)
        for index in range(150):
            session.append("team/task", {"n": index})
        assert [m.id for m in Inbox(session).next_turn] == ["late"]
