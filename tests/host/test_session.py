"""Session: synchronous append with a veto window, and a group-committed flush."""

from __future__ import annotations

import math

import msgspec
import pytest
from _store_kit import Clock, Recorder, header, memory_log
from structlog.testing import capture_logs

from host_spec.errors import InvalidEventError, InvariantError, ReentrantAppendError, SessionNotLiveError
from host_spec.events import Cause, Event, encode_data
from host_spec.host.store.context import cause_scope, current_cause
from host_spec.host.store.session import NullObserver, Session, time_ms


def seeded(n: int, **fields: object) -> list[Event]:
    return [Event(i, 5, "seed/x", encode_data({"i": i})) for i in range(1, n + 1)]


class TestAppend:
    def test_append_assigns_contiguous_seqs_and_clock_time(self) -> None:
        """Each append gets seq = last + 1 and the session clock's time, and is visible at once."""
        session = Session(header(), clock=Clock())
        first = session.append("a/b", {"x": 1})
        second = session.append("a/c", [1, 2])
        assert (first.seq, first.time, second.seq, second.time) == (1, 1001, 2, 1002)
        assert list(session.events) == [first, second]
        assert session.last_seq == 2 and session.durable_seq == 0
        assert first.value() == {"x": 1}

    def test_data_is_snapshotted_at_append(self) -> None:
        """Mutating the payload after append does not change the committed event."""
        session = Session(header())
        payload = {"items": [1]}
        event = session.append("a/b", payload)
        payload["items"].append(2)
        assert event.value() == {"items": [1]}

    def test_default_time_is_epoch_milliseconds(self) -> None:
        """Without a clock the session stamps wall-clock epoch milliseconds."""
        before = time_ms()
        event = Session(header()).append("a/b", {})
        assert before <= event.time <= time_ms()

    def test_cause_comes_from_the_context_unless_given(self) -> None:
        """cause_scope sets the default cause; an explicit cause wins; leaving the scope restores it."""
        session = Session(header())
        outer, inner = Cause(agent_id="lead"), Cause(agent_id="lead", call_id="c1", tool="t")
        with cause_scope(outer):
            with cause_scope(inner):
                in_call = session.append("a/b", {})
            after_call = session.append("a/b", {})
            explicit = session.append("a/b", {}, cause=Cause(agent_id="other"))
        assert (in_call.cause, after_call.cause, explicit.cause) == (inner, outer, Cause(agent_id="other"))
        assert session.append("a/b", {}).cause is None and current_cause.get() is None

    def test_cause_scope_restores_after_an_error(self) -> None:
        """A raising block still leaves the outer cause in place."""
        with pytest.raises(RuntimeError), cause_scope(Cause(agent_id="x")):
            raise RuntimeError("boom")
        assert current_cause.get() is None

    @pytest.mark.parametrize("data", [{"n": math.nan}, {"n": [math.inf]}, {1: "non-string key"}, {"x": object()}])
    async def test_lossy_data_is_rejected_and_nothing_is_written(self, data: object) -> None:
        """NaN, infinities, non-string keys and unencodable objects raise; no seq, no observer, no write."""
        observer, backend = Recorder(), memory_log()
        session = Session(header(), backend=backend, observer=observer)
        with pytest.raises(InvalidEventError):
            session.append("a/b", data)
        await session.flush()
        assert (session.last_seq, observer.calls, backend.batches) == (0, [], [])

    @pytest.mark.parametrize("kind", ["", None, 3])
    def test_malformed_type_is_rejected(self, kind: object) -> None:
        """The event type must be a non-empty string."""
        session = Session(header())
        with pytest.raises(InvalidEventError):
            session.append(kind, {})  # type: ignore[arg-type]
        assert session.last_seq == 0

    async def test_veto_leaves_no_trace(self) -> None:
        """A raising pre_append: event not visible, seq reused, committed never runs, nothing written."""
        observer = Recorder(veto=lambda event: event.type == "bad/x")
        backend = memory_log()
        session = Session(header(), backend=backend, observer=observer)
        with pytest.raises(InvariantError):
            session.append("bad/x", {})
        ok = session.append("good/x", {})
        await session.flush()
        assert ok.seq == 1 and list(session.events) == [ok]
        assert observer.calls == [("pre", 1), ("pre", 1), ("committed", 1), ("flushed", 1)]
        assert backend.batches == [[1]]

    def test_reentrant_append_from_committed_raises(self) -> None:
        """Appending to the same session from its committed callback raises; the outer append stands."""
        errors: list[Exception] = []

        def reenter(session: Session, event: Event) -> None:
            try:
                session.append("again/x", {})
            except ReentrantAppendError as exc:
                errors.append(exc)

        session = Session(header(), observer=Recorder(on_commit=reenter))
        session.append("a/b", {})
        assert len(errors) == 1 and errors[0].code == "SESSION_REENTRANT_APPEND"
        assert [e.type for e in session.events] == ["a/b"]
        session.append("a/c", {})  # the guard is released afterwards
        assert session.last_seq == 2

    def test_reentrant_append_from_pre_append_raises(self) -> None:
        """An append from inside the veto window is refused and vetoes the outer append."""

        class Nested(NullObserver):
            def pre_append(self, session: Session, event: Event) -> None:
                session.append("nested/x", {})

        session = Session(header(), observer=Nested())
        with pytest.raises(ReentrantAppendError):
            session.append("a/b", {})
        assert session.last_seq == 0

    def test_appending_to_another_session_from_an_observer_is_fine(self) -> None:
        """Re-entrancy is per session: an observer may append elsewhere."""
        other = Session(header("other"))
        session = Session(header(), observer=Recorder(on_commit=lambda s, e: other.append("mirror/x", {"seq": e.seq})))
        session.append("a/b", {})
        assert [e.value() for e in other.events] == [{"seq": 1}]

    def test_a_failing_committed_observer_is_contained(self) -> None:
        """The event stays committed and the failure is logged, not raised to the appender."""

        def boom(session: Session, event: Event) -> None:
            raise RuntimeError("observer bug")

        session = Session(header(), observer=Recorder(on_commit=boom))
        with capture_logs() as logs:
            event = session.append("a/b", {})
        assert session.events[-1] is event
        assert [entry["event"] for entry in logs] == ["session.observer_failed"]

    def test_append_after_close_raises(self) -> None:
        """A closed session refuses appends."""
        session = Session(header())
        session.close()
        session.close()  # idempotent
        with pytest.raises(SessionNotLiveError):
            session.append("a/b", {})
        assert not session.live


