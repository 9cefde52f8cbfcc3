"""Builders for Team events and states shared by the ``tests/team`` suites.

Payloads are plain dicts (what a log line holds), so tests can also write the
malformed records a real log might contain.
"""

from __future__ import annotations

import copy

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from dsh_team.core.records import TaskRecord
from dsh_team.core.fold import evolve, replay
from dsh_team.core.state import TeamState, initial_state
from dsh_team.core.board import decide_create, decide_update
from dsh_team.core.task_view import task_view
from host_spec.events import Event, json_encode

TEAM = "lead"


def event(seq: int, type_: str, payload: Any) -> Event:
    """One committed event whose data is ``payload`` encoded as JSON."""
    return Event(seq=seq, time=1_000 + seq, type=type_, data=msgspec.Raw(json_encode(payload)))


def raw_event(seq: int, type_: str, data: bytes) -> Event:
    return Event(seq=seq, time=1_000 + seq, type=type_, data=msgspec.Raw(data))


def task(
    task_id: str,
    revision: int = 1,
    *,
    status: str = "pending",
    blocked_by: Iterable[str] = (),
    write_scopes: Iterable[str] = (),
    owner_id: str | None = None,
    subject: str = "subject",
    description: str = "description",
    team_id: str = TEAM,
    version: int = 2,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": task_id,
        "revision": revision,
        "subject": subject,
        "description": description,
        "status": status,
        "blocked_by": list(blocked_by),
        "write_scopes": list(write_scopes),
    }
    if owner_id is not None:
        body["owner_id"] = owner_id
    return {"version": version, "team_id": team_id, "task": body}


def member(
    member_id: str,
    name: str,
    phase: str = "provisioning",
    *,
    provider: str = "spawn",
    context: str = "fresh",
    description: str = "worker",
    error: str | None = None,
    team_id: str = TEAM,
    version: int = 2,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": member_id,
        "name": name,
        "description": description,
        "provider": provider,
        "context": context,
        "phase": phase,
    }
    if error is not None:
        body["error"] = error
    return {"version": version, "team_id": team_id, "member": body}


def queued(
    message_id: str,
    target_id: str,
    *,
    sender_id: str = TEAM,
    sender_name: str = "lead",
    content: list[Any] | None = None,
    team_id: str = TEAM,
    version: int = 2,
    index: int | None = None,
) -> dict[str, Any]:
    """A queued record; without ``index`` it has the older shape (no queue index)."""
    body = {
        "version": version,
        "team_id": team_id,
        "message": {
            "id": message_id,
            "sender_id": sender_id,
            "sender_name": sender_name,
            "target_id": target_id,
            "content": content if content is not None else [{"type": "text", "text": "hi"}],
        },
    }
    if index is not None:
        body["index"] = index
    return body


def delivered(message_id: str, target_id: str, *, team_id: str = TEAM, version: int = 2) -> dict[str, Any]:
    return {"version": version, "team_id": team_id, "message_id": message_id, "target_id": target_id}


def mode(enabled: bool, *, team_id: str = TEAM, version: int = 2) -> dict[str, Any]:
    return {"version": version, "team_id": team_id, "enabled": enabled}


