"""Why a Team stream stopped folding: the failure value and the stable names of the rules.

A record that breaks a fold rule ends the stream: the state keeps its last valid
collections and carries a :class:`FoldFailure`. The failure is a value with a
stable ``rule`` name rather than an exception text, so the invariant plugin, the
offline views and tests branch on the rule and never parse a message.
"""

from __future__ import annotations

from typing import Final

import msgspec

__all__ = ["FoldFailure", "FoldRule"]


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
