"""A session's mail index is bounded by its Lead's open mail, and answers as if it kept every id.

The oracle is :class:`NaiveIndex`: the index as it was before it was bounded,
keeping every recorded id. The bounded :class:`MessageIndex` must give the same
answer to every question the Team asks of it (Team mail its Lead has not
settled, Team notices, the first message), over random histories in which the
Lead settles messages and its log is sometimes not yet durable; and it must
hold no more than its window and the unsettled mail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_team.core.records import TEAM_MESSAGE_DELIVERED, VERSION, MessageDeliveredRecord
from dsh_team.mail.holdings import SessionMessages, settled_in
from dsh_team.mail.message_index import WINDOW, MessageIndex
from host_spec.events import Event, EventType, SessionHeader, json_encode
from host_spec.host.store.session import Session
from host_spec.host.store.sessions import PersistedSession
from host_spec.messages import text_block

from roster_kit import parked_team, teams_of, until
from test_mailbox_recovery import queue_only

TEAM = "lead"
SMALL = 3  # the window of the differential test: every history outgrows it


def ev(seq: int, type_: str, data: Any) -> Event:
    return Event(seq=seq, time=seq, type=type_, data=msgspec.Raw(json_encode(data)))


def user(message_id: str, source: dict[str, Any]) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": [text_block("x")], "source": source}


def team_mail(number: int, host_id: bool = False, team: str = TEAM) -> dict[str, Any]:
    prefix = "tm" if team == TEAM else "ot"
    source = {"kind": "team-message", "team_id": team, "message_id": f"{prefix}-{number}"}
    return user(f"h-{number}" if host_id else f"{prefix}-{number}", source)


def notice(number: int) -> dict[str, Any]:
    return user(f"budget-{TEAM}-{number}", {"kind": "team-budget", "team_id": TEAM, "seq": number})


def splice(inserted: list[Any] = (), removed: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    return {"target": "next-step", "inserted": list(inserted), "removed_ids": list(removed)}


class NaiveIndex:
    """Every id the session ever recorded (the oracle: the index before it was bounded)."""

    def __init__(self) -> None:
        self.history: set[str] = set()
        self.pending: dict[str, str | None] = {}
        self.read: set[tuple[str, str]] = set()
        self.seen: set[tuple[str, str]] = set()

    def fold(self, event: Event) -> None:
        if event.type == EventType.ASSISTANT_MESSAGE:
            self.read |= self.seen
            self.seen = set()
            return
        body = msgspec.json.decode(event.data)
        if event.type == EventType.USER_MESSAGE:
            source = body["source"]
            self.history.add(body["id"])
            if source["kind"] == "team-message":
                self.history.add(source["message_id"])
                self.seen.add((source["team_id"], source["message_id"]))
        else:
            for removed in body["removed_ids"]:
                self.pending.pop(removed, None)
            for item in body["inserted"]:
                self.pending[item["id"]] = item["source"].get("message_id")

    def holds(self, message_id: str) -> bool:
        return message_id in self.history or message_id in self.pending or message_id in self.pending.values()

    def receipt(self, team_id: str, message_id: str) -> str | None:
        key = (team_id, message_id)
        return "read" if key in self.read else "seen" if key in self.seen else None


class Lead:
    """The settled side: messages read, and whether the Lead's log is all durable (monotone once reported)."""

    def __init__(self) -> None:
        self.read: set[str] = set()
        self.durable = True
        self.reported: set[str] = set()  # every message ever reported settled (the index may let it go)

    def settled(self, team_id: str, message_id: str) -> bool:
        found = team_id == TEAM and self.durable and message_id in self.read
        if found:
            self.reported.add(message_id)
        return found


STEPS = st.one_of(
    st.tuples(st.just("team"), st.integers(0, 30), st.booleans()),
    st.tuples(st.just("other-team"), st.integers(0, 30)),
    st.tuples(st.just("user"), st.integers(0, 30)),
    st.tuples(st.just("notice"), st.integers(0, 5)),
    st.tuples(st.just("reply")),
    st.tuples(st.just("insert"), st.integers(0, 30)),
    st.tuples(st.just("remove"), st.integers(0, 30)),
    st.tuples(st.just("settle"), st.integers(0, 30)),
    st.tuples(st.just("durable"), st.booleans()),
    st.tuples(st.just("check")),
)


