"""ToolRegistry: layered registration, visibility, execution and error results."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from _agent_kit import EchoArgs, EchoOut, echo_tool, make_kit, memory_session
from host_spec.errors import DshError, RegistrationError
from host_spec.events import Cause
from host_spec.host.agents.scope import Scope, ScopeDisposedError
from host_spec.host.agents.tools import ToolRegistry
from host_spec.host.models.adapter import tool_schema
from host_spec.records import AbortSignal, ToolCall, ToolSpec
from host_spec.schema import tool_json_schema


def _agents():
    kit = make_kit()
    return kit.registry.create(memory_session("a"), name="a"), kit.registry.create(memory_session("b"), name="b")


def _spec(name: str, execute: Any, *, args_type: Any = EchoArgs, result_type: Any = EchoOut, **kw: Any) -> ToolSpec:
    return ToolSpec(name=name, description=name, args_type=args_type, result_type=result_type, execute=execute, **kw)


async def _exec(tools: ToolRegistry, agent: Any, name: str, args: str, signal: AbortSignal | None = None):
    return await tools.execute(agent, "c1", name, args, signal or AbortSignal(), turn=3, step=2)


class TestRegistration:
    def test_duplicate_in_global_layer_raises(self) -> None:
        """Two global tools with one name collide."""
        tools = ToolRegistry()
        tools.register(echo_tool())
        with pytest.raises(RegistrationError) as info:
            tools.register(echo_tool())
        assert info.value.code == "ALREADY_REGISTERED"
        assert 'tool "echo" is already registered globally' in str(info.value)

    def test_duplicate_in_one_scope_raises(self) -> None:
        """Two tools with one name in the same scope collide; other layers are independent."""
        a, b = _agents()
        tools = ToolRegistry()
        tools.register(echo_tool())
        tools.register(echo_tool(), scope=a.scope)
        tools.register(echo_tool(), scope=b.scope)
        with pytest.raises(RegistrationError):
            tools.register(echo_tool(), scope=a.scope)

    def test_scope_tool_shadows_global_for_that_agent_only(self) -> None:
        """An agent's scoped tool replaces the global one for that agent, not for others."""
        a, b = _agents()
        tools = ToolRegistry()
        glob, scoped = echo_tool(), echo_tool(description="scoped")
        tools.register(glob)
        tools.register(scoped, scope=a.scope)
        assert tools.visible(a) == [scoped]
        assert tools.visible(b) == [glob]
        assert tools.get(a, "echo") is scoped

    def test_scoped_handle_joins_the_scope(self) -> None:
        """A scoped registration dies with its scope; the empty layer is reclaimed."""
        a, _ = _agents()
        tools = ToolRegistry()
        handle = tools.register(echo_tool(), scope=a.scope)
        assert a.scope.live_count() == 1
        a.scope.dispose()
        assert handle.disposed
        assert tools.visible(a) == []
        assert tools.scoped_count() == 0

    def test_register_into_disposed_scope_raises(self) -> None:
        """Nothing is registered into a dead scope."""
        scope = Scope(label="agent:gone")
        scope.dispose()
        tools = ToolRegistry()
        with pytest.raises(ScopeDisposedError):
            tools.register(echo_tool(), scope=scope)
        assert tools.scoped_count() == 0

    def test_stale_handle_does_not_remove_a_newer_registration(self) -> None:
        """Disposing an old handle twice never unregisters its successor."""
        tools = ToolRegistry()
        old = tools.register(echo_tool())
        old.dispose()
        new_spec = echo_tool(description="new")
        tools.register(new_spec)
        old.dispose()
        assert tools.visible(None) == [new_spec]

    def test_visible_is_sorted_and_applies_available(self) -> None:
        """Visible tools are name-ordered; ``available`` hides a tool per agent; a failing predicate hides it."""
        a, b = _agents()
        tools = ToolRegistry()

        def broken(agent: Any) -> bool:
            raise RuntimeError("bad predicate")

        tools.register(echo_tool("zeta"))
        tools.register(echo_tool("alpha", available=lambda agent: agent.name == "a"))
        tools.register(echo_tool("broken", available=broken))
        assert [t.name for t in tools.visible(a)] == ["alpha", "zeta"]
        assert [t.name for t in tools.visible(b)] == ["zeta"]
        assert [t.name for t in tools.visible(None)] == ["zeta"]


