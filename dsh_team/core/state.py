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

These are msgspec Structs rather than attrs classes because the fold builds
several of them per event and P3 (cold replay) is measured against a plain msgspec
decode: a Struct is about ten times cheaper to construct.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Final, Literal

import immutables
import msgspec

from dsh_team.core.changes import Changes
from dsh_team.core.records import TeamStalled
from dsh_team.core.snapshots import TeamMemberSnapshot, TeamMessageSnapshot, TeamTaskSnapshot

__all__ = [
    "EMPTY", "Memo", "Roster", "Board", "Mailbox", "FoldFailure", "FoldRule", "Quiescence", "TeamState",
    "initial_state", "mode_enabled",
]

#: The shared empty map every fresh collection starts from.
EMPTY: Final[immutables.Map[Any, Any]] = immutables.Map()

#: Sort key of a ``(message id, queue index)`` item of a pending map.
_BY_INDEX: Final = itemgetter(1)


class Memo(dict[str, Any]):
    """A per-object cache that never takes part in equality.

    Collections are immutable, so anything derived from one (a sorted listing) is
    valid for its whole life; storing it here keeps repeated reads O(k) without
    making two equal collections compare unequal.
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Memo)

    # typeshed declares ``dict.__hash__`` as ``None``; a Memo must hash so the Structs holding it do.
    def __hash__(self) -> int:  # type: ignore[override]
        return 0

    def __repr__(self) -> str:
        return "Memo()"


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
        tasks: id -> latest :class:`TeamTaskSnapshot` (deleted tombstones included).
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


class Mailbox(msgspec.Struct, frozen=True, gc=False):
    """The open peer messages: queued, or delivered and not read yet.

    Sized by open mail, not by history: a message is held from its queued record
    until its read receipt, which settles it (its status never moves again), and
    then dropped, body and all. Delivery is not stored separately: an open
    message is delivered exactly when it has left its target's ``pending`` map for
    its ``unread`` map (the fold moves it there and nowhere else).

    Queue order is a counter: ``next_index`` is the queue index of the next queued
    record, and a current queued record carries its index, so a record appended
    twice (its index is stale) fails the fold without the mailbox remembering
    every id it ever saw. Queued records of older logs carry no index; their ids
    are kept in ``legacy`` so a repeat of one still fails (only such logs keep a
    set that grows with their history).

    Because a settled message is dropped, "read" and "never queued" look the
    same here: :meth:`status`, :meth:`is_delivered` and :meth:`is_read` answer for
    a message the caller knows was queued (from a record, the change index or its
    send), and :meth:`message` tells whether a message is still open.

    Attributes:
        messages: message id -> :class:`TeamMessageSnapshot` of every open message.
        pending: target id -> {undelivered message id -> queue index}.
        unread: target id -> {delivered, not yet read message id -> queue index}.
        read: target id -> how many of its messages were read (a counter, not a set).
        next_index: Queue index of the next queued record (how many were queued).
        legacy: Ids of queued records without a queue index (older logs only).
    """

    messages: immutables.Map[str, TeamMessageSnapshot] = EMPTY
    pending: immutables.Map[str, immutables.Map[str, int]] = EMPTY
    unread: immutables.Map[str, immutables.Map[str, int]] = EMPTY
    read: immutables.Map[str, int] = EMPTY
    next_index: int = 0
    legacy: immutables.Map[str, None] = EMPTY

    def message(self, message_id: str) -> TeamMessageSnapshot | None:
        """The open message ``message_id`` (queued, or delivered and unread), else ``None``."""
        return self.messages.get(message_id)

    def status(self, message_id: str) -> Literal["queued", "delivered", "read"]:
        """``queued``, ``delivered`` or ``read`` for a message that was queued.

        A message the mailbox no longer holds was read (settled); an id that was
        never queued cannot be told from it, so callers ask only about messages
        they know were queued.
        """
        message = self.messages.get(message_id)
        if message is None:
            return "read"
        found = self.pending.get(message.target_id)
        return "queued" if found is not None and message_id in found else "delivered"

    def is_delivered(self, message_id: str) -> bool:
        """Whether a message that was queued has been acknowledged by its target (read ones included)."""
        return self.status(message_id) != "queued"

    def is_read(self, message_id: str) -> bool:
        """Whether a message that was queued was delivered and a model step of its target has since completed with it."""
        return message_id not in self.messages

    def unread_count(self, target_id: str) -> int:
        """Messages delivered to ``target_id`` that no completed model step of it has seen yet."""
        found = self.unread.get(target_id)
        return 0 if found is None else len(found)

    def read_count(self, target_id: str) -> int:
        """Messages to ``target_id`` that a completed model step of it has seen."""
        return self.read.get(target_id, 0)

    def unread_for(self, target_id: str) -> tuple[TeamMessageSnapshot, ...]:
        """Delivered, unread messages of one target, in queue order."""
        found = self.unread.get(target_id)
        return () if found is None else self._in_order(found.items())

    def pending_count(self, target_id: str) -> int:
        found = self.pending.get(target_id)
        return 0 if found is None else len(found)

    def pending_for(self, target_id: str) -> tuple[TeamMessageSnapshot, ...]:
        """Undelivered messages for one target, in queue order."""
        found = self.pending.get(target_id)
        return () if found is None else self._in_order(found.items())

    def all_pending(self) -> tuple[TeamMessageSnapshot, ...]:
        """Every undelivered message of the Team, in queue order."""
        return self._in_order([item for inner in self.pending.values() for item in inner.items()])

    def _in_order(self, items: Any) -> tuple[TeamMessageSnapshot, ...]:
        messages = self.messages
        return tuple(messages[key] for key, _ in sorted(items, key=_BY_INDEX))


class FoldFailure(msgspec.Struct, frozen=True):
    """Why a Team stream stopped folding: a value, so readers branch on ``rule``, not on text.

    Attributes:
        rule: The broken rule, a stable name (``task-revision-not-contiguous``,
            ``unsupported-version``, ``invalid-payload``, ...; see :class:`FoldRule`).
        message: The human-readable account, naming the record and the rule.
        seq: The log position of the record that failed.
    """

    rule: str
    message: str
    seq: int


class FoldRule:
    """The stable names of the rules a Team record can break (``FoldFailure.rule``).

    A read message is settled and leaves the mailbox, so a delivery or receipt
    naming a message that is not open (never queued, or already read) fails as
    ``message-delivered-before-queued`` or ``message-read-before-delivered``;
    ``message-delivered-twice`` is a second delivery of a message still unread,
    and ``message-read-twice`` is no longer produced (a second receipt finds its
    message settled). A queued record fails as ``message-queued-twice`` when its
    id is open or an older (index-less) record's, or its queue index is below the
    next one, and as ``message-index-skipped`` when its index is above it.
    """

    INVALID_PAYLOAD: Final = "invalid-payload"
    UNSUPPORTED_VERSION: Final = "unsupported-version"
    MEMBER_MUST_BEGIN_PROVISIONING: Final = "member-must-begin-provisioning"
    MEMBER_NAME_REUSED: Final = "member-name-reused"
    MEMBER_IDENTITY_CHANGED: Final = "member-identity-changed"
    MEMBER_INVALID_TRANSITION: Final = "member-invalid-transition"
    TASK_MUST_BEGIN_AT_REVISION_1: Final = "task-must-begin-at-revision-1"
    TASK_REVISION_NOT_CONTIGUOUS: Final = "task-revision-not-contiguous"
    TASK_DEPENDENCY_CYCLE: Final = "task-dependency-cycle"
    TASK_DUPLICATE_BLOCKER: Final = "task-duplicate-blocker"
    TASK_MISSING_BLOCKER: Final = "task-missing-blocker"
    MESSAGE_QUEUED_TWICE: Final = "message-queued-twice"
    MESSAGE_INDEX_SKIPPED: Final = "message-index-skipped"
    MESSAGE_DELIVERED_BEFORE_QUEUED: Final = "message-delivered-before-queued"
    MESSAGE_TARGET_CHANGED: Final = "message-target-changed"
    MESSAGE_DELIVERED_TWICE: Final = "message-delivered-twice"
    MESSAGE_READ_BEFORE_DELIVERED: Final = "message-read-before-delivered"
    MESSAGE_READ_TWICE: Final = "message-read-twice"
    QUIESCENCE_REPEATED: Final = "quiescence-repeated"
    QUIESCENCE_WHILE_BUSY: Final = "quiescence-while-busy"
    QUIESCENCE_STALLED_MISMATCH: Final = "quiescence-stalled-mismatch"


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
