"""Helpers for the Team tool adapters: a FAKE Team service for mapping unit tests only.

The fake records every call and answers with plain view objects shaped like the
real service's views. Integration tests use the real ``dsh_team`` service.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from host_spec.errors import DshError
from host_spec.records import AbortSignal, ToolCall


def member(name: str, *, id: str | None = None, role: str = "teammate", status: str = "inactive", **extra: Any) -> Any:
    extra.setdefault("diagnostics", [])
    return SimpleNamespace(id=id or f"sess-{name}", name=name, role=role, status=status, **extra)


def task(id: str, **fields: Any) -> Any:
    base = dict(
        id=id,
        revision=1,
        subject=f"subject {id}",
        description=f"description {id}",
        status="pending",
        blocked_by=[],
        write_scopes=[],
        owner_id=None,
        owner_name=None,
        ready=True,
        write_scope_warnings=[],
    )
    base.update(fields)
    return SimpleNamespace(**base)


class FakeService:
    """Answers like the Team service; records ``(method, caller, kwargs)`` for assertions."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, dict[str, Any]]] = []
        self.members: list[Any] = [member("lead", id="lead-session", role="lead", status="running")]
        self.tasks: list[Any] = []
        self.wait_result = SimpleNamespace(timed_out=False, position=7)
        self.costs: dict[str, Any] = {}

    def position(self, caller: Any) -> int:
        return 7

    def list_members(self, caller: Any) -> list[Any]:
        self.calls.append(("list_members", caller, {}))
        return list(self.members)

    def member_costs(self, caller: Any) -> dict[str, Any]:
        return dict(self.costs)

    async def spawn_teammate(self, caller: Any, **kwargs: Any) -> Any:
        self.calls.append(("spawn_teammate", caller, kwargs))
        return member(kwargs["name"], status="running", description=kwargs["description"],
                      provider=kwargs["provider"], context=kwargs["context"], model=None)

    def tool_allowlist(self, agent: Any) -> Any:
        return None

    async def send_message(self, caller: Any, **kwargs: Any) -> Any:
        self.calls.append(("send_message", caller, kwargs))
        return SimpleNamespace(message_id="team-message-1", status="accepted")

    async def plan_step(self, caller: Any, **kwargs: Any) -> Any:
        self.calls.append(("plan_step", caller, kwargs))
        return SimpleNamespace(message_id="team-message-2", status="queued", position=7)

    def interrupt(self, caller: Any, target: str) -> Any:
        self.calls.append(("interrupt", caller, {"target": target}))
        return SimpleNamespace(previous_status="running")

    def list_tasks(self, caller: Any) -> list[Any]:
        self.calls.append(("list_tasks", caller, {}))
        return list(self.tasks)

    def get_task(self, caller: Any, task_id: str) -> Any:
        self.calls.append(("get_task", caller, {"task_id": task_id}))
        return task(task_id, status="deleted", ready=False)

    async def create_task(self, caller: Any, **kwargs: Any) -> Any:
        self.calls.append(("create_task", caller, kwargs))
        return task("task-1", subject=kwargs["subject"], description=kwargs["description"],
                    blocked_by=kwargs.get("blocked_by", []), write_scopes=kwargs.get("write_scopes", []))

    async def update_task(self, caller: Any, **kwargs: Any) -> Any:
        self.calls.append(("update_task", caller, kwargs))
        return task(kwargs["task_id"], revision=kwargs["expected_revision"] + 1, status="in_progress",
                    owner_id="sess-x", owner_name="lead", ready=False)

    async def wait_for_change(self, caller: Any, timeout_ms: int, *, since: Any = None, signal: Any = None) -> Any:
        self.calls.append(("wait_for_change", caller, {"timeout_ms": timeout_ms, "signal": signal}))
        if not 10_000 <= timeout_ms <= 3_600_000:
            raise DshError("timeout_ms must be an integer from 10000 through 3600000", code="TEAM_INVALID_TIMEOUT")
        return self.wait_result


class StubScope:
    """Just enough of a scope for the reference tool registry (global registrations only)."""

    disposed = False
    label = "stub"

    def add(self, handle: Any) -> Any:
        return handle


class StubAgent:
    """A calling agent: the adapters only pass it through to the service as the credential."""

    def __init__(self, id: str = "lead-session") -> None:
        self.id = id
        self.scope = StubScope()


def tool_call(name: str, agent: Any, signal: AbortSignal | None = None) -> ToolCall:
    return ToolCall(call_id="call-1", name=name, agent=agent, signal=signal or AbortSignal())
