"""The admission of one Team message: a pure decision over the Team's state.

Every path that queues a message (a member's ``send_message``, the user through a
live Lead, the Team's notices, and ``dsh team send`` writing into a stopped run)
decides with :func:`decide_send`, held to the same limits (the run's profile's), so
no path can accept a message another would refuse. An accepted message that could
never be delivered (its target shut down for good) breaks the mailbox's promise;
that is why "gone" is part of the decision, not a check some callers add.

The checks run in this order, the first failing one naming the error: the target
(``lead`` or an active teammate), not gone for good, not the sender itself, the
target's pending count, then the size of the framed delivery.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from host_spec.events import json_encode

from dsh_team.core.records import VERSION, MessageQueuedRecord
from dsh_team.core.snapshots import TeamMessageSnapshot
from dsh_team.errors import TeamCode, TeamError
from dsh_team.mail.framing import delivered_content
from dsh_team.core.targets import resolve_target

if TYPE_CHECKING:
    from host_spec.messages import ContentBlock

    from dsh_team.config import TeamConfig
    from dsh_team.core.state import TeamState

__all__ = ["decide_send"]


def decide_send(
    state: TeamState,
    limits: TeamConfig,
    *,
    gone: Callable[[str], bool],
    sender: tuple[str, str],
    target: Any,
    blocks: tuple[ContentBlock, ...],
    message_id: str,
) -> MessageQueuedRecord:
    """The ``team/message/queued`` record of one send, or the typed refusal.

    Args:
        state: The Team's folded state the record will follow.
        limits: ``max_pending_messages_per_member`` and ``max_message_bytes`` (the run's profile).
        gone: Whether a member id shut down for good (released or stopped).
        sender: ``(id, name)`` of the sender (a member, or one of the system senders).
        target: The target as given (``lead`` or a teammate's name).
        blocks: The checked content.
        message_id: The new message's id.

    Raises:
        TeamError: ``TEAM_INVALID_ARGUMENT``, ``TEAM_MEMBER_NOT_FOUND`` (unknown, inactive or shut
            down), ``TEAM_SELF_MESSAGE``, ``TEAM_MAILBOX_FULL``, ``TEAM_MESSAGE_TOO_LARGE``.
    """
    target_id, target_name = resolve_target(state, target)
    if gone(target_id):
        raise TeamError(f'teammate "{target_name}" has shut down', TeamCode.MEMBER_NOT_FOUND, target=target_name)
    sender_id, sender_name = sender
    if target_id == sender_id:
        raise TeamError("a Team member cannot message itself", TeamCode.SELF_MESSAGE)
    pending = state.mail.pending_count(target_id)
    if pending >= limits.max_pending_messages_per_member:
        raise TeamError(f'teammate "{target_name}" has {pending} pending messages', TeamCode.MAILBOX_FULL)
    message = TeamMessageSnapshot(
        id=message_id, sender_id=sender_id, sender_name=sender_name, target_id=target_id, content=blocks
    )
    if len(json_encode(delivered_content(message))) > limits.max_message_bytes:
        raise TeamError(f"team message exceeds {limits.max_message_bytes} bytes", TeamCode.MESSAGE_TOO_LARGE)
    # The queue index lets the fold refuse a repeat of this record without keeping every id.
    return MessageQueuedRecord(version=VERSION, team_id=state.team_id, message=message, index=state.mail.next_index)
