"""The Lead log as the Team's journal: serialized read-check-append, change waits, and service lifetime.

Modules: :mod:`.journal` (one Lead session's folded state and its serialized
section), :mod:`.waits` (``wait_for_change`` waiters per Team), :mod:`.lifecycle`
(admission, tracked work and bounded disposal).
"""

from dsh_team.log.journal import Append, Journal, Journals, TeamFolds
from dsh_team.log.lifecycle import Lifecycle
from dsh_team.log.waits import WAIT_MAX_MS, WAIT_MIN_MS, Activity, WaitResult, check_since

__all__ = [
    "Append",
    "Journal",
    "Journals",
    "TeamFolds",
    "Lifecycle",
    "WAIT_MAX_MS",
    "WAIT_MIN_MS",
    "Activity",
    "WaitResult",
    "check_since",
]
