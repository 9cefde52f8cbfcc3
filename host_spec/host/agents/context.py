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
Everything is folded incrementally: each call looks only at the events appended
since. The messages are kept as their JSON and decoded when a model call reads
them (:class:`Messages`), so a live context adds no object per message for the
garbage collector to walk.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, overload

import attrs
import msgspec

from host_spec.events import ContextCompaction, EventType
from host_spec.messages import text_block

if TYPE_CHECKING:
    from host_spec.protocols import Session

__all__ = ["ContextEntry", "Conversation", "Messages", "SUMMARY_HEADER", "BRIEF_SOURCE", "summary_message"]

#: Opens the user message that carries a compaction summary.
SUMMARY_HEADER: Final = "<system-reminder>\nSummary of your earlier work in this session (older turns were compacted):\n"
_SUMMARY_FOOTER: Final = "\n</system-reminder>"
#: Source of the brief message (it grants nothing; it says where the message came from).
BRIEF_SOURCE: Final = {"kind": "context-brief"}
#: An entry's kind byte: the role its event type gives (user messages carry their own), and the summary bit.
_USER, _ASSISTANT, _TOOL, _ROLE, _SUMMARY = 0, 1, 2, 3, 4
_ROLES: Final = (None, "assistant", "tool", None)
_DECODE: Final = msgspec.json.Decoder().decode


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


class Messages(Sequence[Mapping[str, Any]]):
    """The first ``count`` messages of a conversation, each decoded when it is read.

    An O(1) snapshot (the storage only ever grows, and a compaction starts new
    storage), and a flat one: it holds the messages' JSON, so a long conversation
    is a few untracked buffers rather than a dict and a list per message for the
    garbage collector to walk on every full collection. Every read returns a
    fresh dict (a reader that edits one changes nothing kept).
    """

    __slots__ = ("_data", "_kinds", "_count")

    def __init__(self, data: list[msgspec.Raw], kinds: bytearray, count: int) -> None:
        self._data = data
        self._kinds = kinds
        self._count = count

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> Mapping[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Mapping[str, Any], ...]: ...

    def __getitem__(self, index: int | slice) -> Mapping[str, Any] | tuple[Mapping[str, Any], ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(self._count)))
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError("message index out of range")
        return _message(self._data[index], self._kinds[index])

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        data, kinds = self._data, self._kinds
        return (_message(data[i], kinds[i]) for i in range(self._count))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Messages, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # unhashable like a list

    def __repr__(self) -> str:
        return f"<messages {self._count}>"


def _message(data: msgspec.Raw, kind: int) -> dict[str, Any]:
    """The message an entry stands for: its event's payload, with the role its event type gives."""
    value: dict[str, Any] = _DECODE(data)
    role = _ROLES[kind & _ROLE]
    return value if role is None else {"role": role, **value}


@attrs.define(eq=False)
class Conversation:
    """The derived context of one session (see the module docstring).

    The entries are kept flat: per entry a seq and a size in integer arrays, a
    kind byte, and the message's JSON (the event's own payload bytes), never a
    decoded object. A context holds thousands of messages for as long as the
    session lives; decoded ones (an entry, a dict and a content list each) would
    be walked by every full garbage collection of a busy host, so each message
    would cost more than the one before. The model reads the context once per
    call, and decoding a message there costs about what an adapter's own pass
    to its wire form does (a few microseconds), next to a model call's hundreds
    of milliseconds.

    Attributes:
        compaction: The newest compaction folded, if any.
        size: Bytes of every entry (kept current as entries come and go).
        usage_tokens: Input plus output tokens of the newest model call after that
            compaction that reported usage, and :attr:`size` right after its answer.
    """

    session: Session
    compaction: ContextCompaction | None = None
    size: int = 0
    usage_tokens: tuple[int, int] | None = None
    _folded: int = 0
    _seqs: array[int] = attrs.field(factory=lambda: array("q"), init=False)
    _sizes: array[int] = attrs.field(factory=lambda: array("q"), init=False)
    #: Per entry: the role its event type gives (:data:`_ROLES`), and :data:`_SUMMARY`.
    _kinds: bytearray = attrs.field(factory=bytearray, init=False)
    #: Per entry: the message's JSON (an event's payload, copied out of any larger buffer).
    _data: list[msgspec.Raw] = attrs.field(factory=list, init=False)

    @property
    def entries(self) -> list[ContextEntry]:
        """The context, oldest first, decoded: built on each read (compaction planning only)."""
        seqs, sizes, kinds, data = self._seqs, self._sizes, self._kinds, self._data
        return [ContextEntry(seqs[i], _message(data[i], kinds[i]), sizes[i], summary=bool(kinds[i] & _SUMMARY))
                for i in range(len(data))]

    def fold(self) -> None:
        """Fold the events appended since the last call (each event once)."""
        events = self.session.events
        for index in range(self._folded, len(events)):
            event = events[index]
            kind = event.type
            if kind == EventType.USER_MESSAGE:
                self._add(event.seq, _USER, event.data)
            elif kind == EventType.ASSISTANT_MESSAGE:
                value = event.value()
                if value.get("content"):
                    self._add(event.seq, _ASSISTANT, event.data)
                usage = value.get("usage")
                if usage:
                    spent = int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
                    self.usage_tokens = (spent, self.size)
            elif kind == EventType.TOOL_RESULT:
                self._add(event.seq, _TOOL, event.data)
            elif kind == EventType.CONTEXT_COMPACTED:
                self._compact(event.seq, event.decode(ContextCompaction))
        self._folded = len(events)

    def messages(self) -> Sequence[Mapping[str, Any]]:
        """The context as the model receives it (oldest first): a frozen snapshot, O(1) per call.

        Entries are only ever appended to the storage, and a compaction starts new
        storage, so a returned snapshot never changes under its holder.
        """
        self.fold()
        return Messages(self._data, self._kinds, len(self._data))

    def _add(self, seq: int, kind: int, data: msgspec.Raw) -> None:
        self._seqs.append(seq)
        self._sizes.append(len(data))
        self._kinds.append(kind)
        self._data.append(data.copy())  # a resumed log's payloads share the chunk they were decoded from
        self.size += len(data)

    def _compact(self, seq: int, compaction: ContextCompaction) -> None:
        # An earlier summary is never kept: the new summary was written from it.
        seqs, kinds = self._seqs, self._kinds
        fresh = [i for i in range(len(seqs)) if not kinds[i] & _SUMMARY]
        first = [i for i in fresh if seqs[i] == compaction.first_seq][:1]
        kept = [i for i in fresh if seqs[i] >= compaction.kept_from_seq and seqs[i] != compaction.first_seq]
        summary = msgspec.Raw(msgspec.json.encode(summary_message(seq, compaction.summary)))
        order = [*first, -1, *kept]  # -1: the summary
        self._seqs = array("q", [seq if i < 0 else seqs[i] for i in order])
        self._sizes = array("q", [len(compaction.summary.encode()) if i < 0 else self._sizes[i] for i in order])
        self._kinds = bytearray(_USER | _SUMMARY if i < 0 else kinds[i] for i in order)
        self._data = [summary if i < 0 else self._data[i] for i in order]
        self.size = sum(self._sizes)
        self.compaction = compaction
        self.usage_tokens = None  # a model call before the compaction measured a longer context
