"""The roster and mailbox runtime of a Team service, and its host feed.

``TeamService`` builds one :class:`Coordination`, which wires the roster, the
provisioner, the dispatcher and the mailbox; the service calls them directly for
the four member operations (``list_members``, ``spawn_teammate``,
``send_message``, ``interrupt``) and delegates to this class the host events they
depend on, recovery on agent start, and the roster drain of disposal. Keeping the wiring here lets the service stay a thin
facade over journal, membership, activity and lifecycle.

Recovery is scheduled through ``host.call_soon`` (the host counts it as pending
work, so ``run``/``resume`` do not report quiescence before queued mail was
retried) and tracked by the lifecycle (disposal waits for it). A Lead reconciles
its open provisioning records first, then retries the Team's queued mail; a
teammate retries the mail addressed to it. Both then rebuild the read receipts a
crash lost (:mod:`dsh_team.mail.receipts`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import structlog

from host_spec.events import EventType

from dsh_team.mail.dispatch import Dispatcher
from dsh_team.mail.notices import FailureNotices
from dsh_team.mail.send import MessageSender
from dsh_team.roster.provisioning import Provisioner
from dsh_team.roster.reconcile import reconcile
from dsh_team.roster.roles import RoleBook
from dsh_team.roster.shutdown import Shutdowns
from dsh_team.roster.roster import RosterService
from dsh_team.mail.holdings import SessionMessages, settled_in
from dsh_team.mail.receipts import ReadReceipts
from dsh_team.worktrees.room import MemberWorktrees

if TYPE_CHECKING:
    from host_spec.events import Event
    from host_spec.protocols import Agent, Host, Session

    from dsh_team.config import TeamConfig
    from dsh_team.log.journal import Journal
    from dsh_team.log.journals import Journals
    from dsh_team.log.lifecycle import Lifecycle
    from dsh_team.log.membership import MembershipResolver

__all__ = ["Coordination"]

#: The only events the mail rooms read: a recorded message (acknowledged, then read
#: once answered) and the reply that makes it read. Every other event skips both.
_MAIL_TRACES: Final = frozenset({EventType.USER_MESSAGE, EventType.ASSISTANT_MESSAGE})

log = structlog.get_logger(__name__)


class Coordination:
    """Roster, provisioning, mailbox and recovery of one service (see the module docstring).

    Args:
        host: The host the service runs in.
        config: The service's validated limits.
        journals, members, lifecycle: The service's journals, membership and lifetime.
        on_recovered: Told when an agent's recovery ended (what it settled may leave the Team quiet).
    """

    def __init__(
        self,
        host: Host,
        config: TeamConfig,
        journals: Journals,
        members: MembershipResolver,
        lifecycle: Lifecycle,
        *,
        on_recovered: Callable[[Agent], None],
    ) -> None:
        self.host = host
        self.on_recovered = on_recovered
        self.journals = journals
        self.members = members
        self.lifecycle = lifecycle
        self.messages = SessionMessages(settled_in(journals))
        self.roster = RosterService(host, journals, members)
        self.worktrees = MemberWorktrees(host, config, journals)
        self.provisioner = Provisioner(
            host, config, journals, members, lifecycle, self.messages, self.roster, self.worktrees
        )
        self.dispatcher = Dispatcher(host, journals, members, lifecycle, self.messages)
        self.sender = MessageSender(config, journals, members, lifecycle, self.dispatcher)
        self.receipts = ReadReceipts(host, journals, members, lifecycle, self.dispatcher)
        self.notices = FailureNotices(host, journals, members, lifecycle, self.sender)
        self.roles = RoleBook()
        self.shutdowns = Shutdowns(host, journals, members, lifecycle, self.sender, config.shutdown_timeout_ms)
        self.sender.gone = self.dispatcher.gone = self.roster.gone = self.shutdowns.gone
        self.shutdowns.on_gone = self.worktrees.member_gone

    def role_of(self, journal: Journal, member: str) -> str | None:
        """The role ``member`` (a roster name) was spawned with in ``journal``'s Team; ``None``: none."""
        snapshot = journal.state.members.by_name(member)
        record = None if snapshot is None else self.roles.roles(journal.session).get(snapshot.id)
        return None if record is None else record.role

    # ------------------------------------------------------------ host feed

    def session_event(self, session: Session, event: Event) -> None:
        """Wake checkpoint waiters of ``session``; acknowledge Team mail it recorded; note what it read."""
        self.messages.poke(session)
        if event.type in _MAIL_TRACES:  # per event of every session: the rest returns here
            self.dispatcher.observe(session, event)
            self.receipts.observe(session, event)

    def session_disposed(self, session: Session) -> None:
        self.messages.forget(session)
        self.roles.forget(session)
        self.shutdowns.book.forget(session)
        self.worktrees.forget(session)

    def agent_started(self, agent: Agent) -> None:
        """Schedule recovery for an agent that was just published (startup or resume).

        What to settle is decided *now*: only provisioning records that exist when
        the Lead starts are reconciled, because a record written later belongs to a
        creator of this process that still owns its terminal edge.
        """
        membership = self.members.try_resolve(agent)
        if membership is not None and membership.is_lead:
            self.shutdowns.recover(agent)
        plan = self.plan(agent)
        if plan is not None:
            self.host.call_soon(lambda: self._recover_soon(agent, plan))

    def recover_live(self) -> None:
        """Schedule recovery for every live agent (the plugin was loaded into a running host)."""
        for agent in self.host.agents.list():
            self.agent_started(agent)

    def plan(self, agent: Agent) -> frozenset[str] | None:
        """The provisioning records to reconcile at ``agent``'s start, or ``None`` when nothing needs settling."""
        membership = self.members.try_resolve(agent)
        if membership is None:
            return None
        state = self.journals.get(membership.root.session).state
        if not membership.is_lead:
            mail = state.mail
            return frozenset() if mail.pending_count(agent.id) or mail.unread_count(agent.id) else None
        open_ = frozenset(member.id for member in state.members.listed() if member.phase == "provisioning")
        return open_ if open_ or state.mail.pending or state.mail.unread else None

    def _recover_soon(self, agent: Agent, plan: frozenset[str]) -> Any:
        if self.lifecycle.disposed:
            return None
        return self.lifecycle.track(self.recover(agent, plan))

    async def recover(self, agent: Agent, plan: frozenset[str]) -> None:
        """Reconcile the planned records (Lead), retry queued mail, then rebuild lost read receipts.

        Failures are logged, never raised.
        """
        try:
            if plan:
                journal = self.journals.get(agent.session)
                await reconcile(self.host, journal, plan)
                await self.worktrees.recover(journal)  # a member it settled as failed leaves no worktree
            await self.dispatcher.recover(agent)
            await self.receipts.reconcile(agent)
        except Exception as exc:
            log.warning("team.recovery_failed", agent=getattr(agent, "id", None), error=repr(exc))
        self.on_recovered(agent)

    async def dispose(self) -> list[BaseException]:
        """Drain the live rostered children of every live Lead (after admitted work settled)."""
        self.shutdowns.close()
        return await self.roster.drain(self.lifecycle)
