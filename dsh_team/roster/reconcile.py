"""Recovery reconciliation: settle ``provisioning`` records a crash left open.

A ``provisioning`` record whose child session is not live has lost its creator
(the process died, or the plugin was reloaded mid-creation). Nothing but the
child's own log can say how far the creation got, and the Team log never held
the initial prompt, so the child log is the proof: the member is ``active`` only
if the stored child

* names this Lead as its direct parent (``parent_session``),
* carries a ``continuable`` descriptor from the recorded provider in its own
  events (a fork's inherited descriptor does not count), and
* durably holds a user-sourced message (the initial prompt: pending in the
  inbox, or already in the history).

Anything else -- missing, unreadable, another lineage or provider, no accepted
prompt -- is ``failed`` with the reason. A live child is skipped: its creator
still owns the terminal edge. The terminal record is written in the Lead's
serialized section only if the record is still ``provisioning``, so a creator
that settled it concurrently wins.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Final

import structlog

from dsh_team.errors import render_reason
from dsh_team.core.records import TEAM_MEMBER, VERSION, MemberRecord
from dsh_team.core.snapshots import TeamMemberSnapshot
from dsh_team.log.journal import Append
from dsh_team.mail.message_index import fold_messages, own_descriptor
from dsh_team.core.state import TeamState

if TYPE_CHECKING:
    from host_spec.protocols import Host, PersistedSession

    from dsh_team.log.journal import Journal

__all__ = ["MISMATCH", "judge", "reconcile"]

log = structlog.get_logger(__name__)

MISMATCH: Final = "persisted child Session does not match the provisioned continuation"


def judge(stored: PersistedSession, team_id: str, member: TeamMemberSnapshot) -> str | None:
    """``None`` when ``stored`` proves the provisioning succeeded, else the failure text."""
    descriptor = own_descriptor(stored.own_events())
    if (
        stored.header.parent_session == team_id
        and descriptor is not None
        and descriptor.mode == "continuable"
        and descriptor.provider == member.provider
        and fold_messages(stored.own_events()).holds_user_message()
    ):
        return None
    return MISMATCH


async def reconcile(host: Host, journal: Journal, only: Collection[str] | None = None) -> int:
    """Settle the open ``provisioning`` records of ``journal``'s Team whose child is not live.

    Args:
        only: Restrict to these member ids (the records that existed when the Lead
            started); ``None`` means every open record.

    Returns:
        How many terminal records this call wrote.

    Raises:
        TeamError: ``TEAM_STREAM_FAILED``, ``TEAM_PERSISTENCE_UNCONFIRMED``.
    """
    written = 0
    for member in journal.authoritative().members.listed():
        if member.phase != "provisioning" or (only is not None and member.id not in only):
            continue
        if host.sessions.get(member.id) is not None:
            continue
        try:
            stored = await host.sessions.inspect(member.id)
        except Exception as exc:
            error: str | None = f"child Session recovery failed: {render_reason(exc)}"
        else:
            error = judge(stored, journal.team_id, member)
        terminal = TeamMemberSnapshot(
            id=member.id,
            name=member.name,
            description=member.description,
            provider=member.provider,
            context=member.context,
            phase="active" if error is None else "failed",
            error=error,
        )

        wrote: list[bool] = []

        def settle(state: TeamState, terminal: TeamMemberSnapshot = terminal, wrote: list[bool] = wrote) -> Append | None:
            if state.members.members[terminal.id].phase != "provisioning":
                return None
            wrote.append(True)
            return Append(TEAM_MEMBER, MemberRecord(version=VERSION, team_id=journal.team_id, member=terminal))

        await journal.transact(settle, what=f'recovery of teammate "{member.name}"')
        if wrote:
            written += 1
            log.info("team.member_reconciled", team=journal.team_id, member=member.id, phase=terminal.phase, error=error)
    return written
