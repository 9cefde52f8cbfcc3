"""The folded Team state: immutable, persistent collections shared between versions.

A Team's state is rebuilt from its Lead log by :func:`dsh_team.core.fold.evolve`, one
event at a time. Each collection is an :class:`immutables.Map` (a HAMT), so an
event that touches one task costs O(log n) and every older state stays valid
(copy-on-write: the service, the projection and the invariant plugin can hold
different versions at once without copying).

Order without O(n) copies: maps are unordered, so every record carries its
creation (or queue) index (a parallel ``order`` map for members and tasks, the
value of the ``pending`` map for mail); listings sort a small subset (the
non-deleted tasks, the roster, one target's pending mail) and memoise the result
on the immutable collection object itself where it is reused.

The roster and the board live here beside the state that holds them; the
mailbox is :mod:`dsh_team.core.mailbox`, the shared empty map and memo are
:mod:`dsh_team.core.persistent`, and a stream's failure is
:mod:`dsh_team.core.fold_failure`.

These are msgspec Structs rather than attrs classes because the fold builds
several of them per event and P3 (cold replay) is measured against a plain msgspec
decode: a Struct is about ten times cheaper to construct.
"""

from __future__ import annotations

from typing import Any

import immutables
import msgspec

from dsh_team.core.changes import Changes
from dsh_team.core.fold_failure import FoldFailure
from dsh_team.core.mailbox import Mailbox
from dsh_team.core.persistent import EMPTY, Memo
from dsh_team.core.records import TeamStalled
from dsh_team.core.snapshots import TeamMemberSnapshot, TeamTaskSnapshot

__all__ = ["Roster", "Board", "Quiescence", "TeamState", "initial_state", "mode_enabled"]


def _sorted_values(values: immutables.Map[str, Any], order: immutables.Map[str, int], ids: Any) -> tuple[Any, ...]:
    return tuple(values[key] for key in sorted(ids, key=order.__getitem__))


class Roster(msgspec.Struct, frozen=True, gc=False):
    """Member records by child session id, in creation order.

    Attributes:
        members: id -> latest :class:`TeamMemberSnapshot`.
        order: id -> creation index (a replaced record keeps its roster position).
        names: name -> id (names are reserved forever, failed members included).
    """

    members: immutables.Map[str, TeamMemberSnapshot] = EMPTY
    order: immutables.Map[str, int] = EMPTY
    names: immutables.Map[str, str] = EMPTY
    memo: Memo = msgspec.field(default_factory=Memo)

    def listed(self) -> tuple[TeamMemberSnapshot, ...]:
        """Every member record in creation order (memoised)."""
        cached = self.memo.get("listed")
        if cached is None:
            cached = self.memo["listed"] = _sorted_values(self.members, self.order, self.members.keys())
        return cached

    def by_name(self, name: str) -> TeamMemberSnapshot | None:
        member_id = self.names.get(name)
        return None if member_id is None else self.members[member_id]


class Board(msgspec.Struct, frozen=True, gc=False):
    """The task board.

    Attributes:
        tasks: id -> latest :class:`TeamTaskSnapshot`; a deleted task's is its tombstone
            (:mod:`dsh_team.core.tombstones`: id, revision, status and owner only).
        order: id -> creation index (board position, kept through deletion).
        live: non-deleted id -> creation index; its size is the ``max_tasks`` count.
        dependents: blocker id -> {non-deleted dependent id}; the reverse edges that
            make deletion checks and cycle searches local.
        next_task_number: ``n`` of the next ``task-<n>`` id to allocate.
    """

    tasks: immutables.Map[str, TeamTaskSnapshot] = EMPTY
    order: immutables.Map[str, int] = EMPTY
    live: immutables.Map[str, int] = EMPTY
    dependents: immutables.Map[str, immutables.Map[str, None]] = EMPTY
    next_task_number: int = 1
    memo: Memo = msgspec.field(default_factory=Memo)

    def listed(self) -> tuple[TeamTaskSnapshot, ...]:
        """Non-deleted tasks in board (creation) order (memoised)."""
        cached = self.memo.get("listed")
        if cached is None:
            cached = self.memo["listed"] = _sorted_values(self.tasks, self.order, self.live.keys())
        return cached

    def in_progress(self) -> tuple[TeamTaskSnapshot, ...]:
        """Tasks currently ``in_progress``, in board order (memoised)."""
        cached = self.memo.get("in_progress")
        if cached is None:
            cached = self.memo["in_progress"] = tuple(
                task for task in self.listed() if task.status == "in_progress"
            )
        return cached

    def live_dependents(self, task_id: str) -> tuple[str, ...]:
        """Non-deleted tasks that list ``task_id`` as a blocker, in board order."""
        found = self.dependents.get(task_id)
        return () if found is None else tuple(sorted(found.keys(), key=self.order.__getitem__))


class Quiescence(msgspec.Struct, frozen=True, gc=False):
    """The latest ``team/quiescent`` record of a Team.

    Attributes:
        seq: Its log position. While it equals ``TeamState.position`` no Team change
            happened since, so the Team is still the quiet Team it describes.
        stalled: The undone work it reported.
    """

    seq: int
    stalled: TeamStalled



class TeamState(msgspec.Struct, frozen=True, gc=False):
    """One Team's durable state as of ``position``.

    Attributes:
        team_id: The Lead session id; records of any other Team are ignored.
        members: The roster.
        tasks: The task board.
        mail: The durable mailbox.
        mode: The root's explicit Team-mode selection (``None`` = never selected).
        failure: Why the stream stopped folding; terminal (the collections keep the
            last valid state).
        position: Seq of the last roster, task or mail event folded into this state
            (or of the record that failed the stream; 0 = none): the log position
            ``wait_for_change(since=...)`` compares against. Mode records and read
            receipts do not move it: a mode change is not Team activity, and a
            receipt must not wake the Lead once per message a member reads. A
            quiescence record moves it: it is the change that wakes a wait.
        changes: Where each entity last changed (:mod:`dsh_team.core.changes`), the
            index a cursor wait reads its delta from.
        quiescence: The latest quiescence record (``None`` = never quiescent).
    """

    team_id: str
    members: Roster = Roster()
    tasks: Board = Board()
    mail: Mailbox = Mailbox()
    mode: bool | None = None
    failure: FoldFailure | None = None
    position: int = 0
    changes: Changes = Changes()
    quiescence: Quiescence | None = None

    @property
    def quiet(self) -> bool:
        """Whether the latest Team change is a quiescence record (no change happened after it)."""
        quiescence = self.quiescence
        return quiescence is not None and quiescence.seq == self.position


def initial_state(team_id: str) -> TeamState:
    """The state of a Team with no records (every root starts here)."""
    return TeamState(team_id, Roster(), Board(), Mailbox())


def mode_enabled(state: TeamState, default: bool) -> bool:
    """Effective Team mode of a root.

    An explicit ``team/mode`` selection wins. Without one, a Team that already has
    roster or task records is treated as enabled (it was created by an earlier build
    in which Teams were always on); otherwise ``default`` (``team_mode_default``).
    """
    if state.mode is not None:
        return state.mode
    if len(state.tasks.tasks) or len(state.members.members):
        return True
    return default
