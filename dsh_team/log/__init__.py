"""The Lead log as the Team's journal: serialized read-check-append, change waits, and service lifetime.

Modules: :mod:`.journal` (one Lead session's serialized section and shared flush),
:mod:`.lead_fold` (its incrementally folded state and the ``TeamFolds`` provider it
adopts), :mod:`.journals` (the journal of each live session), :mod:`.waits`
(``wait_for_change`` waiters per Team), :mod:`.lifecycle` (admission, tracked work and
bounded disposal), :mod:`.quiescence` (the quiescence watch: one ``team/quiescent``
record when nothing can progress), :mod:`.membership` (who may call, as Lead or teammate:
an agent's place in a Team, resolved on every call), :mod:`.member_records` (each
member's latest side record of a kind -- role, shutdown, worktree, merge -- folded
incrementally beside the Team fold).
"""

from dsh_team.log.journal import Append, Journal
from dsh_team.log.journals import Journals
from dsh_team.log.lead_fold import TeamFolds
from dsh_team.log.lifecycle import Lifecycle
from dsh_team.log.membership import Membership, MembershipResolver, TeammateResolver, roster_teammate
from dsh_team.log.quiescence import QuiescenceWatch, quiet_result
from dsh_team.log.waits import WAIT_MAX_MS, WAIT_MIN_MS, Activity, WaitResult, check_since

__all__ = [
    "Append",
    "Journal",
    "Journals",
    "TeamFolds",
    "Lifecycle",
    "Membership",
    "MembershipResolver",
    "TeammateResolver",
    "roster_teammate",
    "QuiescenceWatch",
    "quiet_result",
    "WAIT_MAX_MS",
    "WAIT_MIN_MS",
    "Activity",
    "WaitResult",
    "check_since",
]
