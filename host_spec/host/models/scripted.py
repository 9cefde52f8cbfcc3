"""A keyless, deterministic model adapter driven by a JSON script.

Script format (architecture.md §5)::

    {"<agent name>": [{"text": "...", "tool_calls": [{"name": "...", "arguments": {...}}],
                       "when": "<substring>", "usage": {"input_tokens": 9, "output_tokens": 1}}, ...]}

Each model call of an agent consumes that agent name's next step; an exhausted
script answers plain text with no tool calls (the turn ends). A step with
``when`` waits until the substring appears in the agent's conversation (any
message, tool results included); until then the adapter answers a short plain text
that ends the turn *without* consuming the step, so scripts do not depend on
scheduling. ``usage`` (optional) is reported as the step's token usage, the way a
real server reports it, so spending and budgets can be exercised without one.

The position in the script is derived from the agent's own log (the number of
assistant messages this script produced for it), counted incrementally. A
resumed agent therefore continues where it stopped, and a step whose answer was
never recorded (a crash mid-call) is replayed.

A compaction request (``purpose="compaction"``) consumes no step: it is answered
with :func:`scripted_summary`, a deterministic digest of the transcript it was
given (one line per summarised message), so tests can tell what was summarised.
``context_window`` is the window the adapter reports (``None``: none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import msgspec

from host_spec.errors import ScriptError
from host_spec.events import EventType, json_decode, json_encode
from host_spec.messages import message_text

from host_spec.host.models.adapter import ModelRequest

__all__ = ["ScriptedModel", "ScriptStep", "RecordedRequest", "WAITING_TEXT", "EXHAUSTED_TEXT", "SUMMARY_PREFIX",
           "scripted_summary"]

#: Answer while a ``when`` gate is closed; never counted as a consumed step.
WAITING_TEXT: Final = "(waiting)"
#: Answer once an agent's script is exhausted.
EXHAUSTED_TEXT: Final = "(script exhausted)"
_PLACEHOLDERS: Final = frozenset({WAITING_TEXT, EXHAUSTED_TEXT})
#: Opens every scripted summary.
SUMMARY_PREFIX: Final = "(scripted summary)"
_SUMMARY_LINE: Final = 80
#: How the transcript of a compaction request opens each summarised message.
_SUMMARISED_ROLES: Final = ("user: ", "assistant: ", "tool result ", "earlier summary: ")
_STEP_KEYS: Final = frozenset({"text", "tool_calls", "when", "usage"})
_USAGE_KEYS: Final = frozenset({"input_tokens", "output_tokens", "cached_tokens"})
_CALL_KEYS: Final = frozenset({"name", "arguments"})


@attrs.frozen
class ScriptStep:
    """One validated script step; ``calls`` holds ``(name, arguments JSON text)`` pairs."""

    text: str = ""
    calls: tuple[tuple[str, str], ...] = ()
    when: str | None = None
    usage: Mapping[str, int] | None = None


@attrs.frozen
class RecordedRequest:
    """What one model call saw and answered (for tests)."""

    agent_id: str
    agent_name: str
    system: str
    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[str, ...]
    reply: Mapping[str, Any]
    purpose: str = "step"


def _parse_call(call: Any, path: str) -> tuple[str, str]:
    if not isinstance(call, Mapping):
        raise ScriptError("a tool call must be an object", path=path)
    for key in call:
        if key not in _CALL_KEYS:
            raise ScriptError(f"unknown tool call key {key!r}", path=f"{path}.{key}")
    name = call.get("name")
    if not isinstance(name, str) or not name:
        raise ScriptError("a tool call needs a non-empty string name", path=f"{path}.name")
    arguments = call.get("arguments", {})
    if not isinstance(arguments, Mapping):
        raise ScriptError("tool call arguments must be an object", path=f"{path}.arguments")
    return name, json_encode(arguments).decode()


def _parse_step(step: Any, path: str) -> ScriptStep:
    if not isinstance(step, Mapping):
        raise ScriptError("a step must be an object", path=path)
    for key in step:
        if key not in _STEP_KEYS:
            raise ScriptError(f"unknown step key {key!r}", path=f"{path}.{key}")
    text = step.get("text", "")
    if not isinstance(text, str):
        raise ScriptError("step text must be a string", path=f"{path}.text")
    when = step.get("when")
    if when is not None and not isinstance(when, str):
        raise ScriptError("step when must be a string", path=f"{path}.when")
    calls = step.get("tool_calls", [])
    if not isinstance(calls, list):
        raise ScriptError("tool_calls must be a list", path=f"{path}.tool_calls")
    parsed = tuple(_parse_call(call, f"{path}.tool_calls[{i}]") for i, call in enumerate(calls))
    return ScriptStep(text=text, calls=parsed, when=when, usage=_parse_usage(step.get("usage"), f"{path}.usage"))


def _parse_usage(usage: Any, path: str) -> Mapping[str, int] | None:
    if usage is None:
        return None
    if not isinstance(usage, Mapping) or not usage:
        raise ScriptError("step usage must be a non-empty object", path=path)
    for key, value in usage.items():
        if key not in _USAGE_KEYS:
            raise ScriptError(f"unknown usage key {key!r}", path=f"{path}.{key}")
        if type(value) is not int or value < 0:
            raise ScriptError("usage counts must be non-negative integers", path=f"{path}.{key}")
    return dict(usage)


def parse_script(script: Any) -> dict[str, tuple[ScriptStep, ...]]:
    """Validate a whole script; raises ``ScriptError`` naming the offending path."""
    if not isinstance(script, Mapping):
        raise ScriptError("a script must be an object mapping agent names to step lists", path="$")
    parsed: dict[str, tuple[ScriptStep, ...]] = {}
    for name, steps in script.items():
        if not isinstance(steps, list):
            raise ScriptError("an agent's script must be a list of steps", path=str(name))
        parsed[str(name)] = tuple(_parse_step(step, f"{name}[{i}]") for i, step in enumerate(steps))
    return parsed


def _text_of(message: Mapping[str, Any]) -> str:
    """Every string a scripted gate may match in one message (text and tool-call arguments)."""
    parts = []
    for block in message.get("content") or ():
        if isinstance(block, Mapping):
            for key in ("text", "arguments"):
                value = block.get(key)
                if isinstance(value, str):
                    parts.append(value)
    return "\n".join(parts)


def _is_placeholder(content: list[dict[str, Any]]) -> bool:
    return not any(b.get("type") == "tool-call" for b in content) and message_text(content) in _PLACEHOLDERS


@attrs.define(eq=False)
class ScriptedModel:
    """The scripted adapter (implements ``protocols.ModelAdapter``).

    Attributes:
        steps: The validated script, by agent name.
        requests: Every request answered, in order (when ``record`` is true).
    """

    steps: dict[str, tuple[ScriptStep, ...]]
    record: bool = True
    context_window: int | None = None
    requests: list[RecordedRequest] = attrs.field(factory=list, init=False)
    _scanned: dict[str, tuple[int, int]] = attrs.field(factory=dict, init=False)

    @classmethod
    def from_mapping(cls, script: Any, *, record: bool = True, context_window: int | None = None) -> ScriptedModel:
        return cls(parse_script(script), record=record, context_window=context_window)

    @classmethod
    def from_file(cls, path: str | Path, *, record: bool = True) -> ScriptedModel:
        """Load a JSON script file. Raises ``ScriptError`` for unreadable or invalid JSON."""
        try:
            data = json_decode(Path(path).read_bytes())
        except OSError as exc:
            raise ScriptError(f"cannot read script: {exc.strerror}", path=str(path)) from exc
        except msgspec.DecodeError as exc:
            raise ScriptError(f"script is not valid JSON: {exc}", path=str(path)) from exc
        return cls.from_mapping(data, record=record)

    def position(self, agent: Any) -> int:
        """How many steps ``agent`` has consumed, folded incrementally from its own log."""
        events = agent.session.own_events()
        start, count = self._scanned.get(agent.id, (0, 0))
        for index in range(start, len(events)):
            event = events[index]
            if event.type == EventType.ASSISTANT_MESSAGE and not _is_placeholder(event.value()["content"]):
                count += 1
        self._scanned[agent.id] = (len(events), count)
        return count

    async def complete(self, request: ModelRequest) -> Mapping[str, Any]:
        """Answer one model call from the script (see the module docstring)."""
        agent = request.agent
        steps = self.steps.get(agent.name, ())
        position = self.position(agent)
        if request.purpose == "compaction":
            reply: dict[str, Any] = {"text": scripted_summary(request.messages), "tool_calls": []}
        elif position >= len(steps):
            reply = {"text": EXHAUSTED_TEXT, "tool_calls": []}
        else:
            step = steps[position]
            if step.when is not None and not any(step.when in _text_of(m) for m in _gate_messages(request.messages)):
                reply = {"text": WAITING_TEXT, "tool_calls": []}
            else:
                calls = [
                    {"id": f"{agent.name}-{position + 1}.{i + 1}", "name": name, "arguments": arguments}
                    for i, (name, arguments) in enumerate(step.calls)
                ]
                reply = {"text": step.text, "tool_calls": calls}
                if step.usage is not None:
                    reply["usage"] = dict(step.usage)
        if self.record:
            self.requests.append(
                RecordedRequest(
                    agent_id=agent.id,
                    agent_name=agent.name,
                    system=request.system,
                    messages=tuple(request.messages),
                    tools=tuple(t.name for t in request.tools),
                    reply=reply,
                    purpose=request.purpose,
                )
            )
        return reply


def _gate_messages(messages: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
    """Messages a ``when`` gate looks at: all but the adapter's own placeholders and the
    host's brief (current state, not something the conversation said)."""
    return [m for m in messages if not (m.get("role") == "assistant" and _is_placeholder(m.get("content") or []))
            and (m.get("source") or {}).get("kind") != "context-brief"]


def scripted_summary(messages: Sequence[Mapping[str, Any]]) -> str:
    """The scripted answer to a compaction request: :data:`SUMMARY_PREFIX`, then one line
    per summarised message of the transcript (its first 80 characters)."""
    lines = "\n".join(_text_of(m) for m in messages).splitlines()
    blocks = [line[:_SUMMARY_LINE] for line in lines if line.startswith(_SUMMARISED_ROLES)]
    return "\n".join([SUMMARY_PREFIX, *blocks])
