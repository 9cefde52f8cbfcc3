"""The Agent Teams stream invariant: refuse any Team event the Team fold would reject.

The Team service validates every mutation before it appends, but a bug, a
hand-written event or a future writer could still put a record into a Lead log
that replay would reject, and a rejected record poisons the whole Team (failure
is terminal). This check runs inside ``session.append`` before the event becomes
visible and vetoes such an event, so the log never holds it.

It must cost O(1) in the log length: it keeps its own folded
:class:`~dsh_team.core.state.TeamState` per session (seeded once from the session's
events) and, per candidate, runs only :func:`dsh_team.core.fold.evolve` on that state.

The candidate state is *staged*, because another plugin may still veto the append
after this check passed and a vetoed event must not advance the fold. It is
settled lazily, at the next read of that session's fold, instead of in a
``dsh_session_event`` observer (which would cost a hook call on every append of
every session): the staged event was committed exactly when the log now holds it
at its seq. Seqs are dense and a vetoed append writes nothing, so any other event
found there (or none) means it was vetoed. Every Team event passes this check
before it can be committed, so no committed Team event is ever missed.

That makes this fold the committed Team fold of every live session: the plugin
provides it as :class:`~dsh_team.log.lead_fold.TeamFolds`, and the Team journal adopts it
instead of folding each committed event again (one fold owner per session). The
journal, which observes every committed Team event, names the event that just
committed (``committed``): the stage of that very object is adopted without
looking the event up in the log, so the per-append cost of the check is one fold
and two dictionary lookups.
A refused candidate's violation carries the fold's own rule name
(:class:`~dsh_team.core.fold_failure.FoldRule`).

The controls records (gate runs, plan approval: :mod:`dsh_team.controls`) are held
to their own fold the same way: a candidate the controls fold would fail is
refused (rule ``controls``). They are rare (a few per task), so their committed
fold is read from the log's tail on each check instead of staged.
The roster's side records (``team/role``, ``team/shutdown``) get the strict decode
their books apply (rule ``side-record``), so a book never meets a record it must skip.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import attrs

from dsh_team import (
    CONTROL_EVENT_TYPES,
    PERMISSION_EVENT_TYPES,
    SIDE_RECORD_TYPES,
    TEAM_EVENT_TYPES,
    LiveControls,
    LivePermissions,
    TeamState,
    evolve,
    fold_controls,
    fold_permissions,
    load_checked,
    replay,
    side_record_failure,
)
from host_spec import hookimpl
from host_spec.carry import CarriedFolds
from host_spec.records import Violation

if TYPE_CHECKING:
    from host_spec.events import Event
    from host_spec.protocols import Session
    from host_spec.storage import Checkpoints

    from dsh_team import TeamCheckpoint

__all__ = ["TeamStreamInvariant"]

#: The rule of a candidate refused because the stream had already failed before it.
_STREAM_FAILED: Final = "stream-already-failed"
#: The rule of a controls record the controls fold refuses.
_CONTROLS: Final = "controls"
#: The rule of a permission record the permissions fold refuses (a second answer, an unknown ask).
_PERMISSIONS: Final = "permissions"
#: The rule of a role or shutdown record its book could not read.
_SIDE: Final = "side-record"


class _Fold:
    """One session's committed fold plus the candidate staged by its last check."""

    __slots__ = ("session", "state", "staged", "checkpoint")

    def __init__(self, session: Session, state: TeamState, checkpoint: TeamCheckpoint | None = None) -> None:
        #: The exact session object folded: a resumed activation of the same id is another log.
        self.session = session
        self.state = state
        #: ``(event, candidate state)`` passed by the last check, not yet settled.
        self.staged: tuple[Event, TeamState] | None = None
        #: The checkpoint the fold started from, until the Team service takes it.
        self.checkpoint = checkpoint

    def settle(self, session: Session, staged: tuple[Event, TeamState]) -> TeamState:
        """The committed state, after adopting ``staged`` (this fold's stage) if its event was committed."""
        self.staged = None
        event = staged[0]
        seq = event.seq
        if seq <= session.last_seq:
            held = session.events[seq - 1]
            if held is event or held == event:  # identity: the host commits the object it checked
                self.state = staged[1]
        return self.state


