"""The change index and the cursor-wait delta, against a naive model of the Team (pure fold, no host).

The oracle is independent of the index: a dictionary model of the Team replays
the same operations, and "what a reader sees" is read from that model. For
random valid operation sequences and every cut point, applying the delta of the
final state after the cut's position to the model's read at the cut must give the
model's read at the end.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_team.core import DELTA_CAP, TeamDelta, evolve, initial_state, team_delta
from dsh_team.core.changes import RECENT_KEPT, SETTLED_KEPT, Outbox
from dsh_team.core.state import TeamState
from dsh_team.views.show_messages import recent_messages
from host_spec.events import Event

from team_builders import TEAM, apply_delta, delivered, event, member, mode, queued, task

MEMBERS = ("m1", "m2", "m3")
NAMES = {"m1": "alpha", "m2": "beta", "m3": "gamma"}


def receipt(message_id: str, target_id: str) -> dict[str, Any]:
    return {"version": 2, "team_id": TEAM, "message_id": message_id, "target_id": target_id}


class Model:
    """The naive Team: plain dictionaries, one entry per entity, updated by each operation."""

    def __init__(self) -> None:
        self.members: dict[str, str] = {}  # id -> phase
        self.tasks: dict[str, tuple[int, str, str | None]] = {}  # id -> (revision, status, owner id)
        self.messages: dict[str, tuple[str, str, str]] = {}  # id -> (sender, target, status)
        self.order: list[str] = []  # message ids in queue order

    def name(self, member_id: str) -> str:
        return "lead" if member_id == TEAM else NAMES.get(member_id, member_id) if member_id in self.members else member_id

    def read(self, caller: str) -> dict[str, Any]:
        """What a reader sees: roster statuses (offline), live tasks, mail counts, the caller's sent messages."""
        members = {self.name(m): ("inactive" if phase == "active" else phase) for m, phase in self.members.items()}
        if caller != TEAM:
            members["lead"] = "inactive"
        members.pop(self.name(caller), None)
        tasks = {
            t: (status, revision, None if owner is None else self.name(owner))
            for t, (revision, status, owner) in self.tasks.items()
            if status != "deleted"
        }
        mail: dict[str, tuple[int, int, int]] = {}
        for _, target, status in self.messages.values():
            queued_, unread, read = mail.get(self.name(target), (0, 0, 0))
            mail[self.name(target)] = (
                queued_ + (status == "queued"), unread + (status == "delivered"), read + (status == "read")
            )
        sent = {
            m: (self.name(sender), self.name(target), status)
            for m, (sender, target, status) in self.messages.items()
            if caller in (sender, TEAM)  # the Lead sees every member's messages
        }
        return {"members": members, "tasks": tasks, "mail": mail, "sent": sent}


def read_ids(events: list[Event]) -> set[str]:
    return {i.value()["message_id"] for i in events if i.type == "team/message/read"}


def outbox_seqs(box: Outbox) -> tuple[dict[str, int], dict[str, int], int]:
    """An outbox as ``(open id -> seq, kept read id -> seq, dropped)``."""
    return {m: e.seq for m, e in box.open.items()}, {e.message_id: e.seq for e in box.settled}, box.dropped


def naive_outbox(seqs: dict[str, int], read: set[str]) -> tuple[dict[str, int], dict[str, int], int]:
    """What an outbox must hold: every unread message, the SETTLED_KEPT latest read ones, the newest seq let go."""
    settled = sorted((seq, m) for m, seq in seqs.items() if m in read)
    kept, gone = settled[len(settled) - SETTLED_KEPT :] if len(settled) > SETTLED_KEPT else settled, settled[:-SETTLED_KEPT]
    return ({m: seq for m, seq in seqs.items() if m not in read}, {m: seq for seq, m in kept},
            max((seq for seq, _ in gone), default=0))


OPS = st.lists(
    st.tuples(st.sampled_from(["member", "task", "task", "send", "send", "deliver", "read", "mode"]),
              st.integers(0, 5), st.integers(0, 5)),
    max_size=40,
)  # fmt: skip


#: Long histories: mostly mail, so senders read far more than SETTLED_KEPT messages.
LONG_OPS = st.lists(
    st.tuples(st.sampled_from(["member", "send", "send", "send", "deliver", "deliver", "deliver", "read", "read"]),
              st.integers(0, 5), st.integers(0, 5)),
    min_size=200, max_size=400,
)  # fmt: skip


