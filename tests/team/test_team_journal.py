"""Journal and Activity details on a real in-memory session (no host needed)."""

from __future__ import annotations

import asyncio
from typing import Any

from dsh_team.log.waits import Activity, WaitResult
from dsh_team.log.journal import Append, Journal
from dsh_team.log.journals import Journals
from host_spec.events import SessionHeader
from host_spec.host.store.session import Session
from host_spec.records import AbortSignal

from kit_waits import until
from team_builders import task


def session(session_id: str = "lead") -> Session:
    return Session(SessionHeader(id=session_id, created_at=0))


class TestJournal:
    async def test_folds_each_event_once_and_announces_after_flush(self) -> None:
        """Appends are folded lazily; the durable position moves only after the flush."""
        lead = session()
        journal = Journal(lead)
        assert repr(journal) == "<Journal lead folded=0 position=0>"
        lead.append("team/task", task("task-1"))
        assert journal.state.tasks.tasks["task-1"].revision == 1
        assert journal.position == 0
        journal.flushed(0)
        assert journal.position == 0
        await journal.flush("x")
        assert journal.position == 1
        result = await journal.transact(lambda state: None, lambda state: len(state.tasks.tasks), what="noop")
        assert result == 1 and lead.last_seq == 1

    def test_a_seeded_log_starts_at_its_durable_position(self) -> None:
        """A journal over an already durable log reports its last Team change as position."""
        lead = session()
        lead.append("team/task", task("task-1"))
        lead.append("turn/start", {"turn": 1})
        assert Journal(lead).position == 0  # not durable yet
        durable = Session(lead.header, events=list(lead.events), durable_seq=2)
        assert Journal(durable).position == 1

    def test_a_durable_change_is_announced_while_a_later_one_is_pending(self) -> None:
        """A flush covering only the first of two changes announces the first (its waiters wake now)."""
        lead = session()
        announced: list[int] = []
        journal = Journal(lead, on_durable=lambda j: announced.append(j.position))
        lead.append("team/task", task("task-1"))
        lead.append("turn/start", {"turn": 1})
        lead.append("team/task", task("task-2"))  # appended while the first flush ran
        journal.flushed(2)
        assert announced == [1] and journal.position == 1
        journal.flushed(2)  # nothing new is durable: no second announcement
        journal.flushed(3)
        assert announced == [1, 3] and journal.position == 3

    def test_a_fold_provider_is_adopted_for_one_new_team_event_only(self) -> None:
        """The provider's state is taken per append; a longer stretch is folded here, every change queued."""
        from dsh_team import replay

        lead = session()
        provided: list[Any] = []

        class Provider:
            def state(self, folded: Any) -> Any:
                provided.append(folded.last_seq)
                return replay(folded.events, folded.id)

        provider = Provider()
        announced: list[int] = []
        journal = Journal(lead, on_durable=lambda j: announced.append(j.position), folds=lambda: provider)
        assert provided == []  # an empty log needs no fold
        lead.append("team/task", task("task-1"))
        assert journal.state.tasks.tasks["task-1"].revision == 1 and provided == [1]
        lead.append("turn/start", {"turn": 1})
        assert journal.state.position == 1 and provided == [1]  # a non-Team event: nothing to adopt
        lead.append("team/task", task("task-2"))
        lead.append("team/task", task("task-3"))
        assert journal.state == replay(lead.events, "lead") and provided == [1]  # a stretch: folded here
        assert Journal(lead, folds=lambda: provider).state.position == 4 and provided == [1, 4]  # a first fold
        quiet = session("quiet")
        quiet.append("team/mode", {"version": 2, "team_id": "quiet", "enabled": True})
        assert Journal(quiet, folds=lambda: provider).position == 0  # adopted: a mode choice is no change
        journal.flushed(3)
        assert announced == [3]  # task-2's change was queued on its own, not only task-3's
        journal.flushed(4)
        assert announced == [3, 4]

    def test_an_observed_event_is_folded_without_reading_the_log_back(self) -> None:
        """observe(event) folds the newest Team event (other kinds before it skipped); else it catches up."""
        from dsh_team import replay

        lead = session()
        committed: list[Any] = []

        class Provider:
            def state(self, folded: Any) -> Any:
                committed.append(("state", folded.last_seq))
                return replay(folded.events, folded.id)

            def committed(self, folded: Any, event: Any) -> Any:
                committed.append(("committed", event.seq))
                return replay(folded.events, folded.id)

        provider: Provider | None = None
        announced: list[int] = []
        journal = Journal(lead, on_durable=lambda j: announced.append(j.position), folds=lambda: provider)
        first = lead.append("team/task", task("task-1"))
        assert journal.observe(first).tasks.tasks["task-1"].revision == 1  # folded here: no provider yet
        lead.append("turn/start", {"turn": 1})
        lead.append("turn/end", {"turn": 1})
        provider = Provider()
        second = lead.append("team/task", task("task-2"))
        assert journal.observe(second) == replay(lead.events, "lead")
        assert committed == [("committed", 4)]  # the skipped events were no Team events: adopted
        assert journal.observe(second) is journal.state and committed == [("committed", 4)]  # already folded
        third = lead.append("team/task", task("task-3"))
        fourth = lead.append("team/task", task("task-4"))
        assert journal.observe(third) == replay(lead.events, "lead")  # not the newest: a catch-up stretch
        assert journal.observe(fourth) is journal.state and committed == [("committed", 4)]
        lead.append("team/task", task("task-5"))
        sixth = lead.append("team/task", task("task-6"))
        assert journal.observe(sixth) == replay(lead.events, "lead")  # an unfolded Team event before it
        assert committed == [("committed", 4)]
        journal.flushed(8)
        assert announced == [8]
        assert journal.observe(lead.append("turn/start", {"turn": 2})).position == 8  # not a Team event

    def test_registry_identity(self) -> None:
        """A new session object for the same id gets a new journal; dropping a stale one is a no-op."""
        first, second = session(), session()
        journals = Journals()
        one = journals.get(first)
        assert journals.get(first) is one and len(journals) == 1
        two = journals.get(second)
        assert two is not one and list(journals) == [two]
        journals.drop(first)
        assert journals.find("lead") is two
        journals.drop(second)
        assert journals.find("lead") is None

    def test_append_record(self) -> None:
        """Append carries the event type and payload."""
        record = Append("team/mode", {"enabled": True})
        assert (record.type, record.payload) == ("team/mode", {"enabled": True})


