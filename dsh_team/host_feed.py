"""The host feed of the Team service: the host's hooks keep it current, teardown disposes it.

The ``dsh-team`` plugin registers the service object itself with the host it was
built for (:mod:`dsh_team.plugin`), so these hook implementations are how the
host tells the service what happened: session events keep the folds current,
flushes announce durable changes, status changes mark cursor deltas and may
leave the Team quiet, a published agent gets its recovery, a member's model call
meets the budget check, a teammate's turn that failed on its model tells the Lead, and plugin teardown disposes the service. The journals
and the roster report back through the same part: a changed fold republishes
the browser view, a durable change wakes the waiters and the dispatcher, an
ended recovery may leave the Team quiet.

:class:`HostFeed` is a part of :class:`dsh_team.service.TeamService`: it holds no
state of its own and works on the service's journals, membership, rooms and
lifetime, which the service builds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from host_spec import hookimpl

from dsh_team.core.records import TEAM_EVENT_TYPES, TEAM_MESSAGE_READ
from dsh_team.core.state import mode_enabled
from dsh_team.checkpoint.keeper import CheckpointKeeper, CheckpointSource
from dsh_team.views.brief import team_brief

if TYPE_CHECKING:
    from host_spec.events import Event
    from host_spec.protocols import Agent, Host, Session

    from dsh_team.checkpoint.folds import LiveFolds
    from dsh_team.config import TeamConfig
    from dsh_team.coordination import Coordination
    from dsh_team.controls.ledger import LiveControls
    from dsh_team.permissions.ledger import LivePermissions
    from dsh_team.cost.costs import TeamCosts
    from dsh_team.log.journal import Journal
    from dsh_team.log.journals import Journals
    from dsh_team.log.lifecycle import Lifecycle
    from dsh_team.worktrees.merge import Merges
    from dsh_team.log.quiescence import QuiescenceWatch
    from dsh_team.log.waits import Activity
    from dsh_team.log.membership import Membership, MembershipResolver
    from dsh_team.roster.roster import MemberView
    from dsh_team.views.cursor import CursorDeltas
    from dsh_team.views.projection import Publisher

__all__ = ["HostFeed"]


class HostFeed:
    """The hooks the host feeds the Team service through, and its disposal (a part of ``TeamService``).

    Attributes:
        host, config, lifecycle, activity, publisher, journals, members, coordination,
        cursors, costs, quiescence, folds, checkpoints: The service's parts (set by the service).
    """

    host: Host
    config: TeamConfig
    lifecycle: Lifecycle
    activity: Activity
    publisher: Publisher
    journals: Journals
    members: MembershipResolver
    coordination: Coordination
    cursors: CursorDeltas
    costs: TeamCosts
    quiescence: QuiescenceWatch
    controls: LiveControls
    merges: Merges
    permissions: LivePermissions
    folds: LiveFolds
    checkpoints: CheckpointKeeper

    if TYPE_CHECKING:  # the service's own calls, which the feed uses

        def try_membership(self, agent: Agent) -> Membership | None: ...
        def is_enabled(self, caller: Agent) -> bool: ...
        def list_members(self, caller: Agent) -> list[MemberView]: ...
        def _lead(self, membership: Membership) -> Journal: ...
        def _controls_started(self, agent: Agent) -> None: ...

    # ------------------------------------------------------------ what the journals and the roster report

    def _changed(self, journal: Journal) -> None:
        if self.publisher.listening:  # building a view is O(board): only for subscribers
            state = journal.state
            self.publisher.publish(state, mode_enabled(state, self.config.team_mode_default))

    def _may_be_quiet(self, agent: Agent) -> None:
        membership = self.try_membership(agent)
        if membership is not None:
            self.quiescence.poke(membership.team_id)

    def _durable(self, journal: Journal) -> None:
        self.activity.notify(journal.team_id)
        self.coordination.dispatcher.durable(journal)

    # ------------------------------------------------------------ host feed (this host's hooks)

    @hookimpl(specname="dsh_session_created")
    def session_created(self, session: Session) -> None:
        """Fold a created or resumed session once; it may lead a Team.

        A resumed session with a checkpoint its log confirms starts every fold
        from it (:mod:`dsh_team.checkpoint`): only the events after it are folded.
        """
        journal = self.journals.find(session.id)
        if journal is None or journal.session is not session:
            checkpoint = self.checkpoints.load(session, self.host.find_service(CheckpointSource)) if session.last_seq else None
            if checkpoint is not None:
                self.folds.restore(session, checkpoint)
        self.journals.get(session)

    @hookimpl(specname="dsh_session_event")
    def session_event(self, session: Session, event: Event) -> None:
        """Fold a committed Team event into its session's journal (O(1) per event)."""
        self.coordination.session_event(session, event)
        self.costs.session_event(session, event)
        if event.type in TEAM_EVENT_TYPES:
            journal = self.journals.find(session.id)
            if journal is not None and journal.session is session:
                journal.observe(event)
                if event.type == TEAM_MESSAGE_READ:  # the last unread message may have kept the Team busy
                    self.quiescence.poke(journal.team_id)

    @hookimpl(specname="dsh_session_flushed")
    def session_flushed(self, session: Session, durable_seq: int) -> None:
        """Announce a Team change that just became durable."""
        journal = self.journals.find(session.id)
        if journal is not None and journal.session is session:
            journal.flushed(durable_seq)
            self.checkpoints.flushed(session, durable_seq)
        self.costs.session_flushed(session, durable_seq)

    @hookimpl(specname="dsh_session_disposed")
    def session_disposed(self, session: Session) -> None:
        """Forget a session that left the live store (a flushed Lead's clean stop saves its checkpoint)."""
        journal = self.journals.find(session.id)
        if journal is not None and journal.session is session:
            self.checkpoints.forget(session)
        self.journals.drop(session)
        self.members.forget(session)
        self.publisher.forget(session.id)
        self.coordination.session_disposed(session)
        self.costs.session_disposed(session)
        self.controls.forget(session)
        self.merges.forget(session)
        self.permissions.forget(session)

    @hookimpl(specname="dsh_agent_status")
    def agent_status(self, agent: Agent, status: str) -> None:
        """A member's live status changed: marked for cursor deltas; a member stopping may leave the Team quiet.

        No waiter is woken for it (no idle pings): the quiescence record is the one signal.
        """
        membership = self.try_membership(agent)
        if membership is not None:
            self.cursors.status_changed(membership.team_id, agent.id)
            if status != "running":
                self.coordination.shutdowns.agent_idle(agent)
                self.quiescence.poke(membership.team_id)

    @hookimpl(specname="dsh_context_brief")
    def context_brief(self, agent: Agent) -> str | None:
        """The Team brief of a compacted or cold-resumed member (:mod:`dsh_team.views.brief`).

        ``None`` for a non-member, with Team mode off, or when the Team stream failed
        (a brief must never state what the log does not hold).
        """
        membership = self.try_membership(agent)
        if membership is None or not self.is_enabled(agent):
            return None
        state = self._lead(membership).state
        if state.failure is not None:
            return None
        teammates = self.list_members(agent) if membership.role == "lead" else None
        return team_brief(state, agent.id, membership.name, teammates)

    @hookimpl(specname="dsh_agent_session_start")
    def agent_session_start(self, agent: Agent, source: str) -> None:
        """An agent was published: schedule its recovery (reconcile, retry queued mail, lost charges), then a quiescence check."""
        self.costs.agent_session_start(agent)
        self.coordination.worktrees.ensure(agent)  # before its first step: a member's workspace must be there
        self.coordination.agent_started(agent)
        self._controls_started(agent)
        self._may_be_quiet(agent)

    @hookimpl(specname="dsh_agent_turn_end")
    def agent_turn_end(self, agent: Agent, turn: int, reason: dict[str, Any]) -> None:
        """A teammate's turn that ended on a model error becomes one notice to the Lead (:mod:`dsh_team.mail.notices`)."""
        self.coordination.notices.turn_end(agent, turn, reason)

    @hookimpl(specname="dsh_agent_pre_step")
    def agent_pre_step(self, agent: Agent) -> None:
        """Refuse a member's model call once a budget is used up (``TEAM_BUDGET_EXCEEDED``)."""
        self.costs.agent_pre_step(agent)

    # ------------------------------------------------------------ disposal

    @hookimpl(specname="dsh_plugin_teardown")
    async def dispose(self) -> None:
        """Close admission and waits, then settle admitted operations (bounded).

        The host awaits this as plugin teardown, before the plugin's ledger
        withdraws the service and unregisters these hooks.

        Raises:
            ExceptionGroup: "Agent Teams runtime disposal failed" with every failure
                (``TEAM_DISPOSAL_TIMEOUT`` when the bound passed).
        """
        self.lifecycle.close()
        self.activity.close()
        failures = await self.lifecycle.settle()
        failures += await self.coordination.dispose()
        self.coordination.worktrees.cleanup()  # the Team ends: merged worktrees go, ones with work stay
        for journal in self.journals:  # a clean stop: each flushed Lead's folds are saved
            self.checkpoints.save(journal.session)
        await self.checkpoints.drain()
        if failures:
            raise BaseExceptionGroup("Agent Teams runtime disposal failed", failures)
