"""What a member's work looks like on the desk: one request and one answer per call, as JSON.

The Lead's process and a worker share no objects, only these shapes, so each is
a msgspec ``Struct`` with one encoder and decoder built once. A model request
carries what an adapter reads (the rendered system prompt, the derived
conversation, the offered tools' names, descriptions and schemas) and who asks
(the member's id, name and model spec); a tool request carries the call as the
model made it. The worker's answers carry the adapter's reply, or the tool's
result message with the events the tool body recorded (a file read, a write),
which the Lead's process appends to the member's log for it.

A request also names ``seq``: the member's log is durable up to there when the
call is posted, so the worker reads the member's history from the store up to
exactly that point (the scripted model's position, the read ledger of the
stale-edit guard) and never sees a later event.

A worktree-mode member's git steps on completion travel as a tool call too, named
:data:`WORKTREE_OP` (no model is ever offered it): its arguments are a
:class:`WorktreeOp`, its result the step's answer (:mod:`.checkouts`), so a worker
that dies mid-step is recovered like any tool call (``TOOL_OUTCOME_UNKNOWN``).
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["WORKTREE_OP", "WorktreeOp",
           "Asker", "ToolDef", "ModelWork", "ToolWork", "ModelAnswer", "ToolAnswer", "Failure",
           "encode", "decode_model_work", "decode_tool_work", "decode_model_answer", "decode_tool_answer"]


#: The tool name of a worktree step the Lead asks of the worker that holds a member.
WORKTREE_OP = "dsh/worktree"


class WorktreeOp(msgspec.Struct, frozen=True, omit_defaults=True):
    """One git step in a member's worktree on a worker.

    Attributes:
        op: ``pending`` (paths still holding conflict markers), ``commit`` (commit
            everything and push the head to the Lead's repository), ``merge``
            (merge the Lead's ``target`` branch into the worktree) or ``check`` (run
            a task's check ``command`` there, as the member ``author`` spawned with
            ``role`` (its sandbox policy), for at most ``timeout_ms``).
        path: The member's worktree in the Lead's repository (its header's ``cwd``).
    """

    op: str
    path: str
    message: str = ""
    author: str = ""
    role: str = ""
    target: str = ""
    command: str = ""
    timeout_ms: int = 0


class Asker(msgspec.Struct, frozen=True):
    """The member a call is for: its agent id (also its session id), name, model spec and role.

    The role travels with the call so the worker applies the member's per-role
    sandbox policy (``[sandbox.roles]``) as the Lead's process would.
    """

    id: str
    name: str
    model: str | None = None
    role: str | None = None


class ToolDef(msgspec.Struct, frozen=True):
    """One tool as a model sees it: its name, description and argument schema."""

    name: str
    description: str
    parameters: dict[str, Any]


class ModelWork(msgspec.Struct, frozen=True, tag="model"):
    """A model call: ``purpose`` is ``step`` or ``compaction``."""

    asker: Asker
    seq: int
    system: str
    messages: list[dict[str, Any]]
    tools: list[ToolDef]
    purpose: str = "step"


class ToolWork(msgspec.Struct, frozen=True, tag="tool"):
    """A workspace tool call with the write-scope verdicts the Team gave for its paths (by path)."""

    asker: Asker
    seq: int
    call_id: str
    name: str
    arguments: str
    turn: int
    step: int
    audits: dict[str, Any] | None = None


class Failure(msgspec.Struct, frozen=True):
    """A typed error the worker met running the call (``code`` and ``message``)."""

    code: str
    message: str


class ModelAnswer(msgspec.Struct, frozen=True):
    """The adapter's reply mapping, or the failure."""

    reply: dict[str, Any] | None = None
    failure: Failure | None = None


class ToolAnswer(msgspec.Struct, frozen=True):
    """The tool's result message (as JSON) and the ``[type, data]`` events its body recorded.

    ``lost`` names the code of a call that has no result: its holder died after taking
    it (``TOOL_OUTCOME_UNKNOWN``), or its request could not be read (``TOOL_NOT_STARTED``).
    """

    result: dict[str, Any] | None = None
    appends: list[tuple[str, Any]] = []
    lost: str | None = None


_encoder = msgspec.json.Encoder()
_model_work = msgspec.json.Decoder(ModelWork)
_tool_work = msgspec.json.Decoder(ToolWork)
_model_answer = msgspec.json.Decoder(ModelAnswer)
_tool_answer = msgspec.json.Decoder(ToolAnswer)


def encode(value: Any) -> bytes:
    """One request or answer as JSON bytes."""
    return _encoder.encode(value)


def decode_model_work(data: bytes) -> ModelWork:
    return _model_work.decode(data)


def decode_tool_work(data: bytes) -> ToolWork:
    return _tool_work.decode(data)


def decode_model_answer(data: bytes) -> ModelAnswer:
    return _model_answer.decode(data)


def decode_tool_answer(data: bytes) -> ToolAnswer:
    return _tool_answer.decode(data)
