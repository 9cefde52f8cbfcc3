"""Compaction: when a model's context is nearly full, older turns become one summary.

Before each model call the turn loop asks :func:`plan_compaction` whether the agent's
context (system prompt, tools, messages) has reached ``threshold`` of the model's
context window. If so, the model itself is asked (``purpose="compaction"``, no tools)
to summarise the older turns, and one ``context/compacted`` event is appended
(:func:`compaction_record`). From then on the context is the first message (which
carries the agent's identity and task, unchanged), the summary, and the recent turns
verbatim. The log keeps every event; nothing is rewritten or deleted.

Why a cut keeps each tool call with its result: a model API rejects a result whose
call it never saw (and a call without its result), so the kept part starts at a
message that no later tool result refers back past (:func:`choose_cut`).

Crash safety comes from ordering: the summary call happens before anything is
written, and the record is one event. A crash during the call leaves no trace (the
resumed turn plans again and redoes it); a recorded compaction is reused as it is.

Tokens are estimated from the last usage a model reported after the newest
compaction (plus the bytes added since), else from bytes (4 per token).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs
import structlog

from host_spec.events import ContextCompaction, json_encode
from host_spec.messages import message_text, text_block

from host_spec.host.agents.context import BRIEF_SOURCE, ContextEntry, Conversation
from host_spec.host.agents.window import CompactionSettings
from host_spec.host.models.adapter import tool_definitions
from host_spec.host.store.sequence_views import Extended

if TYPE_CHECKING:
    from host_spec.messages import Usage
    from host_spec.records import ToolSpec

    from host_spec.host.agents.driven import DrivenAgent

__all__ = [
    "BYTES_PER_TOKEN",
    "COMPACTION_VERSION",
    "SUMMARY_SYSTEM",
    "SUMMARY_INSTRUCTION",
    "CompactionPlan",
    "choose_cut",
    "estimate_tokens",
    "pinned_index",
    "transcript",
    "plan_compaction",
    "compaction_record",
    "with_brief",
]

log = structlog.get_logger(__name__)

BYTES_PER_TOKEN: Final = 4
COMPACTION_VERSION: Final = 1
#: Characters of one message shown to the summariser (long tool output is cut).
MESSAGE_CAP: Final = 2000

SUMMARY_SYSTEM: Final = (
    "You summarise an agent's earlier work so that it can continue with a shorter context. "
    "Answer with the summary only."
)
SUMMARY_INSTRUCTION: Final = (
    "Summarise the conversation below for yourself. Keep: the goal and the constraints you were given, "
    "decisions made, what is done and what is left, names, identifiers, file paths, and open questions. "
    "The first message stays in your context verbatim, and so do the most recent turns after this part.\n\n"
)


@attrs.frozen
class CompactionPlan:
    """A compaction decided but not yet recorded: what to summarise and the request to ask.

    Attributes:
        first: The first message, kept verbatim.
        cut: Index (into the entries) of the first entry kept verbatim.
        summarised: The entries the summary replaces.
        estimated_tokens: The estimate that crossed the threshold.
        window: The model's context window.
        messages: The summarise request's conversation.
    """

    first: ContextEntry
    cut: ContextEntry
    summarised: tuple[ContextEntry, ...]
    estimated_tokens: int
    window: int
    messages: tuple[Mapping[str, Any], ...]


def _call_ids(message: Mapping[str, Any]) -> set[str]:
    return {b.get("id") for b in message.get("content") or () if b.get("type") == "tool-call"}


def choose_cut(entries: Sequence[ContextEntry], pinned: int, budget: int) -> int | None:
    """Index of the first entry to keep verbatim, or ``None`` when nothing can be summarised.

    A cut at ``i`` is safe when no tool result at or after ``i`` answers a call made
    before ``i``, and useful when something other than ``pinned`` and an earlier summary
    lies before it. Among safe, useful cuts the earliest one whose kept part is at most
    ``budget`` bytes wins; the newest one is taken when none fits.
    """
    fresh = [i for i, e in enumerate(entries) if i != pinned and not e.summary]
    if not fresh:
        return None
    unanswered: set[Any] = set()
    kept = 0
    best: int | None = None
    for index in range(len(entries) - 1, max(pinned, fresh[0]), -1):
        entry = entries[index]
        if entry.role == "tool":
            unanswered.add(entry.message.get("call_id"))
        elif entry.role == "assistant":
            unanswered -= _call_ids(entry.message)
        kept += entry.size
        if unanswered or entry.role == "tool":
            continue
        if best is not None and kept > budget:
            break
        best = index
    return best


def pinned_index(entries: Sequence[ContextEntry], seed_length: int) -> int:
    """Index of the first message to keep: the session's own first user message (a fork's
    inherited prefix is summarised like any older turn), else the first entry."""
    for index, entry in enumerate(entries):
        if entry.seq > seed_length and entry.role == "user" and not entry.summary:
            return index
    return 0


def _clip(text: str) -> str:
    return text if len(text) <= MESSAGE_CAP else text[:MESSAGE_CAP] + " [...]"


def _line(entry: ContextEntry) -> str:
    message = entry.message
    content = list(message.get("content") or ())
    if entry.summary:
        return "earlier summary: " + _clip(message_text(content))
    if entry.role == "assistant":
        calls = [f"\n  called {b.get('name')} {_clip(str(b.get('arguments', '')))}" for b in content
                 if b.get("type") == "tool-call"]
        return "assistant: " + _clip(message_text(content)) + "".join(calls)
    if entry.role == "tool":
        failed = " (error)" if message.get("is_error") else ""
        return f"tool result {message.get('name')}{failed}: " + _clip(message_text(content))
    return "user: " + _clip(message_text(content))


def transcript(first: ContextEntry, summarised: Sequence[ContextEntry]) -> str:
    """The text the summariser reads: the first message (marked as kept), then one
    block per summarised message, long texts cut to :data:`MESSAGE_CAP` characters."""
    lines = ["[first message, kept verbatim] " + _line(first)]
    lines += [_line(entry) for entry in summarised]
    return "\n\n".join(lines)


def _fixed_bytes(system: str, tools: Sequence[ToolSpec]) -> int:
    return len(system.encode()) + (len(json_encode(tool_definitions(tools))) if tools else 0)


def estimate_tokens(conversation: Conversation, fixed_bytes: int) -> int:
    """Tokens of the next request: reported usage plus bytes since it, else bytes / 4.

    Args:
        conversation: The agent's context, folded up to now.
        fixed_bytes: Bytes of the system prompt and the tool schemas.
    """
    if conversation.usage_tokens is not None:
        spent, size_then = conversation.usage_tokens
        return spent + (conversation.size - size_then) // BYTES_PER_TOKEN
    return (fixed_bytes + conversation.size) // BYTES_PER_TOKEN


def plan_compaction(agent: DrivenAgent, system: str, tools: Sequence[ToolSpec]) -> CompactionPlan | None:
    """A compaction to run before the next model call, or ``None`` (below threshold, no
    known window, or nothing that can be summarised)."""
    settings = agent.runtime.compaction
    window = settings.window(agent.model, agent.runtime.model)
    if window is None:
        return None
    conversation = agent.conversation
    conversation.fold()
    fixed = _fixed_bytes(system, tools)
    estimate = estimate_tokens(conversation, fixed)
    if estimate < settings.threshold * window:
        return None
    entries = conversation.entries  # decoded only now: a compaction is due
    pinned = pinned_index(entries, agent.session.header.seed_length)
    # Reported usage tells how many bytes a token is for this model; bytes alone assume 4.
    bytes_per_token = (fixed + conversation.size) / estimate
    cut = choose_cut(entries, pinned, int(settings.recent_share * window * bytes_per_token))
    if cut is None:
        return None
    first = entries[pinned]
    summarised = tuple(e for i, e in enumerate(entries[:cut]) if i != pinned)
    request = {"id": f"compaction-request-{entries[cut].seq}", "role": "user", "source": {"kind": "compaction"},
               "content": [text_block(SUMMARY_INSTRUCTION + transcript(first, summarised))]}
    return CompactionPlan(first, entries[cut], summarised, estimate, window, (request,))


def compaction_record(plan: CompactionPlan, summary: str, usage: Usage | None, model: str | None) -> ContextCompaction:
    """The durable record of a compaction whose summary the model wrote."""
    return ContextCompaction(
        version=COMPACTION_VERSION, summary=summary, first_seq=plan.first.seq, kept_from_seq=plan.cut.seq,
        summarised=len(plan.summarised), estimated_tokens=plan.estimated_tokens, window=plan.window,
        usage=usage, model=model,
    )


def with_brief(agent: DrivenAgent, messages: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
    """``messages`` plus the plugins' brief, last, for an agent that was compacted or cold-resumed.

    The brief is asked for on every such step (it is current) and never recorded.
    """
    if not (agent.resumed or agent.conversation.compaction is not None):
        return messages
    try:
        text = agent.runtime.hooks.brief(agent).strip()
    except Exception:
        log.exception("context brief failed", agent=agent.id)  # the step goes on without it
        return messages
    if not text:
        return messages
    brief = {"id": "context-brief", "role": "user", "source": dict(BRIEF_SOURCE),
             "content": [text_block(f"<system-reminder>\n{text}\n</system-reminder>")]}
    return Extended(messages, brief)
