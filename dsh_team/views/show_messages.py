"""The mail part of ``dsh team show``: undelivered messages and how far recent ones got.

A Team's mail is what a stuck Team is most often waiting on, so the offline view
lists it in two ways: every message still queued (with its full content, because
nobody has seen it yet), and a short window of the most recently queued messages
with their status (``queued``, ``delivered`` or ``read``), which still names a
message after it left the mailbox. Both read the folded state only, so they show
the same thing for a live Team and for its stored logs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from host_spec.messages import message_text

from dsh_team.core.changes import RECENT_KEPT
from dsh_team.core.task_view import owner_name

if TYPE_CHECKING:
    from dsh_team.core.state import TeamState

__all__ = ["ShowMessage", "ShowMessageStatus", "RECENT_MESSAGES", "pending_messages", "recent_messages"]


class ShowMessage(msgspec.Struct, frozen=True):
    """A message queued and not yet delivered; ``text`` joins its text blocks."""

    id: str
    sender_id: str
    sender_name: str
    target_id: str
    target_name: str | None
    text: str
    content: tuple[dict[str, Any], ...]


#: Messages in the "messages" part: the most recently queued ones (the change index keeps that many).
RECENT_MESSAGES: Final = RECENT_KEPT


class ShowMessageStatus(msgspec.Struct, frozen=True):
    """One recently queued message and how far it got: ``queued``, ``delivered`` or ``read``."""

    id: str
    sender_name: str
    target_id: str
    target_name: str | None
    status: str


def pending_messages(state: TeamState) -> tuple[ShowMessage, ...]:
    """Every undelivered message of ``state`` in queue order, as the view shows it."""
    return tuple(
        ShowMessage(
            id=m.id, sender_id=m.sender_id, sender_name=m.sender_name, target_id=m.target_id,
            target_name=owner_name(state, m.target_id), text=message_text(list(m.content)), content=m.content,
        )
        for m in state.mail.all_pending()
    )


def recent_messages(state: TeamState, limit: int = RECENT_MESSAGES) -> tuple[ShowMessageStatus, ...]:
    """The ``limit`` (at most :data:`RECENT_MESSAGES`) most recently queued messages of ``state`` with their status, in queue order.

    Read from the change index's window of recent messages: a read message is no
    longer in the mailbox, but the window still names it.
    """
    mail = state.mail
    return tuple(
        ShowMessageStatus(
            id=entry.message_id, sender_name=entry.sender_name, target_id=entry.target_id,
            target_name=owner_name(state, entry.target_id), status=mail.status(entry.message_id),
        )
        for entry in state.changes.recent_messages(limit)
    )
