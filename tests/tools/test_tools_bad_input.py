"""Bad model input to each Team tool yields an error result the model can act on, and calls nothing.

Calls go through the reference host's tool registry (the real decode, error and
rendering path) with a FAKE Team service, so the test sees exactly the tool result
a model would read.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from team_tools_fakes import FakeService, StubAgent

from dsh_team_tools.config import ToolsConfig
from dsh_team_tools.tools import build_tools
from host_spec.host.agents.tools import ToolRegistry
from host_spec.records import AbortSignal

MUTATING = {"spawn_teammate", "send_message", "interrupt", "create_task", "update_task", "wait_for_change"}


async def execute(service: FakeService, name: str, arguments: Any) -> Any:
    registry = ToolRegistry()
    for spec in build_tools(lambda: service, ToolsConfig()):
        registry.register(spec)
    raw = arguments if isinstance(arguments, str) else msgspec.json.encode(arguments).decode()
    return await registry.execute(StubAgent(), "call-1", name, raw, AbortSignal())


CASES = [
    # (tool, arguments, fragment of the error message)
    ("spawn_teammate", {"name": "a", "description": "d"}, "`prompt`"),
    ("spawn_teammate", {"name": 1, "description": "d", "prompt": "p"}, "`$.name`"),
    ("spawn_teammate", {"name": "a", "description": "d", "prompt": "p", "context": "clone"}, "`$.context`"),
    ("spawn_teammate", {"name": "a", "description": "d", "prompt": "p", "model": "x"}, "unknown field `model`"),
    ("send_message", {"target": "lead"}, "`message`"),
    ("send_message", {"target": ["lead"], "message": "m"}, "`$.target`"),
    ("send_message", {"agent_id": "x", "target": "lead", "message": "m"}, "unknown field `agent_id`"),
    ("list_agents", {"scope": "children"}, "unknown field `scope`"),
    ("list_agents", [], "Expected `object`"),
    ("wait_agent", {"timeout_ms": "30000"}, "`$.timeout_ms`"),
    ("wait_agent", {"timeout_ms": 1.5}, "`$.timeout_ms`"),
    ("wait_agent", {"timeout": 10000}, "unknown field `timeout`"),
    ("interrupt_agent", {}, "`target`"),
    ("interrupt_agent", {"target": None}, "`$.target`"),
    ("interrupt_agent", {"target": "a", "force": True}, "unknown field `force`"),
    ("team_task_create", {"subject": "s"}, "`description`"),
    ("team_task_create", {"subject": "s", "description": "d", "blocked_by": "task-1"}, "`$.blocked_by`"),
    ("team_task_create", {"subject": "s", "description": "d", "owner": "lead"}, "unknown field `owner`"),
    ("team_task_list", {"status": "deleted"}, "`$.status`"),
    ("team_task_list", {"ready": "yes"}, "`$.ready`"),
    ("team_task_list", {"page": 2}, "unknown field `page`"),
    ("team_task_get", {}, "`task_id`"),
    ("team_task_get", {"task_id": 3}, "`$.task_id`"),
    ("team_task_get", {"task_id": "task-1", "revision": 1}, "unknown field `revision`"),
    ("team_task_update", {"task_id": "task-1", "action": "claim"}, "`expected_revision`"),
    ("team_task_update", {"task_id": "task-1", "expected_revision": "1", "action": "claim"}, "`$.expected_revision`"),
    ("team_task_update", {"task_id": "task-1", "expected_revision": 1, "action": "steal"}, "`$.action`"),
    ("team_task_update", {"task_id": "task-1", "expected_revision": 1, "action": "claim", "x": 1}, "unknown field `x`"),
    ("team_task_update", "{not json", "invalid"),
]


class TestBadArguments:
    @pytest.mark.parametrize(("tool", "arguments", "fragment"), CASES)
    async def test_rejected_before_the_service(self, service: FakeService, tool: str, arguments: Any, fragment: str) -> None:
        """Missing, mistyped or unknown arguments give INVALID_ARGS naming the field; no service call."""
        result = await execute(service, tool, arguments)
        assert result.is_error
        assert result.error["code"] == "INVALID_ARGS"
        assert fragment in result.error["message"]
        assert result.content[0]["text"].startswith("Error: ")
        assert service.calls == []


class TestOutOfRange:
    @pytest.mark.parametrize("timeout", [9_999, 3_600_001])
    async def test_wait_timeout_is_the_service_error(self, service: FakeService, timeout: int) -> None:
        """timeout_ms 9999 / 3600001 reach the service, whose TEAM_INVALID_TIMEOUT is the result."""
        result = await execute(service, "wait_agent", {"timeout_ms": timeout})
        assert result.error == {"code": "TEAM_INVALID_TIMEOUT",
                                "message": "timeout_ms must be an integer from 10000 through 3600000"}
        assert [c[0] for c in service.calls] == ["wait_for_change"]

    @pytest.mark.parametrize(
        ("arguments", "message"),
        [
            ({"cursor": -1}, "cursor must be a non-negative safe integer"),
            ({"limit": 0}, "limit must be an integer from 1 through 100"),
            ({"limit": 101}, "limit must be an integer from 1 through 100"),
        ],
    )
    async def test_task_list_window(self, service: FakeService, arguments: dict[str, int], message: str) -> None:
        """cursor -1, limit 0 and limit 101 are INVALID_ARGS with the tool's own message; nothing mutates."""
        result = await execute(service, "team_task_list", arguments)
        assert result.error == {"code": "INVALID_ARGS", "message": message}
        assert result.content == [{"type": "text", "text": f"Error: {message}"}]
        assert not MUTATING & {c[0] for c in service.calls}

    async def test_empty_arguments_use_defaults(self, service: FakeService) -> None:
        """An empty argument string is the empty object: list_agents succeeds with compact JSON."""
        result = await execute(service, "list_agents", "")
        assert not result.is_error
        assert result.content == [{"type": "text", "text": '{"members":[{"target":"lead","role":"lead","status":"running",'
                                                            '"diagnostics":[]}],"position":7}'}]

    @pytest.mark.parametrize("prompt", ["", "   ", "\n\t"])
    async def test_a_blank_spawn_prompt_is_refused_before_the_service(self, service: FakeService, prompt: str) -> None:
        """The tool's identity reminder must not make a blank first task look non-blank."""
        result = await execute(service, "spawn_teammate", {"name": "a", "description": "d", "prompt": prompt})
        assert result.error == {"code": "TEAM_INVALID_ARGUMENT", "message": "prompt must not be blank"}
        assert service.calls == []