def moved_after(events: list[Event], since: int, caller: str) -> set[str]:
    """Naive: ids of the messages (of ``caller``, every one for the Lead) a mail record after ``since`` touched."""
    senders: dict[str, str] = {}
    moved: set[str] = set()
    for item in events:
        if not item.type.startswith("team/message/"):
            continue
        body = item.value()
        message_id = body["message"]["id"] if "message" in body else body["message_id"]
        if "message" in body:
            senders[message_id] = body["message"]["sender_id"]
        if item.seq > since and caller in (TEAM, senders[message_id]):
            moved.add(message_id)
    return moved


def run(ops: list[tuple[str, int, int]]) -> tuple[list[Event], list[Model]]:
    """Valid events for ``ops`` (invalid ones are skipped) and the model after each event."""
    model = Model()
    events: list[Event] = []
    models: list[Model] = [copy.deepcopy(model)]

    def emit(kind: str, payload: dict[str, Any]) -> None:
        events.append(event(len(events) + 1, kind, payload))
        models.append(copy.deepcopy(model))

    for kind, a, b in ops:
        if kind == "member":
            member_id = MEMBERS[a % 3]
            phase = model.members.get(member_id)
            if phase is None:
                model.members[member_id] = "provisioning"
                emit("team/member", member(member_id, NAMES[member_id], "provisioning"))
            elif phase == "provisioning":
                model.members[member_id] = "active" if b % 3 else "failed"
                emit("team/member", member(member_id, NAMES[member_id], model.members[member_id]))
        elif kind == "task":
            task_id = f"task-{a % 4 + 1}"
            revision, _, _ = model.tasks.get(task_id, (0, "", None))
            status = ("pending", "in_progress", "completed", "deleted")[b % 4] if revision else "pending"
            owners = [None, TEAM, *(m for m in MEMBERS if model.members.get(m) == "active")]  # as the board allows
            owner = owners[(a + b) % len(owners)] if revision else None
            model.tasks[task_id] = (revision + 1, status, owner)
            emit("team/task", task(task_id, revision + 1, status=status, owner_id=owner))
        elif kind == "send":
            # Like admission: sender and target are the Lead or active teammates.
            present = [TEAM, *(m for m in MEMBERS if model.members.get(m) == "active")]
            sender, target = present[a % len(present)], present[b % len(present)]
            if sender != target:
                message_id = f"msg-{len(model.order) + 1}"
                model.messages[message_id] = (sender, target, "queued")
                model.order.append(message_id)
                emit("team/message/queued", queued(message_id, target, sender_id=sender, sender_name=model.name(sender)))
        elif kind in ("deliver", "read"):
            wanted = "queued" if kind == "deliver" else "delivered"
            candidates = [m for m in model.order if model.messages[m][2] == wanted]
            if candidates:
                message_id = candidates[a % len(candidates)]
                sender, target, _ = model.messages[message_id]
                model.messages[message_id] = (sender, target, "delivered" if kind == "deliver" else "read")
                build = delivered if kind == "deliver" else receipt
                emit(f"team/message/{'delivered' if kind == 'deliver' else 'read'}", build(message_id, target))
        else:
            emit("team/mode", mode(bool(a % 2)))
    return events, models


def states(events: list[Event]) -> list[TeamState]:
    found = [initial_state(TEAM)]
    for item in events:
        found.append(evolve(found[-1], item))
        assert found[-1].failure is None, found[-1].failure
    return found


def offline_statuses(state: TeamState) -> dict[str, str]:
    statuses = {TEAM: "inactive"}
    statuses.update({m.id: ("inactive" if m.phase == "active" else m.phase) for m in state.members.listed()})
    return statuses


