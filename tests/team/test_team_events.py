"""Team record Structs: strict payloads, content-block rules, selector and id helpers."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from dsh_team.core.content import validate_content
from dsh_team.core.records import TEAM_EVENT_TYPES, TaskRecord, decode_payload, decode_selector
from dsh_team.core.snapshots import TeamTaskSnapshot, numeric_task_number
from host_spec.events import json_encode

from team_builders import member, mode, queued, task

IMAGE = {
    "type": "image",
    "attachment": {"attachment_id": "a1", "media_type": "image/png", "bytes": 0, "width": 1, "height": 1},
}


def decode(type_: str, payload: Any) -> Any:
    return decode_payload(type_, json_encode(payload))


class TestRecords:
    def test_all_seven_types_are_known(self) -> None:
        """The seven Team event types are the set the fold recognises."""
        assert TEAM_EVENT_TYPES == {
            "team/member",
            "team/task",
            "team/message/queued",
            "team/message/delivered",
            "team/message/read",
            "team/mode",
            "team/quiescent",
        }

    def test_task_record_round_trips_with_snake_case_keys(self) -> None:
        """A task record decodes into typed snapshots and re-encodes to the same keys."""
        payload = task("task-1", 2, status="in_progress", blocked_by=["task-0"], owner_id="w1")
        record = decode("team/task", payload)
        assert isinstance(record, TaskRecord)
        assert record.task.blocked_by == ("task-0",) and record.task.owner_id == "w1"
        assert msgspec.json.decode(json_encode(record)) == payload

    def test_optional_fields_are_omitted_when_absent(self) -> None:
        """An unowned task and an error-free member encode without owner_id/error keys."""
        assert "owner_id" not in msgspec.json.decode(json_encode(decode("team/task", task("task-1"))))["task"]
        assert "error" not in msgspec.json.decode(json_encode(decode("team/member", member("m", "w"))))["member"]

    @pytest.mark.parametrize(
        ("payload", "error"),
        [
            ({**task("task-1"), "extra": 1}, "Object contains unknown field `extra`"),
            ({**task("task-1"), "team_id": 7}, "Expected `str`, got `int` - at `$.team_id`"),
            ({**task("task-1"), "team_id": ""}, "Expected `str` of length >= 1 - at `$.team_id`"),
            ({**task("task-1"), "version": -1}, "Expected `int` >= 0 - at `$.version`"),
            (task("task-1", 0), "Expected `int` >= 1 - at `$.task.revision`"),
            (task("task-1", True), "Expected `int`, got `bool` - at `$.task.revision`"),  # type: ignore[arg-type]
            (task("task-1", status="done"), "Invalid enum value 'done' - at `$.task.status`"),
            (task(""), "Expected `str` of length >= 1 - at `$.task.id`"),
            (task("task-1", blocked_by=[""]), "Expected `str` of length >= 1 - at `$.task.blocked_by[0]`"),
            (task("task-1", owner_id=""), "Expected `str` of length >= 1 - at `$.task.owner_id`"),
            (task("task-9007199254740992"), "task id task-9007199254740992 is outside the safe integer range - at `$.task`"),
            ({"version": 2, "team_id": "lead", "task": {**task("task-1")["task"], "ownerId": "x"}},
             "Object contains unknown field `ownerId` - at `$.task`"),
        ],
    )  # fmt: skip
    def test_invalid_task_payloads_are_rejected(self, payload: dict[str, Any], error: str) -> None:
        """Wrong types, extra keys, bad enums and unsafe numeric ids fail the strict decode, naming the field."""
        with pytest.raises(msgspec.ValidationError) as caught:
            decode("team/task", payload)
        assert str(caught.value) == error

    def test_largest_safe_task_id_is_valid(self) -> None:
        """``task-9007199254740991`` is the last valid numeric id."""
        assert decode("team/task", task("task-9007199254740991")).task.id == "task-9007199254740991"

    def test_mode_record(self) -> None:
        """A mode record holds a boolean selection; anything else is invalid."""
        assert decode("team/mode", mode(False)).enabled is False
        with pytest.raises(msgspec.ValidationError):
            decode("team/mode", {**mode(True), "enabled": 1})

    def test_unknown_type_is_a_key_error(self) -> None:
        """Only Team types have decoders."""
        with pytest.raises(KeyError):
            decode_payload("turn/start", b"{}")


class TestSelector:
    def test_selector_ignores_other_keys(self) -> None:
        """The loose selector reads version and team_id from any payload shape."""
        selector = decode_selector(b'{"version": 1, "team_id": "x", "whatever": [1]}')
        assert (selector.version, selector.team_id) == (1, "x")

    @pytest.mark.parametrize("data", [b"{}", b'{"version": 2, "team_id": 3}', b'{"version": -1, "team_id": "a"}', b"[]"])
    def test_selector_needs_both_fields(self, data: bytes) -> None:
        """A selector without a non-negative version and a non-empty team id fails."""
        with pytest.raises(msgspec.ValidationError):
            decode_selector(data)


class TestNumericIds:
    @pytest.mark.parametrize(
        ("task_id", "number"),
        [("task-1", 1), ("task-42", 42), ("task-0", None), ("task-01", None), ("task-", None),
         ("task-1a", None), ("task-\u0661", None), ("job-3", None), ("task-99999999999999999", 99999999999999999)],
    )  # fmt: skip
    def test_only_canonical_positive_numbers_are_numeric(self, task_id: str, number: int | None) -> None:
        """Standard ids are ``task-<n>`` with ASCII digits, n >= 1 and no leading zero."""
        assert numeric_task_number(task_id) == number

    def test_long_non_numeric_ids_are_legal(self) -> None:
        """A long branded id passes the range check because it is not numeric."""
        snapshot = TeamTaskSnapshot("task-custom-identifier-x", 1, "s", "d", "pending", (), ())
        assert snapshot.id == "task-custom-identifier-x" and numeric_task_number(snapshot.id) is None


class TestContentBlocks:
    @pytest.mark.parametrize(
        "block",
        [
            {"type": "text", "text": "hi"},
            {"type": "reasoning", "text": "because"},
            {"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"},
            IMAGE,
            {**IMAGE, "attachment": {**IMAGE["attachment"], "name": "shot.png", "media_type": "image/gif"}},
            {"type": "custom-card", "__proto__": {"x": 1}, "constructor": "kept"},
            {"type": "text", "text": "extra keys kept", "cache": True},
        ],
    )
    def test_valid_blocks_pass(self, block: dict[str, Any]) -> None:
        """Well-formed core blocks and opaque merge-extensible blocks are accepted and kept verbatim, extra keys too."""
        assert validate_content([block]) is None
        record = decode("team/message/queued", queued("m-1", "w1", content=[block]))
        assert record.message.content == (block,)
        assert msgspec.json.decode(json_encode(record))["message"]["content"] == [block]

    @pytest.mark.parametrize(
        "block",
        [
            None,
            [],
            3,
            {},
            {"type": ""},
            {"type": None},
            {"type": "text", "text": False},
            {"type": "reasoning"},
            {"type": "tool-call", "id": "", "name": "n", "arguments": "{}"},
            {"type": "tool-call", "id": "c", "name": 1, "arguments": "{}"},
            {"type": "tool-call", "id": "c", "name": "n", "arguments": {}},
            {"type": "tool-result", "tool_call_id": "c", "content": []},
            {"type": "image"},
            {"type": "image", "attachment": {**IMAGE["attachment"], "attachment_id": ""}},
            {"type": "image", "attachment": {**IMAGE["attachment"], "media_type": "image/bmp"}},
            {"type": "image", "attachment": {**IMAGE["attachment"], "bytes": -1}},
            {"type": "image", "attachment": {**IMAGE["attachment"], "bytes": 1.5}},
            {"type": "image", "attachment": {**IMAGE["attachment"], "width": 0}},
            {"type": "image", "attachment": {**IMAGE["attachment"], "height": True}},
            {"type": "image", "attachment": {**IMAGE["attachment"], "name": 3}},
        ],
    )
    def test_malformed_blocks_are_rejected(self, block: Any) -> None:
        """Non-objects, empty or null types, broken core variants and tool-result fail."""
        with pytest.raises(ValueError):
            validate_content([block])
        with pytest.raises(msgspec.ValidationError):
            decode("team/message/queued", queued("m1", "w1", content=[block]))

    def test_opaque_blocks_survive_decoding_unchanged(self) -> None:
        """Unknown block kinds, including __proto__/constructor keys, round-trip intact."""
        block = {"type": "custom-card", "__proto__": {"polluted": True}, "constructor": {"name": "x"}}
        record = decode("team/message/queued", queued("m1", "w1", content=[block]))
        assert record.message.content == (block,)
        assert not hasattr({}, "polluted")
