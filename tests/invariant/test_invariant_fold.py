"""The Agent Teams stream invariant on real sessions (pure part, no plugin manager).

A small observer adapts :class:`TeamStreamInvariant` to the session's veto seam
exactly as the host does: a violation raises ``InvariantError`` from ``append``.
"""

from __future__ import annotations

from typing import Any

import pytest

from dsh_team import FoldRule, evolve, initial_state
from dsh_team_invariant.invariant import TeamStreamInvariant
from host_spec.errors import InvariantError
from host_spec.events import SessionHeader
from host_spec.host.store.session import Session

LEAD = "lead-1"


class Veto:
    """The host's role: call check before the append (nothing is reported after it)."""

    def __init__(self, invariant: TeamStreamInvariant) -> None:
        self.invariant = invariant
        self.rules: list[str] = []

    def pre_append(self, session: Any, event: Any) -> None:
        violation = self.invariant.check(session, event)
        if violation is not None:
            self.rules.append(violation.rule)
            raise InvariantError("dsh-team-invariant", violation.reason)

    def committed(self, session: Any, event: Any) -> None:
        return None

    def flushed(self, session: Any, durable_seq: int) -> None:
        return None


def member(id: str, name: str, phase: str, **extra: Any) -> dict[str, Any]:
    snapshot = {"id": id, "name": name, "description": "d", "provider": "spawn", "context": "fresh", "phase": phase}
    snapshot.update(extra)
    return {"version": 2, "team_id": LEAD, "member": snapshot}


def task(id: str, revision: int = 1, blocked_by: tuple[str, ...] = (), status: str = "pending",
         team_id: str = LEAD) -> dict[str, Any]:
    return {"version": 2, "team_id": team_id, "task": {"id": id, "revision": revision, "subject": "s",
                                                       "description": "d", "status": status,
                                                       "blocked_by": list(blocked_by), "write_scopes": []}}


def queued(id: str, target: str = "child-1", index: int | None = None) -> dict[str, Any]:
    body = {"version": 2, "team_id": LEAD, "message": {"id": id, "sender_id": LEAD, "sender_name": "lead",
                                                       "target_id": target, "content": [{"type": "text", "text": "hi"}]}}
    return body if index is None else {**body, "index": index}


def delivered(id: str, target: str = "child-1") -> dict[str, Any]:
    return {"version": 2, "team_id": LEAD, "message_id": id, "target_id": target}


@pytest.fixture
def invariant() -> TeamStreamInvariant:
    return TeamStreamInvariant()


@pytest.fixture
def veto(invariant: TeamStreamInvariant) -> Veto:
    return Veto(invariant)


@pytest.fixture
def lead(veto: Veto) -> Session:
    return Session(SessionHeader(id=LEAD, created_at=0), observer=veto)


def rejected(session: Session, type: str, data: Any) -> InvariantError:
    before = session.last_seq
    with pytest.raises(InvariantError) as info:
        session.append(type, data)
    assert session.last_seq == before, "a vetoed event must not be appended"
    return info.value


class TestAccepts:
    def test_valid_stream(self, lead: Session, invariant: TeamStreamInvariant) -> None:
        """A well-formed Team stream appends in full and the fold follows it."""
        lead.append("turn/start", {"turn": 1})
        lead.append("team/member", member("child-1", "reviewer", "provisioning"))
        lead.append("team/member", member("child-1", "reviewer", "active"))
        lead.append("team/task", task("task-1"))
        lead.append("team/task", task("task-2", blocked_by=("task-1",)))
        lead.append("team/task", task("task-1", revision=2, status="completed"))
        lead.append("team/message/queued", queued("m-1"))
        lead.append("team/message/delivered", delivered("m-1"))
        assert lead.last_seq == 8
        state = invariant.state(lead)
        assert state.position == 8
        assert len(state.tasks.tasks) == 2 and state.mail.is_delivered("m-1")

    def test_other_team_records_pass(self, lead: Session) -> None:
        """Records of another Team (an inherited fork prefix) are not this session's Team."""
        lead.append("team/task", task("task-9", revision=5, team_id="someone-else"))
        assert lead.last_seq == 1


