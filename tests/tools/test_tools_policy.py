"""The team:policy prompt section covers the ten policy topics, identically for every member."""

from __future__ import annotations

import pytest

from dsh_team_tools.policy import POLICY_TEXT, SECTION_NAME, TEAM_POLICY, policy_section

TOPICS = {
    "explicit delegation only": "create teammates only when the user explicitly asks",
    "shared directory, disjoint write scopes": "Split writes into disjoint scopes",
    "scopes and dependencies recorded on tasks": "record them as task write_scopes and order dependent work with blocked_by",
    "overlap is advisory": "Overlap warnings are advice, not locks",
    "stale edits are re-read and retried": "re-read it, reapply and retry",
    "unprotected writers are coordinated": "Shell commands, formatters, code generators and scripts bypass that check",
    "Lead reviews the final diff": "The Lead reviews the final diff and runs the tests",
    "addressing by target": "Address members by the target from spawn_teammate or list_agents",
    "delivery semantics": "reaches a running member at its next step and starts an inactive one",
    "status meanings": "Status inactive means no turn is running, not that work is done or failed",
    "creation statuses": "provisioning and failed are about member creation",
    "delivered item header": "begins with its message id and sender",
    "sends are durable": "durable even when its status is queued: never resend it",
    "task workflow": "claim with the current revision, do the work, complete",
    "readiness never starts an owner": "A task becoming ready never starts its owner",
    "check before waiting": "Before wait_agent, check list_agents",
    "waits are edge-triggered": "A wait sees only later changes and wakes nobody",
    "quiescence": "when nothing can change it returns reason quiescent with the stalled work",
    "cursor waits": "Pass since=<the last position you saw>: changes then lists what changed after it",
    "re-list a truncated delta": "re-list a truncated part",
    "Lead waits before answering": "Lead: before your final answer, wait until every teammate you need has finished",
}


class TestPolicy:
    @pytest.mark.parametrize("topic", sorted(TOPICS))
    def test_topic_is_covered(self, topic: str) -> None:
        """Each policy topic has its sentence in the section."""
        assert TOPICS[topic] in POLICY_TEXT

    def test_section_slot_and_name(self) -> None:
        """The section is team:policy at order slot 60 with the static text."""
        section = policy_section()
        assert (section.name, section.order, section.text) == (SECTION_NAME, TEAM_POLICY, POLICY_TEXT)
        assert (SECTION_NAME, TEAM_POLICY) == ("team:policy", 60)

    def test_identical_for_every_member(self) -> None:
        """The text is static (not per agent) and names no role, Team id or member."""
        assert isinstance(policy_section().text, str)
        assert "Your Team role" not in POLICY_TEXT
        assert "{" not in POLICY_TEXT

    def test_compact(self) -> None:
        """The section stays small: every byte is paid on every model step."""
        assert len(POLICY_TEXT.encode()) <= 2300  # the whole surface is bounded by M1 (6500)