class TestDeltaOracle:
    @settings(max_examples=250, deadline=None)
    @given(OPS, st.integers(0, 40), st.sampled_from([TEAM, "m1"]))
    def test_delta_applied_to_an_old_read_is_a_new_read(self, ops: list[tuple[str, int, int]], cut: int,
                                                       caller: str) -> None:
        """For a cut at any event: read(cut) + delta(end, since=position at cut) == read(end)."""
        events, models = run(ops)
        folded = states(events)
        cut = min(cut, len(events))
        end = folded[-1]
        for since in {folded[cut].position, cut}:  # the wake position at the cut, and the cut's own seq
            delta = team_delta(end, since, caller, offline_statuses(end))
            assert apply_delta(models[cut].read(caller), delta) == models[-1].read(caller)

    @settings(max_examples=60, deadline=None)
    @given(LONG_OPS, st.integers(0, 400), st.sampled_from([TEAM, "m1"]))
    def test_a_long_history_keeps_the_contract_with_a_bounded_index(
        self, ops: list[tuple[str, int, int]], cut: int, caller: str
    ) -> None:
        """Past SETTLED_KEPT read messages per sender the index lets old ones go: the delta of any
        old cursor, with truncated parts re-listed, still gives the fresh read, and a part is only
        truncated when it would list more than DELTA_CAP rows."""
        events, models = run(ops)
        folded = states(events)
        cut = min(cut, len(events))
        end = folded[-1]
        fresh = models[-1].read(caller)
        for since, seen in ((0, models[0]), (folded[cut].position, models[cut]), (cut, models[cut])):
            delta = team_delta(end, since, caller, offline_statuses(end))
            assert apply_delta(seen.read(caller), delta, relist=fresh) == fresh
            changed = {m for m, row in fresh["sent"].items() if seen.read(caller)["sent"].get(m) != row}
            assert ("sent" in delta.truncated) == (len(moved_after(events, since, caller)) > DELTA_CAP)
            assert changed <= moved_after(events, since, caller)
        assert all(len(box.settled) <= SETTLED_KEPT for box in end.changes.sent.values())
        assert len(end.mail.messages) == sum(1 for _, _, status in models[-1].messages.values() if status != "read")

    def test_an_old_cursor_past_the_kept_reads_gets_sent_truncated(self) -> None:
        """The long-history property's truncation, made certain: one sender's reads exceed SETTLED_KEPT.

        The random histories above reach it only when they happen to read enough of one
        sender's mail; this history always does, so the re-list path runs in every run.
        """
        rounds = max(SETTLED_KEPT, DELTA_CAP) + 5
        ops = [("member", 0, 0), ("member", 0, 1), *[("send", 0, 1), ("deliver", 0, 0), ("read", 0, 0)] * rounds]
        events, models = run(ops)
        end = states(events)[-1]
        fresh = models[-1].read(TEAM)
        delta = team_delta(end, 0, TEAM, offline_statuses(end))
        assert "sent" in delta.truncated
        assert len(moved_after(events, 0, TEAM)) == rounds
        assert apply_delta(models[0].read(TEAM), delta, relist=fresh) == fresh
        assert all(len(box.settled) <= SETTLED_KEPT for box in end.changes.sent.values())

    @settings(max_examples=150, deadline=None)
    @given(OPS)
    def test_the_index_names_the_last_record_of_each_entity(self, ops: list[tuple[str, int, int]]) -> None:
        """Changes holds, per entity, the seq of the last event that touched it (naive scan of the events)."""
        events, _ = run(ops)
        end = states(events)[-1]
        naive: dict[str, dict[str, int]] = {"members": {}, "tasks": {}, "mail": {}}
        sent: dict[str, dict[str, int]] = {}
        senders: dict[str, str] = {}
        for item in events:
            body = item.value()
            if item.type == "team/member":
                naive["members"][body["member"]["id"]] = item.seq
            elif item.type == "team/task":
                naive["tasks"][body["task"]["id"]] = item.seq
            elif item.type.startswith("team/message/"):
                message = body.get("message")
                if message is not None:
                    senders[message["id"]] = message["sender_id"]
                message_id = message["id"] if message is not None else body["message_id"]
                naive["mail"][message["target_id"] if message is not None else body["target_id"]] = item.seq
                sent.setdefault(senders[message_id], {})[message_id] = item.seq
        changes = end.changes
        assert dict(changes.members) == naive["members"]
        assert dict(changes.tasks) == naive["tasks"]
        assert dict(changes.mail) == naive["mail"]
        assert {s: outbox_seqs(box) for s, box in changes.sent.items()} == {
            s: naive_outbox(box, read_ids(events)) for s, box in sent.items()}
        for target in naive["mail"]:
            reads = sum(1 for i in events if i.type == "team/message/read" and i.value()["target_id"] == target)
            assert end.mail.read_count(target) == reads


