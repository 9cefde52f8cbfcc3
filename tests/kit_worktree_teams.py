"""The scripted worktree-mode Teams the worktree suites share, on one machine and across workers.

* :data:`CONFLICTING_TEAM`: two teammates edit the same file on their own tasks; the
  second to complete gets the Lead's branch merged in (``main conflicts in``), writes
  the file again and completes again.
* :func:`one_member_team`: one teammate writes a file and completes; told ``when``,
  it completes again (a crash or a lost worker cut its first completion).
"""

from __future__ import annotations

from typing import Any

__all__ = ["CONFLICTING_TEAM", "one_member_team"]


def _editor(name: str, task: str) -> list[dict[str, Any]]:
    return [
        {"text": "claim and edit", "tool_calls": [
            {"name": "team_task_update", "arguments": {"task_id": task, "expected_revision": 1, "action": "claim"}},
            {"name": "read_file", "arguments": {"path": "shared.txt"}},
            {"name": "write_file", "arguments": {"path": "shared.txt", "content": f"{name}\n"}},
            {"name": "write_file", "arguments": {"path": f"{name}.txt", "content": f"by {name}\n"}},
            {"name": "team_task_update", "arguments": {"task_id": task, "expected_revision": 2,
                                                       "action": "complete"}}]},
        {"when": "main conflicts in", "text": "resolve the markers and complete again", "tool_calls": [
            {"name": "read_file", "arguments": {"path": "shared.txt"}},
            {"name": "write_file", "arguments": {"path": "shared.txt", "content": f"{name}\n"}},
            {"name": "team_task_update", "arguments": {"task_id": task, "expected_revision": 2,
                                                       "action": "complete"}}]},
        {"text": "done"},
    ]  # fmt: skip


CONFLICTING_TEAM: dict[str, Any] = {
    "lead": [
        {"text": "plan", "tool_calls": [
            {"name": "team_task_create", "arguments": {"subject": "alice edits", "description": "d"}},
            {"name": "team_task_create", "arguments": {"subject": "bob edits", "description": "d"}},
            {"name": "spawn_teammate", "arguments": {"name": "alice", "description": "a", "prompt": "task-1"}},
            {"name": "spawn_teammate", "arguments": {"name": "bob", "description": "b", "prompt": "task-2"}}]},
        {"text": "waiting"},
    ],
    "alice": _editor("alice", "task-1"),
    "bob": _editor("bob", "task-2"),
}  # fmt: skip


def one_member_team(when: str) -> dict[str, Any]:
    """A Lead with one task for ``dana``, who writes ``dana.txt`` and completes; told ``when``, completes again."""
    return {
        "lead": [
            {"text": "plan", "tool_calls": [
                {"name": "team_task_create", "arguments": {"subject": "dana's task", "description": "d"}},
                {"name": "spawn_teammate", "arguments": {"name": "dana", "description": "d", "prompt": "task-1"}}]},
            {"text": "waiting"},
        ],
        "dana": [
            {"text": "work", "tool_calls": [
                {"name": "team_task_update", "arguments": {"task_id": "task-1", "expected_revision": 1,
                                                           "action": "claim"}},
                {"name": "write_file", "arguments": {"path": "dana.txt", "content": "by dana\n"}},
                {"name": "team_task_update", "arguments": {"task_id": "task-1", "expected_revision": 2,
                                                           "action": "complete"}}]},
            {"when": when, "text": "again", "tool_calls": [
                {"name": "team_task_update", "arguments": {"task_id": "task-1", "expected_revision": 2,
                                                           "action": "complete"}}]},
            {"text": "done"},
        ],
    }  # fmt: skip
