"""Concrete records shared by hosts and plugins.

These are values, not services: a host and a plugin must agree on their exact
shape, so they live in the contract rather than behind a protocol. ``Handle``,
``AbortSignal`` and ``CancelCause`` are defined in :mod:`host_spec.lifetime` (the
live Protocols need them, and the tool records here need the live agent) and are
re-exported here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from host_spec.lifetime import AbortSignal, CancelCause, Handle

if TYPE_CHECKING:
    from host_spec.live import Agent

__all__ = [
    "Violation",
    "Handle",
    "AbortSignal",
    "ToolSpec",
    "ToolCall",
    "PromptSection",
    "CancelCause",
]


@attrs.frozen
class Violation:
    """Returned by a ``dsh_pre_append`` implementation to veto an append.

    Attributes:
        reason: Why the event would break the stream; becomes the ``InvariantError`` text.
        rule: Short stable rule name (``"member-must-begin-provisioning"``) for tests and logs.
    """

    reason: str
    rule: str = "invariant"


@attrs.frozen
class ToolCall:
    """The execution context of one tool call (``exec`` in the original).

    Attributes:
        call_id: The model's tool-call id.
        name: Tool name.
        agent: The exact live calling agent; the authority credential for Team and subagents.
        signal: Aborted when the calling turn is cancelled.
    """

    call_id: str
    name: str
    agent: Agent | None
    signal: AbortSignal


@attrs.frozen
class ToolSpec:
    """A model tool: schema types, behaviour and rendering.

    Attributes:
        name: Unique name within a registry layer.
        description: What the model reads; keep it short and exact.
        args_type: msgspec Struct of the arguments (use ``forbid_unknown_fields=True``).
        result_type: msgspec type of the result; the host validates results against it.
        execute: ``async (args, call) -> result``. Raise a ``DshError`` to fail the call;
            it becomes an error result with that code, never a turn failure.
        available: Optional ``(agent) -> bool`` evaluated when a step is prepared; a
            tool that says ``False`` is neither offered to nor callable by that agent.
        concurrency_safe: Whether calls may run in parallel with others in one step.
        max_argument_bytes: Largest raw arguments (UTF-8 JSON) a call may carry; a larger
            call is refused (``ARGUMENTS_TOO_LARGE``) before its arguments are stored,
            and the log keeps only a short preview with the size. ``None``: the
            host's default bound.
        input_schema: The model-facing JSON Schema of the arguments when it does not come
            from ``args_type``: a tool described by someone else (an MCP server's tool)
            keeps the schema its author wrote. The host sends it as is and decodes the
            call with ``args_type`` (``dict[str, Any]``: any JSON object); the tool's
            owner validates the rest. ``None``: the schema is generated from ``args_type``.
        choices: Optional ``(agent) -> {field: values}`` evaluated when a step is
            prepared: the closed sets of top-level argument fields right now (member
            names for a ``target``, task ids, the actions this caller may take; for a
            list field, its items). An adapter that constrains the model's output to
            a schema (``openai:...?tools=constrained``) narrows those fields to them
            (``enum``), so a model decoding under a grammar cannot name anything
            else; the published schema, and so every other adapter, is unchanged. A
            hint about the present only: the tool still validates every call, since
            the sets can change before it runs. An empty set leaves its field open.
    """

    name: str
    description: str
    args_type: type
    result_type: Any
    execute: Callable[[Any, ToolCall], Awaitable[Any]]
    available: Callable[[Agent], bool] | None = None
    concurrency_safe: bool = False
    max_argument_bytes: int | None = None
    # Left out of equality and hashing: a dict is unhashable, and a spec must stay hashable.
    input_schema: Mapping[str, Any] | None = attrs.field(default=None, eq=False)
    choices: Callable[[Agent], Mapping[str, Sequence[str]]] | None = None


@attrs.frozen
class PromptSection:
    """A system-prompt section. Sections join in ascending ``order``; ties keep registration order.

    ``text`` may be a string or ``(agent) -> str``; an empty rendering is dropped.
    """

    name: str
    order: float
    text: str | Callable[[Agent], str]
