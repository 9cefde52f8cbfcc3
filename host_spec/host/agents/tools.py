"""The tool registry: global and per-scope layers, and the execution pipeline.

A tool error is a tool *result* the model can read and react to, never a turn
failure: every failure mode (unknown tool, bad arguments, a domain error, a bug in
the tool, an output that breaks its declared type) ends as an error result with a
stable code. Registrations are layered so a plugin can give one agent its own
version of a global tool (Team members get Team ``send_message``) without
touching anyone else.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs
import msgspec
import structlog

from host_spec.errors import DshError, coded_leaves
from host_spec.events import Cause, json_encode
from host_spec.messages import ToolResultMessage, text_block
from host_spec.records import AbortSignal, Handle, ToolCall, ToolSpec

from host_spec.host.store.context import cause_scope
from host_spec.host.agents.layers import Layers

if TYPE_CHECKING:
    from host_spec.protocols import Agent, Scope

__all__ = ["ToolRegistry", "error_result"]

log = structlog.get_logger(__name__)

# Built once per args type and shared by every registration of that type (Team tools
# are registered once per member scope with the same Structs).
_decoders: dict[Any, msgspec.json.Decoder] = {}
_EMPTY_ARGS: Final = b"{}"


def _decoder(args_type: Any) -> msgspec.json.Decoder:
    decoder = _decoders.get(args_type)
    if decoder is None:
        decoder = _decoders[args_type] = msgspec.json.Decoder(args_type)
    return decoder


def error_result(call_id: str, name: str, code: str, message: str, *, turn: int = 0, step: int = 0) -> ToolResultMessage:
    """An error tool result: text ``Error: <message>`` and ``error={"code", "message"}``."""
    return ToolResultMessage(
        turn=turn,
        step=step,
        call_id=call_id,
        name=name,
        content=[text_block(f"Error: {message}")],
        is_error=True,
        error={"code": code, "message": message},
    )


@attrs.define(eq=False)
class _Entry:
    spec: ToolSpec
    decoder: msgspec.json.Decoder


@attrs.define(eq=False)
class ToolRegistry:
    """Global tools plus one lazy layer per scope (implements ``protocols.ToolRegistry``).

    A scope layer shadows a same-named global tool for that scope's agent only.
    Empty scope layers are reclaimed, so disposed agents leave nothing behind.

    Attributes:
        pre_call: Asked ``(agent, tool name)`` after the arguments decoded and before
            the body runs (the host's ``dsh_tool_pre_call`` veto); a ``DshError`` it
            raises becomes the call's error result and the tool does not run.
    """

    _layers: Layers[_Entry] = attrs.field(factory=lambda: Layers("tool", "tool"), init=False)
    pre_call: Callable[[Agent | None, str], None] | None = None
    #: Runs a call somewhere else when it says so (a worker, on a shared store):
    #: ``await placement.run_tool(agent, name, call_id, raw, signal, turn=, step=)``
    #: returns the result, or ``None`` to run the call here. Asked after ``pre_call``.
    placement: Any = None
    #: The host's permission gate (:class:`~host_spec.host.agents.permission_gate.PermissionGate`):
    #: ``await permissions.check(agent, call_id, name, raw, signal, turn=, step=)`` returns a
    #: refusal, or ``None`` to go on. Asked first, before ``pre_call``.
    permissions: Any = None
    #: Scope -> the only tool names its agent may use (a role's allowlist).
    _allowed: dict[Scope, frozenset[str]] = attrs.field(factory=dict, init=False)

    def register(self, spec: ToolSpec, *, scope: Scope | None = None) -> Handle:
        """Register ``spec`` globally or into ``scope`` (the handle is also added to the scope).

        Raises:
            RegistrationError: a tool with this name already exists in that same layer.
            ScopeDisposedError: ``scope`` is already disposed.
        """
        return self._layers.add(spec.name, _Entry(spec, _decoder(spec.args_type)), scope)

    def scoped_count(self) -> int:
        """How many agent scopes hold registrations here; a disposed scope leaves none behind."""
        return self._layers.scoped_count()

    def restrict(self, scope: Scope, allowed: Collection[str]) -> Handle:
        """Only tools named in ``allowed`` for the agent of ``scope`` until disposed (see the protocol)."""
        names = frozenset(allowed)
        self._allowed[scope] = names

        def remove() -> None:
            if self._allowed.get(scope) is names:
                del self._allowed[scope]

        handle = Handle(remove, label="tool-allowlist")
        scope.add(handle)
        return handle

    def _lookup(self, agent: Agent | None, name: str) -> _Entry | None:
        if agent is not None and self._allowed and name not in self._allowed.get(agent.scope, (name,)):
            return None  # not on the agent's allowlist
        # A hidden scoped tool shadows nothing: the global tool of that name stays usable.
        return self._layers.lookup(None if agent is None else agent.scope, name, lambda e: _available(e.spec, agent))

    def get(self, agent: Agent | None, name: str) -> ToolSpec | None:
        """The tool ``name`` as ``agent`` sees it (scope over global, ``available`` applied)."""
        entry = self._lookup(agent, name)
        return None if entry is None else entry.spec

    def visible(self, agent: Agent | None) -> Sequence[ToolSpec]:
        """Tools ``agent`` can use now, sorted by name (scope layer over global)."""
        merged = self._layers.merged(None if agent is None else agent.scope, lambda e: _available(e.spec, agent))
        allowed = self._allowed.get(agent.scope) if agent is not None and self._allowed else None
        return [merged[name].spec for name in sorted(merged) if allowed is None or name in allowed]

    async def execute(
        self,
        agent: Agent | None,
        call_id: str,
        name: str,
        arguments_json: str | bytes,
        signal: AbortSignal,
        *,
        turn: int = 0,
        step: int = 0,
    ) -> ToolResultMessage:
        """Run one tool call and return its result message; never raises for a tool failure.

        Appends made by the tool body carry ``cause = (agent, call_id, tool)``.
        """
        entry = self._lookup(agent, name)
        if entry is None:
            return error_result(call_id, name, "UNKNOWN_TOOL", f'unknown tool "{name}"', turn=turn, step=step)
        raw = arguments_json.encode() if isinstance(arguments_json, str) else arguments_json
        try:
            args = entry.decoder.decode(raw if raw.strip() else _EMPTY_ARGS)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            return error_result(call_id, name, "INVALID_ARGS", f'invalid arguments for "{name}": {exc}', turn=turn, step=step)
        spec = entry.spec
        call = ToolCall(call_id=call_id, name=name, agent=agent, signal=signal)
        cause = Cause(agent_id=agent.id if agent is not None else None, call_id=call_id, tool=name)
        try:
            with cause_scope(cause):
                if self.permissions is not None:
                    refusal = await self.permissions.check(agent, call_id, name, raw, signal, turn=turn, step=step)
                    if refusal is not None:
                        return refusal
                if self.pre_call is not None:
                    self.pre_call(agent, name)
                if self.placement is not None:
                    placed = await self.placement.run_tool(agent, name, call_id, raw, signal, turn=turn, step=step)
                    if placed is not None:
                        return placed
                value = await spec.execute(args, call)
        except DshError as exc:
            return error_result(call_id, name, exc.code, exc.message, turn=turn, step=step)
        except Exception as exc:
            coded = coded_leaves(exc)
            if coded:  # a group of coded failures (a creation and its failure record both refused): still coded
                message = "; ".join(leaf.message for leaf in coded)
                return error_result(call_id, name, coded[0].code, message, turn=turn, step=step)
            if signal.aborted:
                return error_result(call_id, name, "ABORTED", "tool call aborted", turn=turn, step=step)
            log.exception("tool failed", tool=name, call_id=call_id)
            return error_result(call_id, name, "UNKNOWN", f"{type(exc).__name__}: {exc}", turn=turn, step=step)
        try:
            value = msgspec.convert(value, spec.result_type)
            text = json_encode(value).decode()
        except (msgspec.ValidationError, TypeError, msgspec.EncodeError) as exc:
            message = f'tool "{name}" returned an invalid result: {exc}'
            return error_result(call_id, name, "INVALID_TOOL_OUTPUT", message, turn=turn, step=step)
        return ToolResultMessage(turn=turn, step=step, call_id=call_id, name=name, content=[text_block(text)])


def _available(spec: ToolSpec, agent: Agent | None) -> bool:
    if spec.available is None:
        return True
    if agent is None:
        return False
    try:
        return bool(spec.available(agent))
    except Exception:  # a broken predicate hides the tool rather than breaking the step
        log.exception("tool availability check failed", tool=spec.name)
        return False
