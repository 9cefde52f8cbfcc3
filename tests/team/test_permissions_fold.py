"""The permissions fold and decision: pure functions over records, every rule and refusal."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from dsh_team.errors import TeamCode, TeamError
from dsh_team.permissions import (
    AnswerCommand,
    AnsweredRecord,
    LivePermissions,
    PermissionsState,
    RequestCommand,
    RequestedRecord,
    decide_permission,
    fold_permissions,
    replay_permissions,
)
from dsh_team.views.permissions import build_permissions, render_permissions
from host_spec.events import Event

TEAM = "lead"


def event(seq: int, kind: str, payload: Any) -> Event:
    return Event(seq=seq, time=0.0, type=kind, data=msgspec.Raw(msgspec.json.encode(payload)))


def request(ask_id: str = "ask-1", key: str = "m/1/1/c", team: str = TEAM, version: int = 1,
            always_rule: str = "bash(make)", route: str = "user") -> RequestedRecord:
    return RequestedRecord(version=version, team_id=team, ask_id=ask_id, key=key, member="builder", member_id="m",
                           tool="bash", arguments='{"command":"make"}', rule="default", deadline=10,
                           route=route, always_rule=always_rule)  # type: ignore[arg-type]


def answer(ask_id: str = "ask-1", decision: str = "allow", always: bool = False, by: str = "user") -> AnsweredRecord:
    return AnsweredRecord(version=1, team_id=TEAM, ask_id=ask_id, decision=decision, by=by,  # type: ignore[arg-type]
                          always=always)


def fold(*records: tuple[str, Any]) -> PermissionsState:
    state = PermissionsState(TEAM)
    for seq, (kind, payload) in enumerate(records, 1):
        state = fold_permissions(state, event(seq, kind, payload))
    return state


REQ, ANS = "permission/requested", "permission/answered"


def test_an_ask_and_its_answer_fold() -> None:
    state = fold((REQ, request()), ("team/other", {}), (ANS, answer(always=True)), (REQ, request("ask-2", "m/1/2/c")))
    assert state.failure is None and state.order == ("ask-1", "ask-2")
    assert [ask.open for ask in state.listed()] == [False, True] and state.open_asks()[0].request.ask_id == "ask-2"
    assert dict(state.always) == {"m": ("bash(make)",)} and state.next_id() == "ask-3"
    assert state.asks["ask-1"].answered_seq == 3


@pytest.mark.parametrize(("records", "message"), [
    ([(REQ, request("ask-2"))], "out of order"),
    ([(REQ, request()), (REQ, request("ask-2"))], "asked about twice"),
    ([(ANS, answer())], "without a request"),
    ([(REQ, request()), (ANS, answer()), (ANS, answer("ask-1", "deny"))], "answered twice"),
    ([(REQ, request()), (ANS, answer(decision="deny", always=True))], "only an allow can be always"),
    ([(REQ, request(version=2))], "unsupported permission/requested version 2"),
    ([(REQ, {"version": 1})], "invalid permission/requested payload"),
])  # fmt: skip
def test_a_broken_rule_fails_the_fold_for_good(records: list[tuple[str, Any]], message: str) -> None:
    state = fold(*records)
    assert state.failure is not None and message in state.failure
    assert fold_permissions(state, event(99, REQ, request("ask-9"))) is state  # terminal


def test_another_teams_records_are_ignored_and_always_without_a_rule_adds_none() -> None:
    state = fold((REQ, request(team="other")), (REQ, request(always_rule="")), (ANS, answer(always=True)))
    assert state.failure is None and state.order == ("ask-1",) and dict(state.always) == {}


def test_decisions() -> None:
    empty = PermissionsState(TEAM)
    command = RequestCommand(key="m/1/1/c", member="builder", member_id="m", tool="bash", arguments="{}",
                             rule="default", deadline=5, route="lead", always_rule="")
    made = decide_permission(empty, command)
    assert isinstance(made, RequestedRecord) and (made.ask_id, made.route) == ("ask-1", "lead")
    state = fold((REQ, made))
    assert decide_permission(state, command) is None  # the same call again: already on record
    lead = decide_permission(state, AnswerCommand("ask-1", "always", "lead", "ok"))
    assert isinstance(lead, AnsweredRecord) and (lead.decision, lead.always, lead.by) == ("allow", False, "lead")
    user_only = fold((REQ, request()))
    with pytest.raises(TeamError) as refused:
        decide_permission(user_only, AnswerCommand("ask-1", "allow", "lead"))
    assert refused.value.code == TeamCode.PERMISSION_NOT_DELEGATED
    always = decide_permission(user_only, AnswerCommand("ask-1", "always", "user"))
    assert isinstance(always, AnsweredRecord) and always.always
    failed = fold((ANS, answer()))
    with pytest.raises(TeamError) as broken:
        decide_permission(failed, command)
    assert broken.value.code == TeamCode.STREAM_FAILED


def test_live_folds_follow_a_session_and_forget_it() -> None:
    class Session:
        id = TEAM

        def __init__(self, events: list[Event]) -> None:
            self.events = events

        @property
        def last_seq(self) -> int:
            return len(self.events)

    events = [event(1, REQ, request())]
    session = Session(events)
    live = LivePermissions()
    assert live.state(session).order == ("ask-1",)  # type: ignore[arg-type]
    events.append(event(2, ANS, answer()))
    events.append(event(3, ANS, answer()))
    assert live.state(session).failure is not None  # type: ignore[arg-type]
    live.forget(Session([]))  # type: ignore[arg-type]  # another object of the same id: kept
    assert live.state(session).failure is not None  # type: ignore[arg-type]
    live.forget(session)  # type: ignore[arg-type]
    live.forget(session)  # type: ignore[arg-type]
    assert replay_permissions(events[:2], TEAM).asks["ask-1"].answer == answer()


def test_the_view_names_open_asks_answers_and_failures() -> None:
    assert build_permissions(PermissionsState(TEAM)) is None
    state = fold((REQ, request()), (ANS, AnsweredRecord(version=1, team_id=TEAM, ask_id="ask-1", decision="deny",
                                                        by="deadline", reason="late " * 30)),
                 (REQ, request("ask-2", "k2", route="lead")))  # fmt: skip
    report = build_permissions(state)
    assert report is not None
    lines = render_permissions(report)
    assert lines[0] == "Permissions:"
    assert lines[1].startswith('  ask-1 builder: bash {"command":"make"} (rule default, asks user): deny by deadline: late')
    assert lines[1].endswith("...")
    assert lines[2].endswith("(rule default, asks lead): OPEN -- answer with `dsh team permit ask-2 allow|deny`")
    broken = build_permissions(fold((ANS, answer())))
    assert broken is not None and render_permissions(broken)[1].startswith("  FAILURE (permissions): seq 1")
