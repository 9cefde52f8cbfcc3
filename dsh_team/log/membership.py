"""Who is in which Team: membership resolution from the exact live agent.

A live object is the credential: a copied, stale or disposed agent object is no
member, even with the right id. Every root agent is implicitly the Lead of the
Team whose id is its session id; there is no creation event.

Resolution order for a child agent whose parent is live:

1. the parent's roster lists the child as ``active`` or ``provisioning`` ->
   teammate of the parent's Team (the :data:`TeammateResolver` seam; the default
   reads the parent's folded roster, which is all the roster needs);
2. else, a ``subagent/descriptor`` in the child's *own* log -> no Team (a
   provider-owned worker is never a nested Lead);
3. else -> Lead of its own Team (an ordinary fork).

Without a live parent: a descriptor means an orphaned continuation (no Team),
otherwise Lead. A corrupt parent stream keeps its last valid roster, so its
members stay members and every Team operation tells them of the failure
(``TEAM_STREAM_FAILED``) instead of their tools vanishing. Any other failure while
resolving means no Team, never an exception.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import structlog

from host_spec.events import EventType

from dsh_team.errors import TeamCode, TeamError
from dsh_team.core.actor import Role
from dsh_team.core.state import TeamState
from dsh_team.core.task_view import LEAD_NAME

#: An event's type (a C-level getter for scans of long logs).
_TYPE: Final = operator.attrgetter("type")

if TYPE_CHECKING:
    from host_spec.protocols import Agent, AgentRegistry, Session

__all__ = ["Membership", "MembershipResolver", "TeammateResolver", "roster_teammate", "DescriptorScan"]

log = structlog.get_logger(__name__)

_MEMBER_PHASES: Final = frozenset({"active", "provisioning"})


class Membership(NamedTuple):
    """An agent's place in a Team (a named tuple: one is resolved on every Team call).

    Attributes:
        root: The live Lead agent (the caller itself for a Lead).
        team_id: The Lead session id.
        role: ``lead`` or ``teammate``.
        name: ``lead`` for the Lead, else the roster name.
        agent: The member agent this membership was resolved for.
    """

    root: Agent
    team_id: str
    role: Role
    name: str
    agent: Agent

    @property
    def member_id(self) -> str:
        """The member's session id (the Team id for the Lead)."""
        return str(self.agent.id)

    @property
    def is_lead(self) -> bool:
        return self.role == "lead"


#: ``(child, live parent, parent's Team state) -> Membership | None``: the roster seam.
TeammateResolver = Callable[[Any, Any, TeamState], "Membership | None"]


def roster_teammate(agent: Agent, parent: Agent, state: TeamState) -> Membership | None:
    """Teammate iff the parent's roster lists ``agent`` as active or provisioning."""
    member = state.members.members.get(agent.id)
    if member is None or member.phase not in _MEMBER_PHASES:
        return None
    return Membership(root=parent, team_id=parent.id, role="teammate", name=member.name, agent=agent)


class DescriptorScan:
    """Whether a session's own log holds a ``subagent/descriptor``, scanned incrementally.

    Membership is resolved on every call, so the answer is cached per session
    object together with how far the log was scanned; a later call scans only the
    events appended since (a descriptor may be appended after publication).
    """

    def __init__(self) -> None:
        self._scanned: dict[str, tuple[Any, int, bool]] = {}

    def has_descriptor(self, session: Session) -> bool:
        entry = self._scanned.get(session.id)
        if entry is not None and entry[0] is session:
            start, found = entry[1], entry[2]
        else:
            start, found = session.header.seed_length, False
        count = session.last_seq  # membership runs per Team call: nothing new costs no view access
        if not found and start < count:
            if count - start == 1:  # the usual case between two Team calls: one event, no slice
                found = session.events[start].type == EventType.SUBAGENT_DESCRIPTOR
            else:
                # ``in`` over the mapped types runs in C: a Lead's long log costs no Python step per event.
                found = EventType.SUBAGENT_DESCRIPTOR in map(_TYPE, session.events[start:count])
            self._scanned[session.id] = (session, count, found)
        return found

    def forget(self, session: Session) -> None:
        entry = self._scanned.get(session.id)
        if entry is not None and entry[0] is session:
            del self._scanned[session.id]


class _Resolved(NamedTuple):
    """One agent's last resolution and the inputs it read (see :meth:`MembershipResolver.try_resolve`)."""

    agent: Any
    session: Any
    parent_id: str | None
    parent: Any  # the live parent then (``None``: none)
    roster: Any  # the parent's roster then (``None``: no parent)
    membership: Membership | None  # the answer (``None``: a descriptor, never a member again)