class TestExecute:
    async def test_result_is_rendered_as_compact_json(self) -> None:
        """A successful call renders its value as one compact JSON text block."""
        tools = ToolRegistry()
        tools.register(echo_tool())
        result = await _exec(tools, None, "echo", '{"text": "hi"}')
        assert result.content == [{"type": "text", "text": '{"echoed":"hi"}'}]
        assert (result.is_error, result.error, result.turn, result.step, result.call_id) == (False, None, 3, 2, "c1")

    async def test_empty_arguments_mean_an_empty_object(self) -> None:
        """``""`` decodes as ``{}``."""

        class Opt(msgspec.Struct, forbid_unknown_fields=True):
            n: int = 7

        async def body(args: Opt, call: ToolCall) -> dict[str, int]:
            return {"n": args.n}

        tools = ToolRegistry()
        tools.register(_spec("opt", body, args_type=Opt, result_type=dict[str, int]))
        assert (await _exec(tools, None, "opt", "")).content[0]["text"] == '{"n":7}'
        assert (await _exec(tools, None, "opt", b"  ")).content[0]["text"] == '{"n":7}'

    async def test_unknown_tool_is_an_error_result(self) -> None:
        """Calling an unregistered tool yields UNKNOWN_TOOL, never an exception."""
        result = await _exec(ToolRegistry(), None, "nope", "{}")
        assert result.is_error
        assert result.error == {"code": "UNKNOWN_TOOL", "message": 'unknown tool "nope"'}
        assert result.content == [{"type": "text", "text": 'Error: unknown tool "nope"'}]

    async def test_unavailable_tool_is_unknown(self) -> None:
        """A tool hidden by ``available`` is not callable either."""
        a, _ = _agents()
        tools = ToolRegistry()
        tools.register(echo_tool(available=lambda agent: False))
        assert (await _exec(tools, a, "echo", '{"text":"x"}')).error["code"] == "UNKNOWN_TOOL"

    @pytest.mark.parametrize(
        ("arguments", "fragment"),
        [
            ('{"text": 5}', "Expected `str`, got `int` - at `$.text`"),
            ("{}", "Object missing required field `text`"),
            ('{"text": "x", "extra": 1}', "Object contains unknown field `extra`"),
            ("{not json", "JSON is malformed"),
        ],
    )
    async def test_arguments_failing_the_schema_are_invalid_args(self, arguments: str, fragment: str) -> None:
        """Bad arguments give INVALID_ARGS with msgspec's explanation; the body never runs."""
        ran: list[Any] = []

        async def body(args: Any, call: Any) -> EchoOut:
            ran.append(args)
            return EchoOut(echoed="")

        tools = ToolRegistry()
        tools.register(_spec("echo", body))
        result = await _exec(tools, None, "echo", arguments)
        assert result.error["code"] == "INVALID_ARGS"
        assert fragment in result.error["message"]
        assert result.content[0]["text"].startswith('Error: invalid arguments for "echo": ')
        assert ran == []

    async def test_domain_error_keeps_its_code(self) -> None:
        """A DshError raised by the body becomes an error result with that code and message."""

        async def body(args: Any, call: Any) -> Any:
            raise DshError("no such member", code="TEAM_MEMBER_NOT_FOUND")

        tools = ToolRegistry()
        tools.register(_spec("echo", body))
        result = await _exec(tools, None, "echo", '{"text":"x"}')
        assert result.error == {"code": "TEAM_MEMBER_NOT_FOUND", "message": "no such member"}
        assert result.content[0]["text"] == "Error: no such member"

    async def test_a_group_of_coded_errors_keeps_the_first_code(self) -> None:
        """Two coded failures at once (a write fenced, its failure record fenced too) are still a coded answer."""

        async def body(args: Any, call: Any) -> Any:
            raise BaseExceptionGroup("both failed", [DshError("write refused", code="SESSION_FENCED"),
                                                     DshError("record refused", code="TEAM_PERSISTENCE_UNCONFIRMED")])

        tools = ToolRegistry()
        tools.register(_spec("echo", body))
        result = await _exec(tools, None, "echo", '{"text":"x"}')
        assert result.error == {"code": "SESSION_FENCED", "message": "write refused; record refused"}

    async def test_a_group_with_an_uncoded_error_is_unknown(self) -> None:
        async def body(args: Any, call: Any) -> Any:
            raise ExceptionGroup("both failed", [DshError("refused", code="SESSION_FENCED"), KeyError("k")])

        tools = ToolRegistry()
        tools.register(_spec("echo", body))
        assert (await _exec(tools, None, "echo", '{"text":"x"}')).error["code"] == "UNKNOWN"

    async def test_unexpected_exception_is_unknown_not_a_crash(self) -> None:
        """A bug in a tool is reported to the model as code UNKNOWN."""

        async def body(args: Any, call: Any) -> Any:
            raise KeyError("k")

        tools = ToolRegistry()
        tools.register(_spec("echo", body))
        result = await _exec(tools, None, "echo", '{"text":"x"}')
        assert result.error["code"] == "UNKNOWN"
        assert "KeyError" in result.error["message"]

    async def test_exception_after_abort_is_aborted(self) -> None:
        """A body that fails because its call was aborted reports ABORTED."""

        async def body(args: Any, call: ToolCall) -> Any:
            call.signal.abort("user")
            raise RuntimeError("interrupted")

        tools = ToolRegistry()
        tools.register(_spec("echo", body))
        result = await _exec(tools, None, "echo", '{"text":"x"}')
        assert result.error == {"code": "ABORTED", "message": "tool call aborted"}

    async def test_output_not_matching_result_type_is_invalid_tool_output(self) -> None:
        """The host validates results against the declared type."""

        async def body(args: Any, call: Any) -> Any:
            return {"echoed": 42}

        tools = ToolRegistry()
        tools.register(_spec("echo", body))
        result = await _exec(tools, None, "echo", '{"text":"x"}')
        assert result.error["code"] == "INVALID_TOOL_OUTPUT"
        assert "Expected `str`, got `int`" in result.error["message"]

    async def test_unencodable_output_is_invalid_tool_output(self) -> None:
        """A value JSON cannot carry is rejected, not crashed on."""

        async def body(args: Any, call: Any) -> Any:
            return object()

        tools = ToolRegistry()
        tools.register(_spec("echo", body, result_type=Any))
        assert (await _exec(tools, None, "echo", '{"text":"x"}')).error["code"] == "INVALID_TOOL_OUTPUT"

    async def test_body_sees_the_call_context_and_appends_with_its_cause(self) -> None:
        """``call`` carries the live agent, id and signal; appends in the body record (agent, call, tool)."""
        a, _ = _agents()
        seen: list[ToolCall] = []

        async def body(args: EchoArgs, call: ToolCall) -> EchoOut:
            seen.append(call)
            call.agent.session.append("test/note", {"text": args.text})
            return EchoOut(echoed=args.text)

        tools = ToolRegistry()
        tools.register(_spec("echo", body), scope=a.scope)
        signal = AbortSignal()
        await _exec(tools, a, "echo", '{"text":"x"}', signal)
        assert seen[0].agent is a and seen[0].call_id == "c1" and seen[0].signal is signal and seen[0].name == "echo"
        assert a.session.events[-1].cause == Cause(agent_id="a", call_id="c1", tool="echo")


