"""The Agent Teams stream invariant: refuse any Team event the Team fold would reject.

The Team service validates every mutation before it appends, but a bug, a
hand-written event or a future writer could still put a record into a Lead log
that replay would reject, and a rejected record poisons the whole Team (failure
is terminal). This check runs inside ``session.append`` before the event becomes
visible and vetoes such an event, so the log never holds it.

It must cost O(1) in the log length: it keeps its own folded
:class:`~dsh_team.state.TeamState` per session (seeded once from the session's
events) and, per candidate, runs only :func:`dsh_team.fold.evolve` on that state.
The candidate state is *staged* and becomes the committed state only when the
host reports the event committed: another plugin may still veto the append after
this check passed, and a vetoed event must not advance the fold.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import attrs

from dsh_team.events import TEAM_EVENT_TYPES
from dsh_team.fold import evolve, replay
from dsh_team.state import TeamState
from host_spec.records import Violation

if TYPE_CHECKING:
    from host_spec.events import Event
    from host_spec.protocols import Session

__all__ = ["TeamStreamInvariant", "rule_for"]

#: (message fragment, rule name): the first fragment found in a fold failure names the rule.
_RULES: Final[tuple[tuple[str, str], ...]] = (
    ("must begin provisioning", "member-must-begin-provisioning"),
    ("is reused by another member", "member-name-reused"),
    ("changed immutable identity fields", "member-identity-changed"),
    ("has an invalid", "member-invalid-transition"),
    ("must begin at revision 1", "task-must-begin-at-revision-1"),
    ("revision is not contiguous", "task-revision-not-contiguous"),
    ("cannot block itself", "task-dependency-cycle"),
    ("dependency cycle", "task-dependency-cycle"),
    ("repeats blocker", "task-duplicate-blocker"),
    ("is missing or deleted", "task-missing-blocker"),
    ("was queued twice", "message-queued-twice"),
    ("was delivered before queueing", "message-delivered-before-queued"),
    ("target changed", "message-target-changed"),
    ("was delivered twice", "message-delivered-twice"),
    ("unsupported Agent Teams event version", "unsupported-version"),
    ("payload is invalid", "invalid-payload"),
)
_STREAM_FAILED: Final = "stream-already-failed"
_GENERIC: Final = "agent-teams-stream"


def rule_for(failure: str) -> str:
    """A short stable rule name for a fold failure message (for tests and logs)."""
    for fragment, rule in _RULES:
        if fragment in failure:
            return rule
    return _GENERIC


@attrs.define(eq=False)
class TeamStreamInvariant:
    """Per-session incremental Team folds, a staged candidate per session, and the veto.

    Keyed by session id: a Team lives in its Lead's log and its id is that session's
    id, so each session folds as the Team it would lead (records of other Teams,
    such as a fork's inherited prefix, are ignored by the fold itself).
    """

    _states: dict[str, TeamState] = attrs.Factory(dict)
    _staged: dict[str, tuple[int, TeamState]] = attrs.Factory(dict)

    def seed(self, session: Session) -> None:
        """Fold ``session``'s current events once (on creation, resume, or plugin load)."""
        self._states[session.id] = replay(session.events, session.id)
        self._staged.pop(session.id, None)

    def forget(self, session: Session) -> None:
        """Drop the fold of a session that left the live store."""
        self._states.pop(session.id, None)
        self._staged.pop(session.id, None)

    def clear(self) -> None:
        """Drop every fold (plugin unload)."""
        self._states.clear()
        self._staged.clear()

    def sessions(self) -> Sequence[str]:
        """Ids of the sessions currently folded (for tests and diagnostics)."""
        return list(self._states)

    def state(self, session: Session) -> TeamState:
        """The committed fold of ``session``, seeding it on first use."""
        state = self._states.get(session.id)
        if state is None:
            self.seed(session)
            state = self._states[session.id]
        return state

    def check(self, session: Session, event: Event) -> Violation | None:
        """Veto ``event`` if the Team fold would reject it; otherwise stage its outcome.

        Non-Team events return at once. Nothing is committed here.
        """
        if event.type not in TEAM_EVENT_TYPES:
            return None
        session_id = session.id
        state = self._states.get(session_id)
        if state is None:
            state = self.state(session)
        candidate = evolve(state, event)
        failure = candidate.failure
        if failure is not None:
            rule = _STREAM_FAILED if state.failure is not None else rule_for(failure)
            return Violation(
                reason=f"session event {event.seq} violates the Agent Teams stream: {failure}",
                rule=rule,
            )
        # Always overwrite: a stale stage from a candidate vetoed elsewhere must not survive.
        self._staged[session_id] = (event.seq, candidate)
        return None

    def commit(self, session: Session, event: Event) -> None:
        """``event`` was committed: adopt the staged candidate (or fold it if none was staged)."""
        if event.type not in TEAM_EVENT_TYPES:
            return
        session_id = session.id
        staged = self._staged.pop(session_id, None)
        if staged is not None and staged[0] == event.seq:
            self._states[session_id] = staged[1]
            return
        state = self._states.get(session_id)
        if state is not None:
            self._states[session_id] = evolve(state, event)
