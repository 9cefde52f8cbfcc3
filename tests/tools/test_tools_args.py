"""Argument Structs: defaults, and bounds the Struct deliberately leaves to the service."""

from __future__ import annotations

import msgspec
import pytest
from msgspec import UNSET

from dsh_team_tools import schemas as s
from host_spec.schema import tool_json_schema


def decode(typ: type, raw: bytes) -> object:
    return msgspec.json.decode(raw, type=typ)


class TestArgs:
    def test_defaults(self) -> None:
        """Defaults: fresh context, 30 s wait, first page of 50, optional fields unset."""
        assert decode(s.SpawnTeammateArgs, b'{"name":"a","description":"d","prompt":"p"}').context == "fresh"
        assert decode(s.WaitAgentArgs, b"{}").timeout_ms == 30_000
        listing = decode(s.TeamTaskListArgs, b"{}")
        assert (listing.cursor, listing.limit, listing.status, listing.owner, listing.ready) == (0, 50, UNSET, UNSET,
                                                                                                 UNSET)

    def test_ranges_are_not_enforced_by_the_struct(self) -> None:
        """Out-of-range timeout, cursor and limit decode, so the service/tool report their own errors."""
        assert decode(s.WaitAgentArgs, b'{"timeout_ms":9999}').timeout_ms == 9999
        window = decode(s.TeamTaskListArgs, b'{"cursor":-1,"limit":101}')
        assert (window.cursor, window.limit) == (-1, 101)

    def test_schema_still_states_the_ranges(self) -> None:
        """The schema shows the model the valid ranges."""
        assert tool_json_schema(s.WaitAgentArgs)["properties"]["timeout_ms"] == {
            "minimum": 10000, "maximum": 3600000, "type": "integer", "default": 30000}
        limit = tool_json_schema(s.TeamTaskListArgs)["properties"]["limit"]
        assert (limit["minimum"], limit["maximum"]) == (1, 100)

    def test_every_action(self) -> None:
        """All eight task actions decode."""
        for action in ("claim", "release", "edit", "set_dependencies", "complete", "reopen", "reassign", "delete"):
            raw = msgspec.json.encode({"task_id": "task-1", "expected_revision": 1, "action": action})
            assert decode(s.TeamTaskUpdateArgs, raw).action == action


class TestResults:
    def test_unset_fields_are_omitted(self) -> None:
        """Results omit absent optional fields rather than sending null."""
        assert msgspec.json.encode(s.WaitAgentResult(timed_out=True)) == b'{"timed_out":true}'
        assert msgspec.json.encode(s.TaskListResult(tasks=[])) == b'{"tasks":[]}'

    def test_results_are_closed(self) -> None:
        """A result with an unexpected field does not validate."""
        with pytest.raises(msgspec.ValidationError, match="extra"):
            msgspec.convert({"message_id": "m", "status": "accepted", "extra": 1}, s.SendMessageResult)
