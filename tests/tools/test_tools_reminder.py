"""The identity reminder that opens a teammate's first message."""

from __future__ import annotations

from dsh_team_tools.reminder import identity_reminder, reminder_block

PINNED = (
    "<system-reminder>\n"
    'You are teammate "reviewer" of an Agent Team.\n'
    'Your Team Lead is named "lead".\n'
    "Use list_agents({}) to find your teammates and their names.\n"
    'Message the Lead with send_message({"target": "lead", "message": "..."}).\n'
    'Message a teammate with send_message({"target": "<teammate name>", "message": "..."}).\n'
    "</system-reminder>\n\n"
)


class TestIdentityReminder:
    def test_exact_text(self) -> None:
        """The reminder text is pinned byte for byte."""
        assert identity_reminder("reviewer") == PINNED

    def test_name_is_trimmed(self) -> None:
        """Surrounding whitespace of the name does not reach the reminder."""
        assert identity_reminder("  reviewer\t") == PINNED

    def test_carries_no_team_id(self) -> None:
        """Members address each other by name: the reminder holds no session or Team id."""
        text = identity_reminder("reviewer").lower()
        assert "team id" not in text and "session" not in text

    def test_block_is_a_separate_text_block(self) -> None:
        """The reminder is one text block of its own."""
        assert reminder_block("reviewer") == {"type": "text", "text": PINNED}