class TestRejects:
    @pytest.mark.parametrize(
        ("setup", "bad", "rule", "fragment"),
        [
            ([], ("team/member", member("child-1", "reviewer", "active")), "member-must-begin-provisioning",
             'team member "child-1" must begin provisioning'),
            ([("team/member", member("child-1", "reviewer", "provisioning"))],
             ("team/member", member("child-2", "reviewer", "provisioning")), "member-name-reused", "reused"),
            ([("team/member", member("child-1", "reviewer", "provisioning"))],
             ("team/member", member("child-1", "other", "active")), "member-identity-changed", "immutable"),
            ([("team/member", member("child-1", "reviewer", "provisioning")),
              ("team/member", member("child-1", "reviewer", "failed", error="x"))],
             ("team/member", member("child-1", "reviewer", "active")), "member-invalid-transition",
             "invalid failed -> active transition"),
            ([], ("team/task", task("task-1", revision=2)), "task-must-begin-at-revision-1", "revision 1"),
            ([("team/task", task("task-1"))], ("team/task", task("task-1", revision=3)),
             "task-revision-not-contiguous", "not contiguous"),
            ([], ("team/task", task("task-1", blocked_by=("task-7",))), "task-missing-blocker",
             'blocker task "task-7" for "task-1" is missing or deleted'),
            ([], ("team/task", task("task-1", blocked_by=("task-1",))), "task-dependency-cycle", "cannot block itself"),
            ([("team/task", task("task-1")), ("team/task", task("task-2", blocked_by=("task-1",)))],
             ("team/task", task("task-1", revision=2, blocked_by=("task-2",))), "task-dependency-cycle",
             "task dependency cycle includes"),
            ([("team/task", task("task-1"))], ("team/task", task("task-2", blocked_by=("task-1", "task-1"))),
             "task-duplicate-blocker", "repeats blocker"),
            ([("team/message/queued", queued("m-1"))], ("team/message/queued", queued("m-1")),
             "message-queued-twice", "queued twice"),
            ([("team/message/queued", queued("m-1", index=0)), ("team/message/delivered", delivered("m-1")),
              ("team/message/read", delivered("m-1"))],
             ("team/message/queued", queued("m-1", index=0)), "message-queued-twice", "queued twice"),
            ([("team/message/queued", queued("m-1", index=0))], ("team/message/queued", queued("m-2", index=2)),
             "message-index-skipped", "queue index 2, the next one is 1"),
            ([("team/message/queued", queued("m-1", index=0)), ("team/message/delivered", delivered("m-1")),
              ("team/message/read", delivered("m-1"))],
             ("team/message/read", delivered("m-1")), "message-read-before-delivered", "(or read already)"),
            ([], ("team/message/delivered", delivered("m-1")), "message-delivered-before-queued",
             "delivered before queueing"),
            ([("team/message/queued", queued("m-1"))], ("team/message/delivered", delivered("m-1", "child-2")),
             "message-target-changed", "target changed"),
            ([("team/message/queued", queued("m-1")), ("team/message/delivered", delivered("m-1"))],
             ("team/message/delivered", delivered("m-1")), "message-delivered-twice", "delivered twice"),
            ([], ("team/task", {"version": 3, "team_id": LEAD, "task": {}}), "unsupported-version",
             "unsupported Agent Teams event version 3"),
            ([], ("team/task", {"version": 2, "team_id": LEAD, "task": {"id": "task-1"}}), "invalid-payload",
             "persisted Agent Teams team/task payload is invalid"),
            ([], ("team/member", {"nonsense": True}), "invalid-payload", "payload is invalid"),
        ],
    )
    def test_rejected_event_is_not_appended(self, lead: Session, veto: Veto, setup: list[tuple[str, Any]],
                                            bad: tuple[str, Any], rule: str, fragment: str) -> None:
        """Every event the Team fold would reject is vetoed with INVARIANT, its seq and its rule."""
        for type, data in setup:
            lead.append(type, data)
        error = rejected(lead, *bad)
        assert error.code == "INVARIANT"
        assert error.plugin == "dsh-team-invariant"
        assert f"session event {len(setup) + 1} violates the Agent Teams stream: " in str(error)
        assert fragment in str(error)
        assert veto.rules == [rule]

    def test_fold_continues_after_a_veto(self, lead: Session) -> None:
        """A vetoed event does not advance the fold: the next valid event still applies."""
        lead.append("team/task", task("task-1"))
        rejected(lead, "team/task", task("task-1", revision=3))
        lead.append("team/task", task("task-1", revision=2, status="completed"))
        rejected(lead, "team/task", task("task-1", revision=2))
        assert lead.last_seq == 2