class MembershipResolver:
    """Resolves :class:`Membership` for exact live agents.

    The answer is a function of a few inputs: the agent object, its live parent,
    the parent's roster and the agent's own log (a descriptor). Membership runs on
    every Team call, so each agent's last answer is kept with the inputs it read;
    a call whose inputs are the same objects answers from it, and only the
    liveness checks and the descriptor scan of new events run again. A custom
    teammate seam may read anything, so with one nothing is kept.

    Args:
        agents: The host's live-agent registry (the identity authority).
        state_of: The folded Team state of a Lead session (for a corrupt stream:
            the last valid state, with ``failure`` set).
        teammate: The teammate seam (default :func:`roster_teammate`).
    """

    def __init__(
        self,
        agents: AgentRegistry,
        state_of: Callable[[Session], TeamState],
        teammate: TeammateResolver = roster_teammate,
    ) -> None:
        self.agents = agents
        self.state_of = state_of
        self.teammate = teammate
        self.descriptors = DescriptorScan()
        self._known: dict[str, _Resolved] | None = {} if teammate is roster_teammate else None

    def is_live(self, agent: Agent) -> bool:
        """Whether ``agent`` is exactly the registered live agent for its id."""
        agent_id = getattr(agent, "id", None)
        return isinstance(agent_id, str) and self.agents.get(agent_id) is agent

    def try_resolve(self, agent: Agent) -> Membership | None:
        """The agent's membership, or ``None`` (never raises)."""
        try:
            agent_id = getattr(agent, "id", None)
            agents = self.agents
            if not isinstance(agent_id, str) or agents.get(agent_id) is not agent:
                return None
            known = self._known.get(agent_id) if self._known is not None else None
            if known is not None and known.agent is agent:
                parent_id = known.parent_id
                parent = agents.get(parent_id) if parent_id is not None else None
                if parent is known.parent and (
                    parent is None or self.state_of(parent.session).members is known.roster
                ):
                    membership = known.membership
                    # No Team stays no Team (a descriptor stays in the log); a Lead
                    # stays one until a descriptor is appended.
                    if membership is None or membership.role == "teammate":
                        return membership
                    if not self.descriptors.has_descriptor(known.session):
                        return membership
            return self._resolve(agent)
        except Exception as exc:
            log.warning("team.membership_failed", agent=getattr(agent, "id", None), error=repr(exc))
            return None

    def _resolve(self, agent: Agent) -> Membership | None:
        """Resolve a live agent from its inputs, and keep the answer with them."""
        session = agent.session
        parent_id = session.header.parent_session
        parent = self.agents.get(parent_id) if parent_id is not None else None
        roster = None
        found: Membership | None = None
        if parent is not None:
            state = self.state_of(parent.session)
            roster = state.members
            found = self.teammate(agent, parent, state)
        if found is None and not self.descriptors.has_descriptor(session):
            found = Membership(root=agent, team_id=agent.id, role="lead", name=LEAD_NAME, agent=agent)
        if self._known is not None:
            self._known[agent.id] = _Resolved(agent, session, parent_id, parent, roster, found)
        return found

    def forget(self, session: Session) -> None:
        """Drop what is kept for ``session`` (it left the live store)."""
        self.descriptors.forget(session)
        if self._known is not None:
            known = self._known.get(session.id)
            if known is not None and known.session is session:
                del self._known[session.id]

    def resolve(self, agent: Agent) -> Membership:
        """The agent's membership.

        Raises:
            TeamError: ``TEAM_NOT_MEMBER``.
        """
        found = self.try_resolve(agent)
        if found is None:
            raise TeamError("caller is not a live Team member", TeamCode.NOT_MEMBER)
        return found

    def root_of(self, agent: Agent) -> Agent | None:
        """The topmost live ancestor of ``agent`` (itself for a root); ``None`` if stale.

        Team mode belongs to this root and is shared by its whole tree.
        """
        if not self.is_live(agent):
            return None
        agents = self.agents
        known = self._known.get(agent.id) if self._known is not None else None
        # A kept resolution read the same parent id (the agent's session, and so its header, is fixed).
        if known is not None and known.agent is agent:
            parent_id = known.parent_id
        else:
            parent_id = agent.session.header.parent_session
        parent = agents.get(parent_id) if parent_id is not None else None
        if parent is None:  # a root (the usual Lead): no walk
            return agent
        grandparent_id = parent.session.header.parent_session
        if grandparent_id is None or agents.get(grandparent_id) is None:  # a teammate of a root Lead
            return parent
        current, seen = agent, {agent.id}
        while True:
            parent_id = current.session.header.parent_session
            parent = self.agents.get(parent_id) if parent_id is not None else None
            if parent is None or parent.id in seen:
                return current
            seen.add(parent.id)
            current = parent