class TestSchema:
    def test_root_and_nested_structs_are_inlined(self) -> None:
        """The model sees one self-contained object schema (the contract's generator)."""
        result = tool_schema(_spec("t", None, args_type=Outer))
        assert result == tool_json_schema(Outer)
        assert result["type"] == "object" and result["required"] == ["inner"]
        assert result["additionalProperties"] is False
        assert result["properties"]["inner"]["properties"] == {"x": {"type": "integer"}}
        assert "$defs" not in result
        assert tool_schema(_spec("t2", None, args_type=Outer)) is result  # cached per type

    def test_flat_struct_has_no_defs(self) -> None:
        """A flat argument Struct gives a self-contained object schema."""
        result = tool_schema(echo_tool())
        assert "$defs" not in result and "$ref" not in result
        assert result["properties"] == {"text": {"type": "string"}}

    def test_self_referencing_root_keeps_its_definition(self) -> None:
        """A recursive args type stays resolvable."""
        result = tool_schema(_spec("tree", None, args_type=Node))
        assert result["type"] == "object"
        assert "Node" in result["$defs"]

    def test_non_struct_args_type(self) -> None:
        """A plain mapping type is passed through as is."""
        assert tool_schema(_spec("m", None, args_type=dict[str, int])) == {
            "type": "object",
            "additionalProperties": {"type": "integer"},
        }


class Inner(msgspec.Struct):
    x: int


class Outer(msgspec.Struct, forbid_unknown_fields=True):
    inner: Inner
    label: str = ""


class Node(msgspec.Struct):
    children: list[Node] = []
