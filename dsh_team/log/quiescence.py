"""The quiescence watch: notices when a Team can no longer progress and records it once.

Nothing wakes the Lead for a member going idle. Instead, whenever something may
have made the Team quiet (a member's turn ended, a member parked in a wait, an
agent started or finished its recovery), the watch schedules one evaluation on the
host (``host.call_soon``, so the host counts it as pending work and a run does not
end before it). The evaluation takes the Lead's serialized section and appends a
``team/quiescent`` record when

* no member runs, except members parked in a wait (they only wait for others),
* the durable state is quiet and has changed since the last such record
  (:func:`dsh_team.core.quiescence.may_record`).

The record is a durable Team change: its flush wakes every wait of the Team, and a
waiting member learns ``reason: "quiescent"`` with the stalled work. Because the
fold refuses a second record without a change in between, a crash and resume can
neither duplicate the record nor lose it: an evaluation after the resume appends
it exactly when the log does not already end the quiet spell with one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import msgspec
import structlog

from host_spec.events import Cause

from dsh_team.core.quiescence import may_record, stalled_work
from dsh_team.core.records import TEAM_QUIESCENT, VERSION, QuiescentRecord
from dsh_team.log.journal import Append
from dsh_team.log.waits import WaitResult

if TYPE_CHECKING:
    from host_spec.protocols import Host

    from dsh_team.core.state import TeamState
    from dsh_team.log.journal import Journal
    from dsh_team.log.journals import Journals
    from dsh_team.log.lifecycle import Lifecycle

__all__ = ["QuiescenceWatch", "quiet_result"]

log = structlog.get_logger(__name__)

#: The cause of the Team's own record: no agent, no tool call (whoever's hook scheduled it did not act).
_NOBODY: Final = Cause()

#: The member ids parked in a wait of one Team.
Parked = Callable[[str], frozenset[str]]
#: Whether a member's session, asleep on disk, still has work the host will resume it for.
AsleepWork = Callable[[str], Awaitable[bool]]


class QuiescenceWatch:
    """Evaluates quiescence per Team, at most one evaluation scheduled per Team at a time.

    Args:
        host: The host (live agents, ``call_soon``).
        journals: The per-Lead journals.
        lifecycle: Admission and tracking (no evaluation after disposal).
        parked: The members of a Team currently parked in a wait.
        asleep_work: Whether a teammate asleep on disk still has work (a crash left its
            initial prompt unclaimed or a turn open): the host is about to resume it.
    """

    def __init__(
        self, host: Host, journals: Journals, lifecycle: Lifecycle, parked: Parked, asleep_work: AsleepWork
    ) -> None:
        self.host = host
        self.journals = journals
        self.lifecycle = lifecycle
        self.parked = parked
        self.asleep_work = asleep_work
        self._scheduled: set[str] = set()

    def running(self, state: TeamState, parked: frozenset[str]) -> bool:
        """Whether the Lead or an active teammate runs a turn other than a wait."""
        agents = self.host.agents
        ids = [state.team_id, *(member.id for member in state.members.listed() if member.phase == "active")]
        for member_id in ids:
            agent = agents.get(member_id)
            if agent is not None and agent.status == "running" and member_id not in parked:
                return True
        return False

    def settled(self, journal: Journal, also: str | None = None) -> bool:
        """Whether the Team is recorded quiet and nobody runs (``also`` counts as parked too).

        A wait that starts in such a Team returns at once: nothing can end it.
        """
        state = journal.state
        if not state.quiet:
            return False
        parked = self.parked(journal.team_id)
        return not self.running(state, parked | {also} if also is not None else parked)

    def poke(self, team_id: str) -> None:
        """Schedule one evaluation of ``team_id`` (coalesced with one already scheduled)."""
        if team_id in self._scheduled:
            return
        self._scheduled.add(team_id)
        self.host.call_soon(lambda: self._run(team_id))

    def _run(self, team_id: str) -> Any:
        self._scheduled.discard(team_id)
        journal = self.journals.find(team_id)
        if journal is None or self.lifecycle.disposed:
            return None
        return self.lifecycle.track(self.evaluate(journal))

    async def evaluate(self, journal: Journal) -> None:
        """Append the quiescence record if the Team is quiet now (decided inside the Lead's section).

        Failures (a vetoed append, a failed flush) are logged, never raised: the next
        poke evaluates again.
        """
        team_id = journal.team_id

        def quiet(state: TeamState) -> bool:
            if self.lifecycle.disposed:  # disposal cancels every turn: that quiet is no news
                return False
            parked = self.parked(team_id)
            return may_record(state, waiting=bool(parked)) and not self.running(state, parked)

        def decide(state: TeamState) -> Append | None:
            if not quiet(state):
                return None
            stalled = stalled_work(state)
            record = QuiescentRecord(version=VERSION, team_id=team_id, stalled=stalled)
            return Append(TEAM_QUIESCENT, record, cause=_NOBODY)  # no member caused it: the Team did

        state = journal.state
        if not quiet(state):  # the common case: decided without the section or a flush
            return
        for member in state.members.listed():
            if member.phase == "active" and await self.asleep_work(member.id):
                return  # the host resumes it; its turn's end is the next evaluation
        try:
            await journal.transact(decide, what="the Team quiescence record")
        except Exception as exc:
            log.warning("team.quiescence_failed", team=team_id, error=repr(exc))


def quiet_result(journal: Journal, result: WaitResult) -> WaitResult:
    """``result`` with ``reason: "quiescent"`` and the stalled work when the change it saw is a quiescence record."""
    quiescence = journal.state.quiescence
    if result.timed_out or quiescence is None or quiescence.seq != result.position:
        return result
    return msgspec.structs.replace(result, reason="quiescent", stalled=quiescence.stalled)
