"""Schema evolution: older Team records fold through registered upcasters; a future version fails loudly.

The fixture ``fixtures/team_log_v1.jsonl`` is a Lead log written in record version 1
(no task ``write_scopes``, no member ``context``). The oracle is the same Team
written in the current version: folding the old log, or a log that mixes old and
current records, must give exactly that state.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dsh_team import VERSION, FoldRule, TeamCode, TeamError, replay
from dsh_team.core.upcast import UPCASTERS, UnsupportedVersion, decode_older, upcast
from dsh_team.log.journal import Journal
from host_spec.events import SessionHeader
from host_spec.host.store.session import Session

from team_builders import TEAM, Log, event

FIXTURE = Path(__file__).parent / "fixtures" / "team_log_v1.jsonl"


def v1_records() -> list[tuple[str, dict[str, Any]]]:
    return [(line["type"], line["data"]) for line in map(json.loads, FIXTURE.read_text().splitlines())]


def as_current(event_type: str, data: dict[str, Any]) -> dict[str, Any]:
    """The oracle: the record as the current version writes it, spelled out by hand."""
    current = json.loads(json.dumps(data))
    current["version"] = VERSION
    if event_type == "team/task":
        current["task"].setdefault("write_scopes", [])
    if event_type == "team/member":
        current["member"].setdefault("context", "fresh")
    return current


def log_of(records: list[tuple[str, dict[str, Any]]]) -> Log:
    log = Log()
    for event_type, data in records:
        log.add(event_type, data)
    return log


class TestOlderVersions:
    def test_the_fixture_is_written_in_version_1(self) -> None:
        """The fixture really is old: every record says version 1 and none is current-shaped."""
        records = v1_records()
        assert {data["version"] for _, data in records} == {1}
        assert all("write_scopes" not in data["task"] for kind, data in records if kind == "team/task")

    def test_an_old_log_folds_to_the_state_the_current_version_would_have(self) -> None:
        """Every upcast record is applied, exactly as its current-version twin would be."""
        old = v1_records()
        state = replay(log_of(old).events, TEAM)
        assert state.failure is None
        assert state == replay(log_of([(kind, as_current(kind, data)) for kind, data in old]).events, TEAM)
        assert state.members.by_name("alpha").context == "fresh"  # type: ignore[union-attr]
        assert state.tasks.tasks["task-2"].write_scopes == () and state.mail.is_delivered("team-message-1")

    def test_a_log_mixing_old_and_current_records_folds_in_order(self) -> None:
        """Version-1 history, then current records continuing the same Team."""
        log = log_of(v1_records())
        log.task("task-1", 3, status="completed", owner_id="child-1")
        log.task("task-3", blocked_by=("task-2",), write_scopes=("src",))
        state = replay(log.events, TEAM)
        assert state.failure is None and state.position == len(log.events)
        assert [t.id for t in state.tasks.listed()] == ["task-1", "task-2", "task-3"]
        assert state.tasks.tasks["task-1"].status == "completed"
        assert state.tasks.tasks["task-3"].write_scopes == ("src",)

    def test_an_upcast_record_is_held_to_every_current_rule(self) -> None:
        """Upcasting does not launder a bad record: a v1 task with a bad revision still breaks the stream."""
        log = log_of(v1_records()[:3])
        bad = dict(v1_records()[2][1], task={**v1_records()[2][1]["task"], "revision": 5})
        log.add("team/task", bad)
        failure = replay(log.events, TEAM).failure
        assert failure is not None and failure.rule == FoldRule.TASK_REVISION_NOT_CONTIGUOUS
        malformed = log_of([("team/task", {"version": 1, "team_id": TEAM, "task": "not an object"})])
        assert replay(malformed.events, TEAM).failure.rule == FoldRule.INVALID_PAYLOAD  # type: ignore[union-attr]

    def test_another_teams_old_record_is_ignored(self) -> None:
        """An inherited version-1 record of another Team is no record of this one."""
        kind, data = v1_records()[2]
        state = replay(log_of([(kind, dict(data, team_id="ancestor"))]).events, TEAM)
        assert state.failure is None and len(state.tasks.tasks) == 0

    def test_upcasters_are_pure(self) -> None:
        """An upcaster returns a new payload and leaves its argument as it was."""
        for (kind, version), step in UPCASTERS.items():
            payload = next(data for k, data in v1_records() if k == kind)
            before = json.dumps(payload, sort_keys=True)
            after = step(payload)
            assert after["version"] == version + 1 and json.dumps(payload, sort_keys=True) == before
        kept = UPCASTERS[("team/task", 1)]({"version": 1, "task": {"write_scopes": ["src"]}})
        assert kept["task"] == {"write_scopes": ["src"]}  # a value already there is not overwritten


class TestUnsupportedVersions:
    @pytest.mark.parametrize("version", [0, VERSION + 1, 99])
    def test_a_version_without_a_chain_fails_loudly(self, version: int) -> None:
        """Future (or pre-history) versions fail the stream with their own rule; later events are ignored."""
        log = Log()
        log.task("task-1")
        log.task("task-2", version=version)
        log.task("task-3")
        state = replay(log.events, TEAM)
        assert state.failure is not None
        assert (state.failure.rule, state.failure.seq) == (FoldRule.UNSUPPORTED_VERSION, 2)
        assert state.failure.message == f"unsupported Agent Teams event version {version}"
        assert list(state.tasks.tasks) == ["task-1"]

    def test_an_event_type_that_did_not_exist_then_is_unsupported(self) -> None:
        """``team/mode`` has no version-1 form, so a version-1 mode record has no chain."""
        failure = replay([event(1, "team/mode", {"version": 1, "team_id": TEAM, "enabled": True})], TEAM).failure
        assert failure is not None and failure.rule == FoldRule.UNSUPPORTED_VERSION

    async def test_the_service_refuses_to_act_on_it_with_a_typed_code(self) -> None:
        """The journal turns the failure into ``TEAM_STREAM_FAILED`` carrying the rule and seq."""
        lead = Session(SessionHeader(id=TEAM, created_at=0))
        lead.append("team/task", {"version": VERSION + 1, "team_id": TEAM, "task": {}})
        with pytest.raises(TeamError) as caught:
            Journal(lead).authoritative()
        error = caught.value
        assert error.code == TeamCode.STREAM_FAILED
        assert error.details["rule"] == FoldRule.UNSUPPORTED_VERSION and error.details["seq"] == 1

    def test_the_chain_helpers_say_why(self) -> None:
        """``upcast`` names the missing version; ``decode_older`` refuses a non-object."""
        with pytest.raises(UnsupportedVersion) as missing:
            upcast("team/task", {"version": "2"})
        assert missing.value.version == "2"
        with pytest.raises(msgspec.DecodeError):
            decode_older("team/task", b"[1]")
