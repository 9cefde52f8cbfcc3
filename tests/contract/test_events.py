"""The event envelope codec: lossless payloads, raw data kept verbatim, typed decode."""

from __future__ import annotations

import math
import re

import msgspec
import pytest

from host_spec.errors import InvalidEventError
from host_spec.events import Cause, Event, StepMark, decode_event, encode_data, encode_event, encode_event_lines


class TestEncodeData:
    def test_plain_payloads_round_trip(self) -> None:
        """A builtin payload is snapshotted as the JSON it decodes back from."""
        raw = encode_data({"a": [1, 2.5, "x", None, True], "b": {"c": -0.0}})
        assert msgspec.json.decode(raw) == {"a": [1, 2.5, "x", None, True], "b": {"c": -0.0}}

    def test_tuples_are_walked_and_accepted(self) -> None:
        """A tuple never compares equal to its decoded list, so it takes the checked path."""
        assert msgspec.json.decode(encode_data({"pair": (1, (2.0, "z"))})) == {"pair": [1, [2.0, "z"]]}

    @pytest.mark.parametrize(
        ("payload", "where"),
        [
            ({"x": math.nan}, "non-finite number at $.x"),
            ({"x": [1, math.inf]}, "non-finite number at $.x[1]"),
            ({"x": (math.inf,)}, "non-finite number at $.x[0]"),
            ({"x": {1: "int key"}}, "non-string key at $.x"),
        ],
    )
    def test_lossy_payloads_are_rejected_with_their_path(self, payload: object, where: str) -> None:
        """NaN, infinities and non-string keys would not survive a replay: rejected, naming where."""
        with pytest.raises(InvalidEventError, match=re.escape(f"not lossless JSON: {where}")):
            encode_data(payload)

    def test_unencodable_values_are_rejected(self) -> None:
        """A value JSON cannot express at all is an ``INVALID_EVENT`` error, not a crash."""
        with pytest.raises(InvalidEventError) as caught:
            encode_data({"x": object()})
        assert caught.value.code == "INVALID_EVENT"

    def test_structs_and_raw_skip_the_walk(self) -> None:
        """Typed payloads are encoded directly; raw bytes are kept as they are."""
        raw = msgspec.Raw(b'{"keep":"as is"}')
        assert encode_data(raw) is raw
        assert msgspec.json.decode(encode_data(StepMark(turn=1, step=2))) == {"turn": 1, "step": 2}


class TestEnvelope:
    def test_an_event_line_round_trips_with_its_cause(self) -> None:
        """seq, time, type, raw data and cause survive one JSONL line; data decodes lazily."""
        event = Event(3, 17, "step/start", encode_data({"turn": 1, "step": 1}), Cause(agent_id="a", call_id="c"))
        again = decode_event(encode_event(event))
        assert again == event and again.decode(StepMark) == StepMark(turn=1, step=1)
        assert again.value() == {"turn": 1, "step": 1}

    def test_a_batch_is_its_events_lines(self) -> None:
        """encode_event_lines is each event's line plus a newline, in order; nothing for no events."""
        events = [Event(seq, seq * 10, "x/y", encode_data({"n": seq})) for seq in (1, 2, 3)]
        data = encode_event_lines(events)
        assert data == b"".join(encode_event(event) + b"\n" for event in events)
        assert [decode_event(line) for line in data.splitlines()] == events
        assert encode_event_lines([]) == b""
