"""``send_message``: admission of a peer message into the Lead-log mailbox.

A send is accepted by *durably queueing* it in the Lead log
(``team/message/queued``), never by reaching the target: the Lead log is the
one session that is always live while its Team works, so it is the transaction
owner, and delivery is a separate, retryable step (:mod:`.dispatch`). The sender
learns ``accepted`` when the target already durably holds the message, else
``queued``; both mean "durable, do not resend".

Admission is :func:`~dsh_team.mail.admission.decide_send` (the pure decision
``dsh team send`` makes too), run in the Lead's serialized section. The dispatch is
registered inside the same section, so concurrent senders line up per target in
durable log order.

The user (:meth:`MessageSender.send_from_user`, credential: the Lead's live agent)
and the Team's own notices to the Lead (:meth:`MessageSender.notify_lead`) are
admitted the same way with a sender that is no member
(:data:`~dsh_team.mail.framing.SYSTEM_SENDERS`): same limits, same exactly-once
delivery; the user may write to the Lead too.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
import uuid
from typing import TYPE_CHECKING, Any, Literal

import msgspec
import structlog

from host_spec.messages import ContentBlock, text_block

from dsh_team.errors import TeamCode, TeamError, UnconfirmedError, render_reason
from dsh_team.core.records import TEAM_MESSAGE_QUEUED
from dsh_team.core.snapshots import TeamMessageSnapshot
from dsh_team.log.journal import Append
from dsh_team.mail.admission import decide_send
from dsh_team.core.task_view import LEAD_NAME
from dsh_team.mail.framing import MESSAGE_ID_PREFIX, NOTICE_SENDER, USER_SENDER
from dsh_team.core.state import TeamState
from dsh_team.core.validation import check_content

if TYPE_CHECKING:
    from host_spec.protocols import Agent
    from host_spec.records import AbortSignal

    from dsh_team.config import TeamConfig
    from dsh_team.log.journal import Journal
    from dsh_team.mail.dispatch import Dispatcher
    from dsh_team.log.journals import Journals
    from dsh_team.log.lifecycle import Lifecycle
    from dsh_team.log.membership import MembershipResolver

__all__ = ["SendResult", "MessageSender"]

log = structlog.get_logger(__name__)


class SendResult(msgspec.Struct, frozen=True):
    """``accepted``: the target durably holds it; ``queued``: durable in the Lead log, delivery pending.

    ``position`` is the Team log position of the queued record (what the sender's
    view of the Team reflects right after the send; 0 when unknown).
    """

    message_id: str
    status: Literal["accepted", "queued"]
    position: int = 0


def _aborted(reason: Any) -> BaseException:
    if isinstance(reason, BaseException):
        return reason
    return TeamError(f"send_message aborted: {render_reason(reason)}", TeamCode.DISPOSED)


class MessageSender:
    """Sends (any member to any other active member or ``lead``).

    Args:
        config: Limits (``max_pending_messages_per_member``, ``max_message_bytes``).
        journals, members, lifecycle: The service's journal, membership and lifetime.
        dispatcher: Delivers queued messages.
    """

    def __init__(
        self,
        config: TeamConfig,
        journals: Journals,
        members: MembershipResolver,
        lifecycle: Lifecycle,
        dispatcher: Dispatcher,
    ) -> None:
        self.config = config
        self.journals = journals
        self.members = members
        self.lifecycle = lifecycle
        self.dispatcher = dispatcher
        #: Whether a member shut down for good (set by the coordination: mail to it is refused).
        self.gone: Callable[[Journal, str], bool] = lambda journal, member_id: False

    async def send(self, caller: Agent, *, target: Any, content: Any, signal: AbortSignal | None = None) -> SendResult:
        """Queue durably, then try one delivery; see the module docstring.

        An abort of ``signal`` before the message is queued raises; after that the
        message is durable and the result is ``queued``.

        Raises:
            TeamError: ``TEAM_DISPOSED``, ``TEAM_NOT_MEMBER``, ``TEAM_INVALID_ARGUMENT``,
                ``TEAM_MEMBER_NOT_FOUND``, ``TEAM_SELF_MESSAGE``, ``TEAM_MAILBOX_FULL``,
                ``TEAM_MESSAGE_TOO_LARGE``, ``TEAM_STREAM_FAILED``,
                ``TEAM_PERSISTENCE_UNCONFIRMED`` (queued and visible, not confirmed durable).
            BaseException: an exception abort reason of ``signal``.
        """
        self.lifecycle.admit()
        membership = self.members.resolve(caller)
        if signal is not None and signal.aborted:
            raise _aborted(signal.reason)
        blocks = check_content(content)
        journal = self.journals.get(membership.root.session)
        return await self._queue(journal, (membership.member_id, membership.name), target, blocks, signal)

    async def send_from_user(self, lead: Agent, *, target: Any, content: Any) -> SendResult:
        """Queue the user's message to ``target`` (a teammate or ``lead``); ``lead`` is the Lead's live agent.

        Raises:
            TeamError: ``TEAM_LEAD_REQUIRED`` (``lead`` is not its Team's Lead), and the
                codes of :meth:`send` (no ``TEAM_SELF_MESSAGE``: the user is no member).
        """
        self.lifecycle.admit()
        membership = self.members.resolve(lead)
        if not membership.is_lead:
            raise TeamError("only the Lead's run speaks for the user", TeamCode.LEAD_REQUIRED)
        blocks = check_content(content)
        journal = self.journals.get(membership.root.session)
        return await self._queue(journal, (USER_SENDER, USER_SENDER), target, blocks, None)

    async def send_as(self, journal: Journal, sender_id: str, sender_name: str, target: Any, text: str) -> SendResult:
        """Queue ``text`` from an already resolved member (the shutdown flow's request and answer)."""
        self.lifecycle.admit()
        return await self._queue(journal, (sender_id, sender_name), target, (text_block(text),), None)

    async def notify_lead(self, journal: Journal, text: str) -> SendResult:
        """Queue the Team's notice ``text`` to the Lead of ``journal`` (see :mod:`dsh_team.mail.notices`)."""
        self.lifecycle.admit()
        blocks = (text_block(text),)
        return await self._queue(journal, (NOTICE_SENDER, NOTICE_SENDER), LEAD_NAME, blocks, None)

    async def _queue(
        self,
        journal: Journal,
        sender: tuple[str, str],
        target: Any,
        blocks: tuple[ContentBlock, ...],
        signal: AbortSignal | None,
    ) -> SendResult:
        queued: list[TeamMessageSnapshot] = []
        positions: list[int] = []

        def admit(state: TeamState) -> Append:
            record = decide_send(
                state, self.config, gone=lambda member_id: self.gone(journal, member_id), sender=sender,
                target=target, blocks=blocks, message_id=f"{MESSAGE_ID_PREFIX}{uuid.uuid4()}",
            )  # fmt: skip
            queued.append(record.message)
            return Append(TEAM_MESSAGE_QUEUED, record)

        def register(state: TeamState) -> asyncio.Future[bool]:
            # Inside the section: the per-target dispatch order is the durable queue order.
            positions.append(state.position)
            return self.dispatcher.dispatch(journal, queued[0].id, queued[0].target_id)

        def open_(state: TeamState) -> None:
            self.lifecycle.admit()

        work = self._finish(
            journal.transact(admit, register, what="the team message", check=open_), queued, positions, signal
        )
        return await asyncio.shield(self.lifecycle.track(work))

    async def _finish(
        self, queueing: Any, queued: list[TeamMessageSnapshot], positions: list[int], signal: AbortSignal | None
    ) -> SendResult:
        try:
            delivery: asyncio.Future[bool] = await queueing
        except UnconfirmedError as error:
            # Queued and visible; the dispatcher delivers it once a later flush stores it.
            message = queued[0]
            raise UnconfirmedError(
                f"team message {message.id} is queued but its persistence is unconfirmed ({error.__cause__}); "
                "it is delivered once stored: see its target's pending count in list_agents, do not resend it",
                value=SendResult(message_id=message.id, status="queued", position=positions[0]),
                team_id=error.details.get("team_id"),
            ) from error.__cause__
        message = queued[0]
        accepted = await _unless_aborted(delivery, signal)
        log.debug("team.message_sent", message=message.id, target=message.target_id, accepted=accepted)
        return SendResult(message_id=message.id, status="accepted" if accepted else "queued", position=positions[0])


async def _unless_aborted(delivery: asyncio.Future[bool], signal: AbortSignal | None) -> bool:
    """The delivery outcome, or ``False`` as soon as the sender's signal aborts (delivery goes on)."""
    if signal is None:
        return await delivery
    stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def aborted(reason: object) -> None:
        with contextlib.suppress(asyncio.InvalidStateError):  # a repeated abort changes nothing
            stop.set_result(None)

    remove = signal.on_abort(aborted)
    racing: list[asyncio.Future[Any]] = [delivery, stop]
    try:
        await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
    finally:
        remove()
        stop.cancel()
    return delivery.done() and delivery.result()