def _event(seq: int, step: tuple[Any, ...]) -> Event | None:
    kind = step[0]
    if kind == "team":
        return ev(seq, EventType.USER_MESSAGE, team_mail(step[1], step[2]))
    if kind == "other-team":
        return ev(seq, EventType.USER_MESSAGE, team_mail(step[1], team="elsewhere"))
    if kind == "user":
        return ev(seq, EventType.USER_MESSAGE, user(f"u-{step[1]}", {"kind": "user"}))
    if kind == "notice":
        return ev(seq, EventType.USER_MESSAGE, notice(step[1]))
    if kind == "reply":
        return ev(seq, EventType.ASSISTANT_MESSAGE, {"turn": 1, "step": 1, "content": []})
    if kind == "insert":
        return ev(seq, EventType.INBOX_SPLICED, splice(inserted=[team_mail(step[1], host_id=True)]))
    if kind == "remove":
        return ev(seq, EventType.INBOX_SPLICED, splice(removed=[f"h-{step[1]}"]))
    return None


def _same_answers(index: MessageIndex, naive: NaiveIndex, lead: Lead, first: str | None) -> None:
    for number in range(31):
        if f"tm-{number}" not in lead.reported:  # open mail: exactly what a kept-every-id index says
            for message_id in (f"tm-{number}", f"h-{number}"):
                assert index.holds(message_id) == naive.holds(message_id), message_id
            assert index.receipt(TEAM, f"tm-{number}") == naive.receipt(TEAM, f"tm-{number}")
        # another Team's mail, whose Lead is not loaded here, is never settled: always exact
        assert index.holds(f"ot-{number}") == naive.holds(f"ot-{number}")
        assert index.receipt("elsewhere", f"ot-{number}") == naive.receipt("elsewhere", f"ot-{number}")
    for number in range(6):
        assert index.holds(f"budget-{TEAM}-{number}") == naive.holds(f"budget-{TEAM}-{number}")
    if first is not None:
        assert index.holds(first) and index.recorded(first)
    assert index.has_pending() == bool(naive.pending)


class TestDifferential:
    @settings(max_examples=400, deadline=None)
    @given(st.lists(STEPS, max_size=120))
    def test_bounded_index_answers_as_one_that_keeps_every_id(self, steps: list[tuple[Any, ...]]) -> None:
        """Random histories: every question about unsettled mail, notices or the prompt gets the naive answer."""
        lead = Lead()
        index, naive = MessageIndex(settled=lead.settled, window=SMALL), NaiveIndex()
        first: str | None = None
        recorded_mail: set[str] = set()
        seq = 0
        for step in steps:
            if step[0] == "settle":
                if f"tm-{step[1]}" in recorded_mail:  # a Lead reads only what its target recorded
                    lead.read.add(f"tm-{step[1]}")
                continue
            if step[0] == "durable":
                lead.durable = step[1]
                continue
            if step[0] == "check":
                _same_answers(index, naive, lead, first)
                continue
            seq += 1
            event = _event(seq, step)
            assert event is not None
            if step[0] == "user" and first is None:
                first = f"u-{step[1]}"
            if step[0] == "team":
                recorded_mail.add(f"tm-{step[1]}")
            index.fold([event])
            naive.fold(event)
        _same_answers(index, naive, lead, first)
        assert index.held <= len(naive.history) + 2 * len(naive.pending) + len(naive.read) + len(naive.seen)