@attrs.define(eq=False)
class TeamStreamInvariant:
    """Per-session incremental Team folds, a staged candidate per session, and the veto.

    Keyed by session id: a Team lives in its Lead's log and its id is that session's
    id, so each session folds as the Team it would lead (records of other Teams,
    such as a fork's inherited prefix, are ignored by the fold itself).

    One instance serves one host: the plugin registers it with that host's hooks
    (``created`` on ``dsh_session_created``, ``check`` on ``dsh_pre_append``,
    ``forget`` on ``dsh_session_disposed``).
    """

    #: Where the Team's checkpoints are kept (``None``: the store keeps none).
    checkpoints: Checkpoints | None = None
    _folds: dict[str, _Fold] = attrs.Factory(dict)
    #: Folds of sessions that left the live store: a woken member's log is not folded again.
    _carried: CarriedFolds[TeamState] = attrs.Factory(CarriedFolds)
    #: The committed controls fold of each session (gate runs, plan approval).
    _controls: LiveControls = attrs.Factory(LiveControls)
    #: The committed permissions fold of each session (asks and their answers).
    _permissions: LivePermissions = attrs.Factory(LivePermissions)

    def seed(self, session: Session) -> None:
        """Fold ``session``'s current events once (on resume, or plugin load).

        A resumed session whose log continues the fold its last activation left
        (:mod:`host_spec.carry`) folds only the events after it; so does one with
        a checkpoint its log confirms (:func:`dsh_team.load_checked`, the reader the
        Team service starts its other folds from too: :meth:`checkpoint`, so both
        judge from the same state and the checkpoint is read once).
        """
        events = session.events
        carried = self._carried.take(session.header, events)
        checkpoint = None
        if carried is None:
            checkpoint = load_checked(self.checkpoints, session.header, events)
            if checkpoint is None:
                state = replay(events, session.id)
            else:
                seq = checkpoint.seq
                state = replay(events[seq:], session.id, checkpoint.team)
                self._controls.restore(session, seq, checkpoint.controls)
                self._permissions.restore(session, seq, checkpoint.permissions)
        else:
            position, state = carried
            state = replay(events[position:], session.id, state)
        self._folds[session.id] = _Fold(session, state, checkpoint)

    @hookimpl(specname="dsh_session_created")
    def created(self, session: Session) -> None:
        """Seed a created or resumed session, unless a reader already had it seeded."""
        fold = self._folds.get(session.id)
        if fold is None or fold.session is not session:
            self.seed(session)

    @hookimpl(specname="dsh_session_disposed")
    def forget(self, session: Session) -> None:
        """Drop the fold of a session that left the live store (a stale object's disposal is a no-op)."""
        fold = self._folds.get(session.id)
        self._controls.forget(session)
        self._permissions.forget(session)
        if fold is not None and fold.session is session:
            del self._folds[session.id]
            staged = fold.staged
            state = fold.state if staged is None else fold.settle(session, staged)
            self._carried.keep(session.header, session.events, session.last_seq, state)

    def clear(self) -> None:
        """Drop every fold (plugin unload)."""
        self._folds.clear()
        self._carried = CarriedFolds()
        self._controls = LiveControls()
        self._permissions = LivePermissions()

    def sessions(self) -> Sequence[str]:
        """Ids of the sessions currently folded (for tests and diagnostics)."""
        return list(self._folds)

    def state(self, session: Session) -> TeamState:
        """The committed fold of ``session`` (seeding it on first use).

        This is the :class:`~dsh_team.log.lead_fold.TeamFolds` the plugin provides: the Team
        journal adopts it rather than folding every committed event a second time.
        """
        fold = self._folds.get(session.id)
        if fold is None or fold.session is not session:
            fold = self._seeded(session)
        staged = fold.staged
        return fold.state if staged is None else fold.settle(session, staged)

    def checkpoint(self, session: Session) -> TeamCheckpoint | None:
        """The checkpoint ``session``'s fold started from, handed over once (``TeamFolds``)."""
        fold = self._folds.get(session.id)
        if fold is None or fold.session is not session:
            fold = self._seeded(session)
        checkpoint, fold.checkpoint = fold.checkpoint, None
        return checkpoint

    def committed(self, session: Session, event: Event) -> TeamState:
        """The committed fold right after the host committed ``event`` (``TeamFolds``).

        The stage of exactly that event object is adopted at once; anything else
        (an equal copy, a session seeded meanwhile) settles as :meth:`state` does.
        """
        fold = self._folds.get(session.id)
        if fold is not None and fold.session is session:
            staged = fold.staged
            if staged is not None and staged[0] is event:
                fold.staged = None
                fold.state = state = staged[1]
                return state
        return self.state(session)

    def _seeded(self, session: Session) -> _Fold:
        """The fold of a session seen for the first time (or a new activation of its id)."""
        self.seed(session)
        return self._folds[session.id]

    @hookimpl(specname="dsh_pre_append")
    def check(self, session: Session, event: Event) -> Violation | None:
        """Veto ``event`` if the Team fold would reject it; otherwise stage its outcome.

        Non-Team events return at once. Nothing is committed here: the stage is
        settled by the next check or read of this session.
        """
        kind = event.type
        if kind not in TEAM_EVENT_TYPES:
            if kind in CONTROL_EVENT_TYPES:
                return self._control(session, event)
            if kind in PERMISSION_EVENT_TYPES:
                return self._permission(session, event)
            return None if kind not in SIDE_RECORD_TYPES else self._side(session, event)
        fold = self._folds.get(session.id)
        if fold is None or fold.session is not session:
            fold = self._seeded(session)
        staged = fold.staged
        state = fold.state if staged is None else fold.settle(session, staged)
        candidate = evolve(state, event)
        failure = candidate.failure
        if failure is not None:
            rule = _STREAM_FAILED if state.failure is not None else failure.rule
            return Violation(
                reason=f"session event {event.seq} violates the Agent Teams stream: {failure.message}",
                rule=rule,
            )
        fold.staged = (event, candidate)
        return None

    def _side(self, session: Session, event: Event) -> Violation | None:
        """Veto a role or shutdown record its book could not read."""
        failure = side_record_failure(session.id, event)
        if failure is None:
            return None
        return Violation(reason=f"session event {event.seq} violates the Agent Teams stream: {failure}", rule=_SIDE)

    def _permission(self, session: Session, event: Event) -> Violation | None:
        """Veto a permission record the permissions fold would fail (exactly one answer per ask)."""
        failure = fold_permissions(self._permissions.state(session), event).failure
        if failure is None:
            return None
        return Violation(
            reason=f"session event {event.seq} violates the Agent Teams permissions stream: {failure}",
            rule=_PERMISSIONS,
        )

    def _control(self, session: Session, event: Event) -> Violation | None:
        """Veto a controls record the controls fold would fail."""
        state = self._controls.state(session)
        failure = fold_controls(state, event).failure
        if failure is None:
            return None
        return Violation(
            reason=f"session event {event.seq} violates the Agent Teams controls stream: {failure}", rule=_CONTROLS
        )