class TestBounds:
    def test_a_long_part_is_truncated_and_named(self) -> None:
        """More than DELTA_CAP changed tasks: the tasks part is left out and named; the rest is kept."""
        events = [event(i, "team/task", task(f"task-{i}", 1)) for i in range(1, DELTA_CAP + 2)]
        events.append(event(DELTA_CAP + 2, "team/message/queued", queued("msg-1", "m1")))
        end = states(events)[-1]
        delta = team_delta(end, 0, TEAM, offline_statuses(end))
        assert delta.truncated == ("tasks",) and delta.tasks == ()
        assert [(row.target, row.queued) for row in delta.mail] == [("m1", 1)]
        assert [row.message_id for row in delta.sent] == ["msg-1"]
        exactly = team_delta(end, 1, TEAM, offline_statuses(end))  # DELTA_CAP tasks after seq 1: all listed
        assert exactly.truncated == () and len(exactly.tasks) == DELTA_CAP

    def test_nothing_after_the_end_is_an_empty_delta(self) -> None:
        """A cursor at (or past) the end reports nothing but itself."""
        end = states([event(1, "team/task", task("task-1", 1))])[-1]
        assert team_delta(end, 1, TEAM, offline_statuses(end)) == TeamDelta(since=1)
        assert team_delta(end, 99, TEAM, offline_statuses(end)) == TeamDelta(since=99)

    def test_live_marks_add_members_and_the_caller_is_never_listed(self) -> None:
        """Members whose live status may have moved are listed with the status given; never the caller."""
        events = [event(1, "team/member", member("m1", "alpha", "provisioning")),
                  event(2, "team/member", member("m1", "alpha", "active"))]
        end = states(events)[-1]
        statuses = {TEAM: "running", "m1": "running"}
        assert team_delta(end, 2, TEAM, statuses).members == ()
        assert [(r.target, r.status) for r in team_delta(end, 2, TEAM, statuses, live={"m1", TEAM}).members] == [
            ("alpha", "running")]
        assert [(r.target, r.status) for r in team_delta(end, 0, "m1", statuses, live={TEAM}).members] == [
            ("lead", "running")]


class TestRecentMessages:
    def test_the_most_recent_messages_in_queue_order_with_their_status(self) -> None:
        """``dsh team show``'s messages part: the last N queued, each queued, delivered or read."""
        events = [
            event(1, "team/message/queued", queued("msg-1", "m1")),
            event(2, "team/message/queued", queued("msg-2", "m1")),
            event(3, "team/message/delivered", delivered("msg-1", "m1")),
            event(4, "team/message/read", receipt("msg-1", "m1")),
            event(5, "team/message/queued", queued("msg-3", TEAM, sender_id="m1", sender_name="alpha")),
            event(6, "team/message/delivered", delivered("msg-2", "m1")),
        ]
        end = states(events)[-1]
        assert [(m.id, m.sender_name, m.target_name, m.status) for m in recent_messages(end)] == [
            ("msg-1", "lead", None, "read"), ("msg-2", "lead", None, "delivered"), ("msg-3", "alpha", "lead", "queued")]
        assert [m.id for m in recent_messages(end, limit=2)] == ["msg-2", "msg-3"]
        assert recent_messages(initial_state(TEAM)) == ()
        assert end.mail.message("msg-1") is None  # read: settled, yet still shown with its status

    def test_the_recent_window_keeps_only_the_latest_queued(self) -> None:
        """The index keeps RECENT_KEPT queued messages, whatever the history; older ones leave it."""
        events, count = [], SETTLED_KEPT + 5
        for number in range(1, count + 1):
            message_id = f"msg-{number}"
            events += [queued(message_id, "m1", index=number - 1), delivered(message_id, "m1"), receipt(message_id, "m1")]
        kinds = ["team/message/queued", "team/message/delivered", "team/message/read"] * count
        end = states([event(seq, kind, body) for seq, (kind, body) in enumerate(zip(kinds, events), 1)])[-1]
        shown = recent_messages(end)
        assert [m.id for m in shown] == [f"msg-{n}" for n in range(count - RECENT_KEPT + 1, count + 1)]
        assert {m.status for m in shown} == {"read"} and len(end.mail.messages) == 0
        outbox = end.changes.sent[TEAM]
        assert len(outbox.settled) == SETTLED_KEPT and outbox.dropped == 5 * 3  # msg-5's receipt let go last
        assert end.changes.sent_after(TEAM, outbox.dropped - 1) is None
        assert len(end.changes.sent_after(TEAM, outbox.dropped) or ()) == SETTLED_KEPT