class TestEventsView:
    def test_view_is_read_only_and_live(self) -> None:
        """events is a view: it follows appends, cannot be mutated, and slices are tuples."""
        session = Session(header())
        view = session.events
        session.append("a/b", {})
        session.append("a/c", {})
        assert len(view) == 2 and view[-1].type == "a/c"
        assert isinstance(view[0:1], tuple) and [e.seq for e in view[::-1]] == [2, 1]
        with pytest.raises(TypeError):
            view[0] = view[1]  # type: ignore[index]
        assert not hasattr(view, "append")
        assert view == list(view) and view == tuple(view) and view != [] and view != "x"
        assert "2 from 0" in repr(view)

    def test_own_events_skip_the_inherited_prefix(self) -> None:
        """own_events() starts after header.seed_length and supports indexing like a sequence."""
        session = Session(header(seed_length=2), events=seeded(2))
        mine = session.append("a/b", {})
        own = session.own_events()
        assert list(own) == [mine] and own[0] is mine and own[-1] is mine and own[:] == (mine,)
        with pytest.raises(IndexError):
            own[1]
        with pytest.raises(IndexError):
            own[-2]
        assert len(session.events) == 3 and session.own_events() == [mine]

    def test_seed_seqs_must_be_contiguous(self) -> None:
        """A seed whose seqs are not 1..n is refused; durable_seq must lie within it."""
        with pytest.raises(InvalidEventError):
            Session(header(), events=[Event(2, 0, "a/b", msgspec.Raw(b"{}"))])
        with pytest.raises(ValueError):
            Session(header(), events=seeded(1), durable_seq=2)
        assert Session(header(), events=seeded(3), durable_seq=3).durable_seq == 3