class TestActivity:
    async def test_late_timer_and_abort_after_a_notify_are_ignored(self) -> None:
        """Whichever of notify, timer and abort comes first decides; the others are no-ops."""
        timers: list[Any] = []
        activity = Activity(timer=lambda delay, fn: (timers.append(fn), lambda: None)[1])
        assert not activity.closed
        signal = AbortSignal()
        waiting = asyncio.ensure_future(activity.wait("t", 10_000, lambda: 7, signal=signal))
        await until(lambda: activity.waiting("t") == 1, what="the wait to be registered")
        activity.notify("t")
        timers[0]()
        signal.abort("late")
        assert await waiting == WaitResult(timed_out=False, position=7)
        expiring = asyncio.ensure_future(activity.wait("t", 10_000, lambda: 7))
        await until(lambda: activity.waiting("t") == 1, what="the second wait to be registered")
        timers[1]()
        activity.notify("t")
        assert (await expiring).timed_out is True
        activity.close()
        assert activity.closed


class TestDescriptorScan:
    def test_scans_incrementally_and_forgets_only_its_own_session(self) -> None:
        """A later descriptor is found; forgetting a stale session object keeps the live entry."""
        from dsh_team.log.membership import DescriptorScan

        scan = DescriptorScan()
        live, stale = session("child"), session("child")
        assert scan.has_descriptor(live) is False
        scan.forget(stale)
        live.append("subagent/descriptor", {"version": 2, "mode": "continuable", "provider": "spawn"})
        assert scan.has_descriptor(live) is True
        scan.forget(live)
        scan.forget(live)
        assert scan.has_descriptor(live) is True
