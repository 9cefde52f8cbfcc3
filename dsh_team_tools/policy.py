"""The ``team:policy`` system-prompt section: how a member behaves inside a Team.

The text is identical for the Lead and every teammate (role and identity come
from the conversation, never from the system prompt), so a teammate's prompt
prefix equals its Lead's and prompt caches are shared. It is paid for on every
model step, so it stays compact: one line per rule, no examples.
"""

from __future__ import annotations

from typing import Final

from host_spec.records import PromptSection

__all__ = ["TEAM_POLICY", "SECTION_NAME", "POLICY_TEXT", "policy_section"]

#: Order slot of the section (after persona, before tool guidance).
TEAM_POLICY: Final = 60
SECTION_NAME: Final = "team:policy"

POLICY_TEXT: Final = """\
# Agent Team
You may be in an Agent Team: a Lead (target "lead") and the teammates it creates, sharing one task board.
- Delegate only on request: create teammates only when the user explicitly asks for teammates or an Agent Team.
- All members share one working directory; every edit is visible at once. Split writes into disjoint scopes, \
record them as task write_scopes and order dependent work with blocked_by. Overlap warnings are advice, not locks.
- Prefer the file read/edit/write tools; if an edit fails because the file changed, re-read it, reapply and retry. \
Shell commands, formatters, code generators and scripts bypass that check: coordinate them. \
The Lead reviews the final diff and runs the tests.
- Address members by the target from spawn_teammate or list_agents: in send_message, interrupt_agent and as task owner.
- send_message reaches a running member at its next step and starts an inactive one.
- Status inactive means no turn is running, not that work is done or failed; provisioning and failed are about member creation.
- A delivered Team message begins with its message id and sender. A successful send is durable even when its status \
is queued: never resend it. list_agents pending counts a member's undelivered messages.
- Tasks: team_task_list, team_task_get, claim with the current revision, do the work, complete. \
A task becoming ready never starts its owner; tell them with send_message.
- Before wait_agent, check list_agents that a member you need is running or provisioning, else send_message first. \
A wait sees only later changes and wakes nobody; when nothing can change it returns reason quiescent with the stalled work. \
Pass since=<the last position you saw>: changes then lists what changed after it, your sent messages' \
status included (re-list a truncated part).
- complete runs the task's checks: if one fails, fix and retry. \
Writes refused without an approved plan: send_message plan=submit to lead; the Lead replies approve or reject.
- A shutdown request: answer at once with send_message shutdown="approve" (then stop) or "decline" and why.
- Lead: before your final answer, wait until every teammate you need has finished."""


def policy_section() -> PromptSection:
    """The section to register into a member's scope (same text for every member)."""
    return PromptSection(name=SECTION_NAME, order=TEAM_POLICY, text=POLICY_TEXT)
