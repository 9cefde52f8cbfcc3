"""A panel source for a Team that another process runs: a shared store, followed live.

``dsh team serve --store URL`` may show a Team whose run is live in another
process, perhaps on another machine. Nothing of that run is in this process but
its logs, so this source starts from the Lead log read once and then takes only
what is appended: the store's follower (:class:`host_spec.cli.SessionFollower`)
hands on each new batch of the Lead's and the members' logs exactly once and in
order, from a cursor per log. The panel's fold (:class:`~dsh_team.web.document.PanelFold`)
then advances over the new events alone and the feed pushes the change to every
open page, as for a live in-process run: a change costs the new events, never a
re-read of a log.

Members' logs are followed for what the panel shows of them: their audited file
writes and their token usage, both kept as running totals. A member spawned after
the panel started is followed from its first event once a document names it.

Statuses stay the offline ones of ``dsh team show`` (no agent of that run is
attached here), and nothing can be changed from this panel: only the process
holding the Team appends to its Lead log, so a change is refused with
``TEAM_RUN_LIVE`` naming that holder (``WEB_READ_ONLY`` once no process holds it).
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Callable, Mapping, Sequence

from host_spec.cli import FollowingReader, StoredLog
from host_spec.errors import SessionError
from host_spec.events import Event, SessionHeader

from dsh_team.core.fold import replay
from dsh_team.core.state import TeamState
from dsh_team.core.task_view import LEAD_NAME
from dsh_team.views.usage import MemberUsage, added, fold_usage, member_usage
from dsh_team.views.writes import ShowWrite, write_row

__all__ = ["FollowedRun"]


class FollowedRun:
    """The Lead log of a stored Team, kept current from the store while the panel runs.

    Args:
        stored: The Lead log as read once at start (``events[i].seq == i + 1``).
        reader: The shared store's reader (it can follow and name the holder).
    """

    live = False
    following = True
    damage = None
    worktrees = None  #: another machine's checkout: the panel shows the log's facts only

    def __init__(self, stored: StoredLog, reader: FollowingReader) -> None:
        self._reader = reader
        self._team_id = stored.header.id
        self._events: list[Event] = list(stored.events)
        self._names: dict[str, str] = {}  # followed session id -> Team name
        self._usage: dict[str, MemberUsage] = {}
        self._writes: list[ShowWrite] = []
        self.follower = reader.follower()
        self.on_change: Callable[[], None] = lambda: None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._names[self._team_id] = LEAD_NAME
        self._own(stored.header, self._events)
        self.follower.watch(self._team_id, len(self._events))
        for member_id, name in _members(replay(self._events, self._team_id)):
            self._names[member_id] = name
            try:
                member = reader.read(member_id, salvage=True)
            except SessionError:  # not created yet (or unreadable): followed from its first event
                self.follower.watch(member_id, 0)
                continue
            self._own(member.header, member.events)
            self.follower.watch(member_id, len(member.events))

    def start(self, on_change: Callable[[], None]) -> None:
        """Follow the store from the running loop; ``on_change`` runs on it after each new batch."""
        self.on_change = on_change
        self._loop = asyncio.get_running_loop()
        self.follower.start(self._deliver)

    def close(self) -> None:
        """Stop following: the follower thread has ended when it returns."""
        self.follower.close()

    def _deliver(self, header: SessionHeader, events: Sequence[Event]) -> None:
        """The follower thread's hand-over: the batch is taken on the loop (closed before the loop is)."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self.arrive, header, events)

    def arrive(self, header: SessionHeader, events: Sequence[Event]) -> None:
        """Take a followed log's new events (each exactly once, in seq order) and tell the panel."""
        if header.id == self._team_id:
            events = [event for event in events if event.seq > len(self._events)]
            self._events.extend(events)
        self._own(header, events)
        self.on_change()

    def _own(self, header: SessionHeader, events: Sequence[Event]) -> None:
        """Add the writes and usage of ``events``, skipping a fork's inherited prefix (someone else's work)."""
        session_id = header.id
        own = [event for event in events if event.seq > header.seed_length]
        self._usage[session_id] = added(self._usage.get(session_id, MemberUsage()), fold_usage(own))
        name = self._names.get(session_id, session_id)
        for event in own:
            row = write_row(event, session_id, name)
            if row is not None:
                bisect.insort(self._writes, row, key=lambda kept: kept.time)

    def _follow_members(self, state: TeamState) -> None:
        """Follow every member the fold names that is not followed yet (spawned after the start)."""
        for member_id, name in _members(state):
            if member_id not in self._names:
                self._names[member_id] = name
                self.follower.watch(member_id, 0)

    # ------------------------------------------------------------ LogSource

    @property
    def team_id(self) -> str:
        return self._team_id

    @property
    def events(self) -> Sequence[Event]:
        return self._events

    @property
    def durable(self) -> int:
        return len(self._events)

    def status(self, member_id: str) -> None:
        return None

    def enabled(self) -> None:
        return None

    def writes(self, state: TeamState, until: int | None) -> tuple[ShowWrite, ...]:
        """The Team's audited writes as followed so far (``until``: up to that time)."""
        self._follow_members(state)
        team = {state.team_id, *state.members.members}
        return tuple(row for row in self._writes if row.member_id in team and (until is None or row.time <= until))

    def usage(self, state: TeamState, until: int | None) -> Mapping[str, MemberUsage]:
        """Usage by member as followed so far; a past position is read from the store on request (rare)."""
        self._follow_members(state)
        ids = [state.team_id, *state.members.members]
        if until is not None:
            return member_usage(self._reader, ids, until=until)
        return {member_id: self._usage[member_id] for member_id in ids if member_id in self._usage}

    def holder(self) -> str | None:
        """The process running this Team now (``None``: nobody holds it)."""
        return self._reader.holder(self._team_id)


def _members(state: TeamState) -> list[tuple[str, str]]:
    return [(member.id, member.name) for member in state.members.listed()]