class TestBound:
    def test_settled_mail_leaves_and_the_index_stays_bounded(self) -> None:
        """Ten thousand messages, each read by its Lead: the index keeps its window, not the history."""
        index = MessageIndex(settled=lambda team_id, message_id: True, window=8)
        seq = 0
        for number in range(10_000):
            seq += 1
            index.fold([ev(seq, EventType.USER_MESSAGE, team_mail(number))])
            seq += 1
            index.fold([ev(seq, EventType.ASSISTANT_MESSAGE, {"turn": 1, "step": 1, "content": []})])
        assert index.held <= 2 * 8
        assert index.holds("tm-9999") and not index.holds("tm-0")  # settled long ago: asked about never again

    def test_unsettled_mail_stays_until_its_lead_settles_it(self) -> None:
        """Mail still open at its Lead is kept past the window; a later sweep lets it go once settled."""
        read: set[str] = set()
        index = MessageIndex(settled=lambda team_id, message_id: message_id in read, window=2)
        index.fold([ev(1, EventType.USER_MESSAGE, team_mail(0))])
        for number in range(1, 50):
            read.add(f"tm-{number}")
            index.fold([ev(1 + number, EventType.USER_MESSAGE, team_mail(number))])
        assert index.holds("tm-0") and index.recorded("tm-0")  # open: kept however old
        read.add("tm-0")
        for number in range(50, 60):
            read.add(f"tm-{number}")
            index.fold([ev(1 + number, EventType.USER_MESSAGE, team_mail(number))])
        assert index.holds("tm-0")  # settled since it left the window, but no sweep ran yet
        unsettled = [ev(100 + n, EventType.USER_MESSAGE, team_mail(100 + n)) for n in range(8)]
        index.fold(unsettled)  # open ones pile up: the sweep lets the settled one go
        assert not index.holds("tm-0") and all(index.holds(f"tm-{100 + n}") for n in range(8))

    def test_notices_and_the_first_message_are_kept(self) -> None:
        """A Team notice (asked at every Lead start) and the provisioned prompt outlive the window."""
        index = MessageIndex(settled=lambda team_id, message_id: True, window=1)
        index.fold([ev(1, EventType.USER_MESSAGE, user("prompt", {"kind": "user"})),
                    ev(2, EventType.USER_MESSAGE, notice(7))])  # fmt: skip
        index.fold([ev(3 + n, EventType.USER_MESSAGE, user(f"u-{n}", {"kind": "user"})) for n in range(5)])
        assert index.holds("prompt") and index.holds(f"budget-{TEAM}-7") and index.holds_user_message()
        assert index.holds("u-4") and not index.holds("u-0")  # any other old id is let go

    def test_default_window(self) -> None:
        """The shipped window and an index without a Lead to ask (it keeps every Team message)."""
        index = MessageIndex()
        index.fold([ev(1 + n, EventType.USER_MESSAGE, team_mail(n)) for n in range(WINDOW + 10)])
        assert all(index.holds(f"tm-{n}") for n in range(WINDOW + 10))


class TestSettledIn:
    async def test_the_live_journal_says_what_is_settled_for_good(self, tmp_path: Path) -> None:
        """Read, and the target's mail records durable: settled. Open, unknown, or a record not synced: not."""
        host, root, gates, (worker,) = await parked_team(tmp_path, "worker")
        teams = teams_of(host)
        settled = settled_in(teams.journals)
        sent = await teams.send_message(root, target="worker", content=[text_block("ping")])
        journal = teams.journals.get(root.session)
        assert not settled(worker.id, TEAM, sent.message_id)  # delivered, unread
        gates.open("worker")
        await until(lambda: journal.state.mail.is_read(sent.message_id), what="the receipt")
        await journal.flush("receipt")
        assert settled(worker.id, TEAM, sent.message_id)
        assert not settled(worker.id, "no-such-team", sent.message_id) and not settled("nobody", TEAM, sent.message_id)
        open_ = await queue_only(host, root, worker.id, "team-message-open")
        assert not settled(worker.id, TEAM, open_.id) and settled(worker.id, TEAM, sent.message_id)
        record = MessageDeliveredRecord(version=VERSION, team_id=TEAM, message_id=open_.id, target_id=worker.id)
        root.session.append(TEAM_MESSAGE_DELIVERED, record)  # a mail record of the worker, not synced yet
        assert not settled(worker.id, TEAM, sent.message_id)
        await journal.flush("delivery")
        assert settled(worker.id, TEAM, sent.message_id)
        await host.close()

    def test_each_session_asks_about_its_own_mail(self) -> None:
        """The live and stored indexes of a session ask with its id as the target."""
        asked: set[tuple[str, str, str]] = set()

        def settled(target_id: str, team_id: str, message_id: str) -> bool:
            asked.add((target_id, team_id, message_id))
            return True

        session = Session(SessionHeader(id="child", created_at=0))
        for number in range(WINDOW + 1):
            session.append(EventType.USER_MESSAGE, team_mail(number))
        messages = SessionMessages(settled)
        assert not messages.index(session).holds("tm-0") and messages.index(session).holds(f"tm-{WINDOW}")
        assert asked == {("child", TEAM, "tm-0")}
        stored = PersistedSession(session.header, tuple(session.events))
        assert not SessionMessages(settled).stored(stored).holds("tm-0")
        assert SessionMessages().stored(stored).holds("tm-0")  # nobody to ask: every Team message is kept
