"""The registry of journals: one per live session that may lead a Team.

A session gets its journal (one full fold) on first use and loses it when it
leaves the live store. The fold of a session that left is kept
(:class:`host_spec.carry.CarriedFolds`), so a later activation of the same log
(a woken member continuing its own session) folds only the events after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from host_spec.carry import CarriedFolds

from dsh_team.core.state import TeamState
from dsh_team.log.journal import ChangeListener, Journal

if TYPE_CHECKING:
    from host_spec.protocols import Session

    from dsh_team.log.lead_fold import FoldSource

__all__ = ["Journals"]


class Journals:
    """The journals of every live session that may lead a Team, by session id."""

    def __init__(
        self,
        *,
        on_change: ChangeListener | None = None,
        on_durable: ChangeListener | None = None,
        folds: FoldSource | None = None,
    ) -> None:
        self._by_id: dict[str, Journal] = {}
        self._on_change = on_change
        self._on_durable = on_durable
        self._folds = folds
        #: Folds of sessions that left the live store: a woken member continues its own.
        self._carried: CarriedFolds[TeamState] = CarriedFolds()

    def __iter__(self) -> Iterator[Journal]:
        return iter(list(self._by_id.values()))

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, session: Session) -> Journal:
        """The journal of ``session``, created (one full fold) on first use.

        A new session object for the same id (a resumed activation) gets a new journal.
        """
        journal = self._by_id.get(session.id)
        if journal is None or journal.session is not session:
            journal = Journal(
                session,
                on_change=self._on_change,
                on_durable=self._on_durable,
                folds=self._folds,
                carried=self._carried.take(session.header, session.events),
            )
            self._by_id[session.id] = journal
        return journal

    def seed(self, session: Session, position: int, state: TeamState) -> Journal:
        """The journal of ``session`` started from ``state``, the fold of its first ``position`` events.

        For a checked checkpoint (:mod:`dsh_team.checkpoint`); a fold carried in this
        process from a later position wins (it has less to fold).
        """
        carried = self._carried.take(session.header, session.events)
        if carried is None or carried[0] < position:
            carried = (position, state)
        journal = Journal(
            session, on_change=self._on_change, on_durable=self._on_durable, folds=self._folds, carried=carried
        )
        self._by_id[session.id] = journal
        return journal

    def find(self, session_id: str) -> Journal | None:
        """The existing journal of a session id, if any (never creates one)."""
        return self._by_id.get(session_id)

    def drop(self, session: Session) -> None:
        """Forget ``session``'s journal (the session left the live store)."""
        journal = self._by_id.get(session.id)
        if journal is not None and journal.session is session:
            del self._by_id[session.id]
            state = journal.state
            self._carried.keep(session.header, session.events, session.last_seq, state)
