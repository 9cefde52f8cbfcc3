"""The roster's admissions as pure decisions: a folded Team (and its shutdown book) in, a record or a typed error out.

The live service calls these inside its journal's serialized section; here they
are driven alone, on states folded from hand-built logs, so every refusal is
shown to write nothing because nothing here can write.
"""

from __future__ import annotations

import pytest

from dsh_team.core.snapshots import TeamMemberSnapshot
from dsh_team.errors import TeamError
from dsh_team.roster.provisioning import decide_spawn
from dsh_team.roster.shutdown import SHUTDOWN_VERSION, ShutdownRecord, decide_answer, decide_shutdown

from team_builders import TEAM, Log


def team() -> Log:
    log = Log()
    log.member("m1", "ann")
    log.member("m1", "ann", "active")
    log.member("m2", "bob")
    log.member("m2", "bob", "failed", error="no model")
    return log


def snapshot(name: str, member_id: str = "m9") -> TeamMemberSnapshot:
    return TeamMemberSnapshot(id=member_id, name=name, description="d", provider="spawn", context="fresh",
                              phase="provisioning")


def shutdown(member_id: str, phase: str) -> ShutdownRecord:
    return ShutdownRecord(version=SHUTDOWN_VERSION, team_id=TEAM, member_id=member_id, phase=phase)  # type: ignore[arg-type]


class TestDecideSpawn:
    def test_a_free_name_under_the_limit_is_its_provisioning_record(self) -> None:
        record = decide_spawn(team().fold(), TEAM, snapshot("cy"), limit=3)
        assert (record.team_id, record.member.name, record.member.phase) == (TEAM, "cy", "provisioning")

    @pytest.mark.parametrize("name", ["ann", "bob"])  # an active member's name, and a failed one's
    def test_a_taken_name_is_refused_whatever_the_members_phase(self, name: str) -> None:
        with pytest.raises(TeamError) as refused:
            decide_spawn(team().fold(), TEAM, snapshot(name), limit=8)
        assert refused.value.code == "TEAM_MEMBER_NAME_TAKEN"

    def test_the_limit_counts_every_member_ever_admitted(self) -> None:
        with pytest.raises(TeamError) as refused:
            decide_spawn(team().fold(), TEAM, snapshot("cy"), limit=2)
        assert refused.value.code == "TEAM_MEMBER_LIMIT" and "limit of 2" in refused.value.message


class TestDecideShutdown:
    def test_an_active_member_gets_a_requested_record_with_the_deadline(self) -> None:
        record, name = decide_shutdown(team().fold(), {}, " ann ", deadline=1234, reason="done")
        assert name == "ann"
        assert record == ShutdownRecord(version=SHUTDOWN_VERSION, team_id=TEAM, member_id="m1", phase="requested",
                                        deadline=1234, reason="done")

    @pytest.mark.parametrize(("target", "book", "code"), [
        ("lead", {}, "TEAM_INVALID_TARGET"),
        ("ghost", {}, "TEAM_MEMBER_NOT_FOUND"),
        ("bob", {}, "TEAM_MEMBER_NOT_FOUND"),  # failed: not active
        ("ann", {"m1": "released"}, "TEAM_MEMBER_NOT_FOUND"),
        ("ann", {"m1": "stopped"}, "TEAM_MEMBER_NOT_FOUND"),
        ("ann", {"m1": "requested"}, "TEAM_SHUTDOWN_PENDING"),
        ("ann", {"m1": "approved"}, "TEAM_SHUTDOWN_PENDING"),
        (7, {}, "TEAM_INVALID_ARGUMENT"),
    ])  # fmt: skip
    def test_refusals(self, target: object, book: dict[str, str], code: str) -> None:
        shutdowns = {member: shutdown(member, phase) for member, phase in book.items()}
        with pytest.raises(TeamError) as refused:
            decide_shutdown(team().fold(), shutdowns, target, deadline=1, reason="r")
        assert refused.value.code == code

    def test_a_declined_request_can_be_asked_again(self) -> None:
        record, _ = decide_shutdown(team().fold(), {"m1": shutdown("m1", "declined")}, "ann", deadline=9, reason="again")
        assert (record.phase, record.deadline) == ("requested", 9)


class TestDecideAnswer:
    @pytest.mark.parametrize(("approve", "phase"), [(True, "approved"), (False, "declined")])
    def test_an_open_request_is_answered(self, approve: bool, phase: str) -> None:
        record = decide_answer({"m1": shutdown("m1", "requested")}, TEAM, "m1", approve=approve, reason="why")
        assert (record.member_id, record.phase, record.reason, record.deadline) == ("m1", phase, "why", None)

    @pytest.mark.parametrize(("book", "member"), [({}, "m1"), ({"m1": "declined"}, "m1"),
                                                  ({"m1": "approved"}, "m1"), ({TEAM: "requested"}, TEAM)])
    def test_without_an_open_request_there_is_nothing_to_answer(self, book: dict[str, str], member: str) -> None:
        with pytest.raises(TeamError) as refused:
            decide_answer({m: shutdown(m, p) for m, p in book.items()}, TEAM, member, approve=True, reason="r")
        assert refused.value.code == "TEAM_NO_SHUTDOWN_REQUEST"