class TestStaging:
    def test_candidate_vetoed_elsewhere_is_not_committed(self, invariant: TeamStreamInvariant) -> None:
        """If another check vetoes after ours passed, the staged candidate is dropped."""

        class LaterVeto(Veto):
            vetoes = 1

            def pre_append(self, session: Any, event: Any) -> None:
                super().pre_append(session, event)
                if self.vetoes:
                    self.vetoes -= 1
                    raise InvariantError("other", "not this one")

        observer = LaterVeto(invariant)
        session = Session(SessionHeader(id=LEAD, created_at=0), observer=observer)
        with pytest.raises(InvariantError):
            session.append("team/task", task("task-1"))
        assert len(invariant.state(session).tasks.tasks) == 0  # read before anything holds its seq: dropped
        observer.vetoes = 1
        with pytest.raises(InvariantError):
            session.append("team/task", task("task-1"))
        session.append("team/task", task("task-1", team_id="another-team"))  # same seq, other Team: commits
        assert len(invariant.state(session).tasks.tasks) == 0
        session.append("team/task", task("task-1"))  # still revision 1: the vetoed one never counted
        assert invariant.state(session).tasks.tasks["task-1"].revision == 1

    def test_stage_vetoed_elsewhere_then_overwritten_at_its_seq(self, invariant: TeamStreamInvariant) -> None:
        """A candidate vetoed elsewhere is dropped even when a non-Team event now holds its seq."""

        class LaterVeto(Veto):
            vetoes = 1

            def pre_append(self, session: Any, event: Any) -> None:
                super().pre_append(session, event)
                if self.vetoes:
                    self.vetoes -= 1
                    raise InvariantError("other", "not this one")

        session = Session(SessionHeader(id=LEAD, created_at=0), observer=LaterVeto(invariant))
        with pytest.raises(InvariantError):
            session.append("team/task", task("task-1"))
        session.append("turn/start", {"turn": 1})  # seq 1 again, not a Team event: never checked
        assert len(invariant.state(session).tasks.tasks) == 0
        session.append("team/task", task("task-1"))
        assert invariant.state(session).tasks.tasks["task-1"].revision == 1

    def test_stage_is_adopted_after_later_non_team_events(self, lead: Session, invariant: TeamStreamInvariant) -> None:
        """A committed candidate is adopted when read later, whatever was appended after it."""
        lead.append("team/task", task("task-1"))
        lead.append("turn/start", {"turn": 1})
        lead.append("turn/end", {"turn": 1})
        lead.append("team/task", task("task-1", revision=2, status="completed"))  # settles seq 1 first
        lead.append("turn/start", {"turn": 2})
        state = invariant.state(lead)
        assert (state.tasks.tasks["task-1"].revision, state.position) == (2, 4)
        assert invariant.state(lead) is state  # settled once; the next read changes nothing

    def test_a_committed_stage_is_adopted_when_the_journal_names_its_event(
        self, lead: Session, invariant: TeamStreamInvariant
    ) -> None:
        """committed(session, event) takes the stage of that very event; an equal copy or a fresh session settles."""
        import msgspec

        event = lead.append("team/task", task("task-1"))
        state = invariant.committed(lead, event)
        assert state.tasks.tasks["task-1"].revision == 1 and invariant.committed(lead, event) is state
        later = lead.append("team/task", task("task-1", revision=2, status="completed"))
        copy = msgspec.structs.replace(later)  # another host may commit an equal object
        assert copy is not later and invariant.committed(lead, copy).tasks.tasks["task-1"].revision == 2
        other = Session(SessionHeader(id=LEAD, created_at=0))  # same id, another log: seeded from its events
        first = other.append("team/task", task("task-9"))
        assert list(invariant.committed(other, first).tasks.tasks) == ["task-9"]

    def test_unknown_session_is_seeded_lazily(self, invariant: TeamStreamInvariant) -> None:
        """An unseeded session is seeded from its log on the next check, including committed events."""
        session = Session(SessionHeader(id=LEAD, created_at=0))
        session.append("team/task", task("task-1"))
        assert invariant.sessions() == []
        assert invariant.check(session, session_event(session, "team/task", task("task-1"))) is not None
        assert invariant.sessions() == [LEAD]

    def test_non_team_events_are_ignored(self, invariant: TeamStreamInvariant, lead: Session) -> None:
        """Non-Team events neither seed nor stage anything."""
        lead.append("turn/start", {"turn": 1})
        assert invariant.sessions() == []


