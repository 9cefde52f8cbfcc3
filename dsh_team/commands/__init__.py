"""Writers of a stopped run's Lead log from the command line: what the user says between runs.

Modules: :mod:`.send` (``dsh team send``: the user's message to a member),
:mod:`.plan` (``dsh team plan``: a plan decision), :mod:`.permit` (``dsh team
permit``: the answer to a permission ask). Each takes the decision the live
service takes, by the same pure rule (``decide_send``, ``decide_plan``,
``decide_permission``) with the run's own profile limits, on the Lead log folded
from disk under the Team's lock, and appends through the host's CLI write; a run
live in another process is refused (``TEAM_RUN_LIVE``). The read-only commands
(``show``, ``transcript``, ``diff``) are read models, in :mod:`dsh_team.views`.
"""