class Log:
    """An in-memory Lead log that numbers events from 1."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, type_: str, payload: Any) -> Event:
        item = event(len(self.events) + 1, type_, payload)
        self.events.append(item)
        return item

    def add_raw(self, type_: str, data: bytes) -> Event:
        item = raw_event(len(self.events) + 1, type_, data)
        self.events.append(item)
        return item

    def task(self, *args: Any, **kwargs: Any) -> Event:
        return self.add("team/task", task(*args, **kwargs))

    def member(self, *args: Any, **kwargs: Any) -> Event:
        return self.add("team/member", member(*args, **kwargs))

    def queued(self, *args: Any, **kwargs: Any) -> Event:
        return self.add("team/message/queued", queued(*args, **kwargs))

    def delivered(self, *args: Any, **kwargs: Any) -> Event:
        return self.add("team/message/delivered", delivered(*args, **kwargs))

    def mode(self, *args: Any, **kwargs: Any) -> Event:
        return self.add("team/mode", mode(*args, **kwargs))

    def read(self, *args: Any, **kwargs: Any) -> Event:
        """A read receipt: same payload shape as a delivery acknowledgement."""
        return self.add("team/message/read", delivered(*args, **kwargs))

    def fold(self, team_id: str = TEAM) -> TeamState:
        return replay(self.events, team_id)


class BoardHarness:
    """Runs the pure board decisions and folds their snapshots like the journal does."""

    def __init__(self, *, max_tasks: int = 256, team_id: str = TEAM) -> None:
        self.log = Log()
        self.state = initial_state(team_id)
        self.max_tasks = max_tasks

    def commit(self, type_: str, payload: Any) -> None:
        self.state = evolve(self.state, self.log.add(type_, payload))
        assert self.state.failure is None, self.state.failure

    def add_member(self, member_id: str, name: str, phase: str = "active") -> None:
        self.commit("team/member", member(member_id, name))
        if phase != "provisioning":
            self.commit("team/member", member(member_id, name, phase))

    def commit_task(self, snapshot: Any) -> Any:
        """Fold a decided task snapshot as the journal would; return the task's view."""
        self.commit("team/task", TaskRecord(version=2, team_id=self.state.team_id, task=snapshot))
        return task_view(self.state, self.state.tasks.tasks[snapshot.id])

    def create(self, actor: Any, subject: Any = "subject", description: Any = "description", **kwargs: Any) -> Any:
        snapshot = decide_create(
            self.state, actor, subject=subject, description=description, max_tasks=self.max_tasks, **kwargs
        )
        return self.commit_task(snapshot)

    def update(self, actor: Any, task_id: str, action: str, revision: int | None = None, **kwargs: Any) -> Any:
        expected = self.state.tasks.tasks[task_id].revision if revision is None else revision
        snapshot = decide_update(
            self.state, actor, task_id=task_id, expected_revision=expected, action=action, **kwargs
        )
        return self.commit_task(snapshot)

    def view(self, task_id: str) -> Any:
        return task_view(self.state, self.state.tasks.tasks[task_id])


def apply_delta(seen: dict[str, Any], delta: Any, relist: dict[str, Any] | None = None) -> dict[str, Any]:
    """A reader's picture (``members``/``tasks``/``mail``/``sent`` dicts) after a wait's delta.

    Every delta row is a current value: a member's status, a task (``deleted``:
    drop it), a target's ``(queued, unread, read)`` counts, a message's
    ``(sender, target, status)``. A ``truncated`` part is re-listed: taken whole
    from ``relist`` (a fresh read), the contract a reader follows; without
    ``relist`` no part may be truncated.
    """
    after = copy.deepcopy(seen)
    assert relist is not None or delta.truncated == ()
    for part in delta.truncated:
        assert getattr(delta, part) == ()  # a truncated part carries no rows
        after[part] = copy.deepcopy(relist[part])  # type: ignore[index]
    for row in delta.members:
        after["members"][row.target] = row.status
    for row in delta.tasks:
        if row.status == "deleted":
            after["tasks"].pop(row.id, None)
        else:
            after["tasks"][row.id] = (row.status, row.revision, row.owner_name)
    for row in delta.mail:
        after["mail"][row.target] = (row.queued, row.unread, row.read)
    for row in delta.sent:
        after["sent"][row.message_id] = (row.sender, row.target, row.status)
    return after


def logged_mail(events: Sequence[Event]) -> dict[str, tuple[str, str, str]]:
    """``message id -> (sender name, target id, status)`` read from a Lead log's mail records.

    The oracle for a message's status once the fold has let a read message go:
    ``read`` with a receipt, ``delivered`` with a delivery record, else ``queued``.
    """
    found: dict[str, tuple[str, str, str]] = {}
    for item in events:
        if item.type == "team/message/queued":
            message = item.value()["message"]
            found[message["id"]] = (message["sender_name"], message["target_id"], "queued")
        elif item.type in ("team/message/delivered", "team/message/read"):
            message_id = item.value()["message_id"]
            sender, target, _ = found[message_id]
            found[message_id] = (sender, target, item.type.rsplit("/", 1)[1])
    return found

