"""The Lead's notice of a teammate's failed turn: one durable Team message, and its wait wakes.

A teammate whose turn ends on a model error (any ``MODEL_*`` code the host's
model seam raises) stops working silently unless someone looks at its log. So
the turn end (the host's ``dsh_agent_turn_end``) queues one Team notice to the
Lead (sender :data:`~dsh_team.mail.framing.NOTICE_SENDER`, framed ``Team notice
<id>:``) with the member's name, the code and the text. It is ordinary Team mail:
queued in the Lead log, so it moves the Team's position and wakes the Lead's
``wait_for_change``, and delivered exactly once, across a crash too.

A budget refusal has its own notice, once per limit reached
(:mod:`dsh_team.cost.limits`), which also wakes the Lead's wait; a turn that a
budget refusal ended is therefore not noticed twice here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import structlog

from dsh_team.errors import render_reason

if TYPE_CHECKING:
    from host_spec.protocols import Agent, Host

    from dsh_team.log.journals import Journals
    from dsh_team.log.lifecycle import Lifecycle
    from dsh_team.mail.send import MessageSender
    from dsh_team.log.membership import MembershipResolver

__all__ = ["MODEL_CODE_PREFIX", "failure_of", "notice_text", "FailureNotices"]

#: Codes of the host's model seam (``MODEL_ERROR``, ``MODEL_TIMEOUT`` ...) start with this.
MODEL_CODE_PREFIX: Final = "MODEL_"
#: The longest error text a notice quotes (a model server's body can be large).
_MAX_TEXT: Final = 2_000

log = structlog.get_logger(__name__)


def failure_of(reason: Any) -> tuple[str, str] | None:
    """``(code, message)`` of a turn-end reason that ended on a model error, else ``None``."""
    if not isinstance(reason, dict) or reason.get("kind") != "error":
        return None
    error = reason.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    if not isinstance(code, str) or not code.startswith(MODEL_CODE_PREFIX):
        return None
    message = error.get("message") if isinstance(error, dict) else None
    return code, message if isinstance(message, str) else ""


def notice_text(name: str, turn: int, code: str, message: str) -> str:
    """What the Lead reads: who, which turn, the code and the text, and what is kept."""
    if len(message) > _MAX_TEXT:
        message = message[:_MAX_TEXT] + "..."
    return (
        f"{name}'s turn {turn} ended on {code}: {message}\n"
        f"Its inbox and tasks are kept; message {name} to retry, or reassign its tasks."
    )


class FailureNotices:
    """Queues the Lead's notice when a teammate's turn ends on a model error.

    Args:
        host: The host (``call_soon``: the notice is host work a run waits for).
        journals, members, lifecycle: The service's journals, membership and lifetime.
        sender: Queues the notice as Team mail.
    """

    def __init__(
        self, host: Host, journals: Journals, members: MembershipResolver, lifecycle: Lifecycle, sender: MessageSender
    ) -> None:
        self.host = host
        self.journals = journals
        self.members = members
        self.lifecycle = lifecycle
        self.sender = sender

    def turn_end(self, agent: Agent, turn: int, reason: Any) -> None:
        """A turn of ``agent`` closed: queue the Lead's notice if a teammate's turn failed on its model."""
        failure = failure_of(reason)
        if failure is None or self.lifecycle.disposed:
            return
        membership = self.members.try_resolve(agent)
        if membership is None or membership.is_lead:
            return  # the Lead's own failure is the user's to see, not the Lead's
        journal = self.journals.get(membership.root.session)
        text = notice_text(membership.name, turn, *failure)

        async def queue() -> None:
            try:
                await self.sender.notify_lead(journal, text)
            except Exception as exc:
                log.warning("team.notice_failed", member=membership.member_id, error=render_reason(exc))

        self.host.call_soon(lambda: None if self.lifecycle.disposed else self.lifecycle.track(queue()))