class TestSeeding:
    def test_seed_folds_existing_events(self, invariant: TeamStreamInvariant, veto: Veto) -> None:
        """Seeding from a session's events makes later checks continue that stream."""
        plain = Session(SessionHeader(id=LEAD, created_at=0))
        plain.append("team/task", task("task-1"))
        seeded = Session(SessionHeader(id=LEAD, created_at=0), events=plain.events, observer=veto)
        invariant.seed(seeded)
        rejected(seeded, "team/task", task("task-1"))
        seeded.append("team/task", task("task-1", revision=2))
        assert seeded.last_seq == 2

    def test_failed_stream_rejects_every_later_team_event(self, invariant: TeamStreamInvariant, veto: Veto) -> None:
        """A stored stream that already failed refuses further Team events but not other events."""
        plain = Session(SessionHeader(id=LEAD, created_at=0))
        plain.append("team/task", task("task-1", revision=4))
        seeded = Session(SessionHeader(id=LEAD, created_at=0), events=plain.events, observer=veto)
        invariant.seed(seeded)
        error = rejected(seeded, "team/task", task("task-2"))
        assert "must begin at revision 1" in str(error)
        assert veto.rules == ["stream-already-failed"]
        seeded.append("turn/start", {"turn": 1})

    def test_forget_and_clear(self, invariant: TeamStreamInvariant, lead: Session) -> None:
        """forget drops one session's fold and clear drops all."""
        lead.append("team/task", task("task-1"))
        other = Session(SessionHeader(id="other", created_at=0))
        invariant.seed(other)
        invariant.forget(lead)
        assert invariant.sessions() == ["other"]
        invariant.clear()
        assert invariant.sessions() == []

    def test_a_resumed_activation_gets_its_own_fold(self, invariant: TeamStreamInvariant, veto: Veto) -> None:
        """A new session object of the same id is folded afresh; the old one's late disposal keeps it."""
        old = Session(SessionHeader(id=LEAD, created_at=0))
        invariant.seed(old)
        resumed = Session(SessionHeader(id=LEAD, created_at=0), observer=veto)
        resumed.append("team/task", task("task-1"))  # checked against a fold of *this* log
        assert invariant.state(resumed).tasks.tasks["task-1"].revision == 1
        invariant.forget(old)  # the stale activation leaves late: the live fold stays
        assert invariant.sessions() == [LEAD] and invariant.state(resumed).tasks.tasks["task-1"].revision == 1
        error = rejected(resumed, "team/task", task("task-1"))  # revision 1 again: not contiguous
        assert "not contiguous" in str(error) or "revision" in str(error)


class TestCreation:
    def test_creation_does_not_refold_a_session_a_reader_already_seeded(self, lead: Session, invariant: TeamStreamInvariant) -> None:
        """``dsh_session_created`` after a first read (the journal's) keeps that fold: no second replay."""
        lead.append("team/task", task("task-1"))
        invariant.forget(lead)
        seeded = invariant.state(lead)
        invariant.created(lead)
        assert invariant.state(lead) is seeded
        other = Session(SessionHeader(id=LEAD, created_at=0))  # a new activation of the id is another log
        invariant.created(other)
        assert invariant.state(other) is not seeded and len(invariant.state(other).tasks.tasks) == 0


class TestRuleNames:
    def test_the_veto_names_the_rule_the_fold_reports(self, lead: Session, veto: Veto) -> None:
        """The violation's rule is the fold failure's own ``rule`` (a value, never parsed from text)."""
        bad = session_event(lead, "team/task", task("task-1", revision=2))
        failure = evolve(initial_state(LEAD), bad).failure
        assert failure is not None and failure.rule == FoldRule.TASK_MUST_BEGIN_AT_REVISION_1
        rejected(lead, "team/task", task("task-1", revision=2))
        assert veto.rules == [failure.rule]
        assert failure.seq == bad.seq and "must begin at revision 1" in failure.message


def session_event(session: Session, type: str, data: Any) -> Any:
    """A candidate event as the session would build it (next seq), without appending."""
    from host_spec.events import Event, encode_data

    return Event(seq=session.last_seq + 1, time=0, type=type, data=encode_data(data))
