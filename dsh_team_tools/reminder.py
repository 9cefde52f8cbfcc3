"""The identity ``<system-reminder>`` that opens a teammate's first user message.

A teammate must know who it is and how to reach the Lead even when the host
suppresses runtime context, when its history is forked, and after a cold resume.
Putting the facts in the first *user message* (a separate text block before the
task) makes them part of the durable conversation: forks inherit it, resume
replays it, and nothing has to scan for it or re-insert it later. It names no
Team id: members address each other by name only.
"""

from __future__ import annotations

from host_spec.messages import ContentBlock, text_block

__all__ = ["identity_reminder", "reminder_block"]


def identity_reminder(name: str) -> str:
    """The reminder text for teammate ``name`` (trimmed), ending with a blank line."""
    member = name.strip()
    return (
        "<system-reminder>\n"
        f'You are teammate "{member}" of an Agent Team.\n'
        'Your Team Lead is named "lead".\n'
        "Use list_agents({}) to find your teammates and their names.\n"
        'Message the Lead with send_message({"target": "lead", "message": "..."}).\n'
        'Message a teammate with send_message({"target": "<teammate name>", "message": "..."}).\n'
        "</system-reminder>\n\n"
    )


def reminder_block(name: str) -> ContentBlock:
    """:func:`identity_reminder` as its own text block (kept apart from the task text)."""
    return text_block(identity_reminder(name))
