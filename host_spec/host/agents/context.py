"""The model context of one agent, folded from its session log: messages, compactions, size.

A model sees the surface events (``user/message``, ``assistant/message`` with
content, ``tool/result``) in log order. A ``context/compacted`` event changes what it
sees without changing the log: from there on the context is the first message, the
compaction's summary as one user message, and the surface events from the
compaction's ``kept_from_seq`` on. Folding that event drops the summarised entries
from memory too, so a long session's context stays as small as the model's.

Each entry keeps its seq and its size in bytes (the raw JSON of its event), which is
what the compaction step needs to choose a cut and estimate tokens; the last
``usage`` a model reported after the newest compaction is kept as the better estimate.
Everything is folded incrementally: each call decodes only the events appended since.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs

from host_spec.events import ContextCompaction, EventType
from host_spec.messages import text_block

from host_spec.host.store.sequence_views import Prefix

if TYPE_CHECKING:
    from host_spec.protocols import Session

__all__ = ["ContextEntry", "Conversation", "SUMMARY_HEADER", "BRIEF_SOURCE", "summary_message"]

#: Opens the user message that carries a compaction summary.
SUMMARY_HEADER: Final = "<system-reminder>\nSummary of your earlier work in this session (older turns were compacted):\n"
_SUMMARY_FOOTER: Final = "\n</system-reminder>"
#: Source of the brief message (it grants nothing; it says where the message came from).
BRIEF_SOURCE: Final = {"kind": "context-brief"}


@attrs.frozen
class ContextEntry:
    """One message of the context.

    Attributes:
        seq: Seq of the event it came from (a summary: its ``context/compacted`` event).
        message: The message as a model adapter receives it (a dict with a ``role``).
        size: Bytes of the event's JSON payload (the byte heuristic's measure).
        summary: The entry is a compaction summary, not a surface event.
    """

    seq: int
    message: Mapping[str, Any]
    size: int
    summary: bool = False

    @property
    def role(self) -> str:
        return str(self.message.get("role", "user"))


def summary_message(seq: int, summary: str) -> dict[str, Any]:
    """The user message a compaction's summary becomes (its id names the compaction)."""
    return {"id": f"compaction-{seq}", "role": "user", "content": [text_block(SUMMARY_HEADER + summary + _SUMMARY_FOOTER)],
            "source": {"kind": "compaction", "seq": seq}}


@attrs.define(eq=False)
class Conversation:
    """The derived context of one session (see the module docstring).

    Attributes:
        entries: The context, oldest first.
        compaction: The newest compaction folded, if any.
        size: Bytes of every entry (kept current as entries come and go).
        usage_tokens: Input plus output tokens of the newest model call after that
            compaction that reported usage, and :attr:`size` right after its answer.
    """

    session: Session
    entries: list[ContextEntry] = attrs.Factory(list)
    compaction: ContextCompaction | None = None
    size: int = 0
    usage_tokens: tuple[int, int] | None = None
    _folded: int = 0
    #: ``entry.message`` of every entry, kept alongside so a step's request costs no copy.
    _messages: list[Mapping[str, Any]] = attrs.field(factory=list, init=False)

    def fold(self) -> list[ContextEntry]:
        """Fold the events appended since the last call; returns :attr:`entries`."""
        events = self.session.events
        for index in range(self._folded, len(events)):
            event = events[index]
            kind = event.type
            if kind == EventType.USER_MESSAGE:
                self._add(event.seq, event.value(), event.data)
            elif kind == EventType.ASSISTANT_MESSAGE:
                value = event.value()
                if value.get("content"):
                    self._add(event.seq, {"role": "assistant", **value}, event.data)
                usage = value.get("usage")
                if usage:
                    spent = int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
                    self.usage_tokens = (spent, self.size)
            elif kind == EventType.TOOL_RESULT:
                self._add(event.seq, {"role": "tool", **event.value()}, event.data)
            elif kind == EventType.CONTEXT_COMPACTED:
                self._compact(event.seq, event.decode(ContextCompaction))
        self._folded = len(events)
        return self.entries

    def messages(self) -> Sequence[Mapping[str, Any]]:
        """The context as the model receives it (oldest first): a frozen prefix, O(1) per call.

        Entries are only ever appended to the list, and a compaction starts a new
        one, so a returned prefix never changes under its holder.
        """
        self.fold()
        return Prefix(self._messages)

    def _add(self, seq: int, message: Mapping[str, Any], data: Any) -> None:
        entry = ContextEntry(seq, message, len(data))
        self.entries.append(entry)
        self._messages.append(message)
        self.size += entry.size

    def _compact(self, seq: int, compaction: ContextCompaction) -> None:
        # An earlier summary is never kept: the new summary was written from it.
        first = [e for e in self.entries if e.seq == compaction.first_seq and not e.summary][:1]
        kept = [e for e in self.entries
                if e.seq >= compaction.kept_from_seq and e.seq != compaction.first_seq and not e.summary]
        summary = summary_message(seq, compaction.summary)
        self.entries = [*first, ContextEntry(seq, summary, len(compaction.summary.encode()), summary=True), *kept]
        self._messages = [entry.message for entry in self.entries]
        self.size = sum(entry.size for entry in self.entries)
        self.compaction = compaction
        self.usage_tokens = None  # a model call before the compaction measured a longer context
