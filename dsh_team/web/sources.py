"""Where a panel's Lead log comes from: a live run or a data directory (a followed store: :mod:`.followed`).

Both kinds fold the same events with the same fold; they differ only in what
else they can say. A live run knows which agents are attached (live status),
the effective Team mode, and can steer; a stored run is read-only and its
statuses are the offline ones of ``dsh team show``.

Both show the members' audited file writes: a stored run reads them from the
members' own logs, as ``dsh team show`` does; a live run notes each one as it is
committed (a teammate released while idle has no loaded log to read them from
later), so it lists the writes made while the panel was loaded.

A live panel follows the run's root session: the first root announced to the
host (``dsh run`` and ``dsh resume`` each drive exactly one). It folds only up to
the Lead log's durable position, so everything it shows -- and every SSE id it
hands out -- can be read back from the log after a crash.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal, Protocol

from host_spec.cli import SessionReader, StoredLog
from host_spec.events import Event
from host_spec.protocols import Agent, Host, Session
from host_spec.worktrees import Worktrees

from dsh_team.core.state import TeamState
from dsh_team.views.usage import MemberUsage, added, fold_usage, member_usage
from dsh_team.views.writes import ShowWrite, collect_writes, write_row

if TYPE_CHECKING:
    from dsh_team.api import TeamServiceAPI

__all__ = ["LogSource", "LiveRun", "StoredRun"]


class LogSource(Protocol):
    """What a panel reads."""

    @property
    def team_id(self) -> str | None:
        """The Lead session id (``None`` until a live run's root exists)."""
        ...

    @property
    def events(self) -> Sequence[Event]:
        """The Lead log's events (``events[i].seq == i + 1``)."""
        ...

    @property
    def durable(self) -> int:
        """How far the panel may fold: the last durable seq."""
        ...

    @property
    def damage(self) -> tuple[str, int] | None:
        """``(message, seq)`` of a damaged stored log, else ``None``."""
        ...

    def status(self, member_id: str) -> Literal["running", "idle"] | None:
        """Live status of an attached agent; ``None`` when none is attached (or the run is stored)."""
        ...

    @property
    def live(self) -> bool:
        """Whether statuses are live and the Team can be steered."""
        ...

    @property
    def following(self) -> bool:
        """Whether the log is followed from a shared store as another process appends to it."""
        ...

    def enabled(self) -> bool | None:
        """Team mode as the live service sees it; ``None`` for a stored run (the log decides)."""
        ...

    def writes(self, state: TeamState, until: int | None) -> tuple[ShowWrite, ...]:
        """The members' audited writes up to time ``until`` (ms; ``None``: all)."""
        ...

    def usage(self, state: TeamState, until: int | None) -> Mapping[str, MemberUsage]:
        """Token usage by member id, from their own logs, up to time ``until`` (missing: unknown)."""
        ...

    @property
    def worktrees(self) -> Worktrees | None:
        """The host's git, for worktree members' commits ahead (``None``: the panel shows the log's facts only)."""
        ...


class StoredRun:
    """A finished or crashed run read from its logs (read-only).

    Args:
        stored: The Lead log as the store's reader returned it (``salvage=True``).
        reader: The store, to read the members' own logs for their audited writes
            (``None``: no writes are shown).
        worktrees: The host's git (``dsh team serve`` passes the CLI's), for commits ahead.
    """

    live = False
    following = False

    def __init__(
        self, stored: StoredLog, reader: SessionReader | None = None, worktrees: Worktrees | None = None
    ) -> None:
        self._stored = stored
        self._reader = reader
        self.worktrees = worktrees

    @property
    def team_id(self) -> str:
        return self._stored.header.id

    @property
    def events(self) -> Sequence[Event]:
        return self._stored.events

    @property
    def durable(self) -> int:
        return len(self._stored.events)

    @property
    def damage(self) -> tuple[str, int] | None:
        damage = self._stored.damage
        return None if damage is None else (damage.message, len(self._stored.events) + 1)

    def status(self, member_id: str) -> None:
        return None

    def enabled(self) -> None:
        return None

    def writes(self, state: TeamState, until: int | None) -> tuple[ShowWrite, ...]:
        return () if self._reader is None else collect_writes(self._reader, state, until=until)

    def usage(self, state: TeamState, until: int | None) -> Mapping[str, MemberUsage]:
        if self._reader is None:
            return {}
        return member_usage(self._reader, [state.team_id, *state.members.members], until=until)


class LiveRun:
    """The root session of a live host and its Team service.

    Args:
        host: The host the panel's plugin is loaded in.
        service: Finds the Team service (``None`` while it is not loaded); looked up on
            every use, so a reload of ``dsh-team`` is followed.
    """

    live = True
    following = False
    damage = None

    def __init__(self, host: Host, service: Callable[[], TeamServiceAPI | None]) -> None:
        self._host = host
        self._service = service
        self._session: Session | None = None
        self._usage: dict[str, tuple[int, MemberUsage]] = {}
        self._writes: list[ShowWrite] = []

    @property
    def worktrees(self) -> Worktrees | None:
        return self._host.find_service(Worktrees)

    def adopt(self, session: Session) -> bool:
        """Follow ``session`` if it is the first root announced; returns whether it is the Lead."""
        if self._session is None and session.header.parent_session is None:
            self._session = session
        return self._session is session

    @property
    def team_id(self) -> str | None:
        return None if self._session is None else self._session.id

    @property
    def events(self) -> Sequence[Event]:
        return () if self._session is None else self._session.events

    @property
    def durable(self) -> int:
        return 0 if self._session is None else self._session.durable_seq

    def status(self, member_id: str) -> Literal["running", "idle"] | None:
        agent = self._host.agents.get(member_id)
        return None if agent is None or agent.disposed else agent.status

    def enabled(self) -> bool | None:
        service, lead = self.service, self.agent(self.team_id) if self.team_id is not None else None
        return None if service is None or lead is None else service.is_enabled(lead)

    def committed(self, session: Session, event: Event) -> None:
        """Note a member's file write as it is committed (O(1) per event).

        Only appends are announced, so a fork's inherited prefix (someone else's work)
        never arrives here; writes made before the panel loaded are not seen.
        """
        row = write_row(event, session.id, session.id)
        if row is not None:
            self._writes.append(row)

    def writes(self, state: TeamState, until: int | None) -> tuple[ShowWrite, ...]:
        """The Team's writes noted while the panel was loaded (``until``: up to that time)."""
        team = {state.team_id, *state.members.members}
        return tuple(row for row in self._writes
                     if row.member_id in team and (until is None or row.time <= until))

    def usage(self, state: TeamState, until: int | None) -> Mapping[str, MemberUsage]:
        """Usage of the members whose session is loaded (a released one is unknown until it runs again).

        Folded incrementally per session (only events after the last look), except for a
        past position, which is rare and read on request.
        """
        found: dict[str, MemberUsage] = {}
        for member_id in [state.team_id, *state.members.members]:
            session = self._host.sessions.get(member_id)
            if session is None:
                continue
            own = session.own_events()
            if until is not None:
                found[member_id] = fold_usage([e for e in own if e.time <= until])
                continue
            scanned, total = self._usage.get(member_id, (0, MemberUsage()))
            total = added(total, fold_usage(own[scanned:]))
            self._usage[member_id] = (len(own), total)
            found[member_id] = total
        return found

    def agent(self, member_id: str) -> Agent | None:
        """The live agent of a member (the credential steering uses)."""
        return self._host.agents.get(member_id)

    @property
    def service(self) -> TeamServiceAPI | None:
        """The Team service, while its plugin is loaded."""
        return self._service()
