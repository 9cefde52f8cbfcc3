"""Pure parts of continuable children: providers, descriptor fold, epoch outcome, notices, directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from _subagent_kit import open_host, start_child, start_root, until_released
from host_spec.errors import SubagentError
from host_spec.events import Event, EventType, SubagentDescriptor, encode_data
from host_spec.host.children.activation import EpochOutcome, epoch_outcome, fold_descriptor, settlement_notice
from host_spec.host.children.directory import ChildDirectory, ChildInfo
from host_spec.host.children.providers import ForkProvider, ProviderRegistry, SpawnProvider, completed_prefix


def ev(seq: int, type: str, data: Any) -> Event:
    return Event(seq=seq, time=0, type=type, data=encode_data(data))


def descriptor(seq: int, **fields: Any) -> Event:
    return ev(seq, EventType.SUBAGENT_DESCRIPTOR, {"version": 2, "mode": "continuable", "provider": "spawn", **fields})


def assistant(seq: int, text: str) -> Event:
    return ev(seq, EventType.ASSISTANT_MESSAGE, {"turn": 1, "step": 1, "content": [{"type": "text", "text": text}] if text else []})


def turn_end(seq: int, kind: str) -> Event:
    return ev(seq, EventType.TURN_END, {"turn": 1, "reason": {"kind": kind}})


class TestProviders:
    def test_completed_prefix_stops_at_the_last_turn_end(self) -> None:
        """The prefix runs through the last turn/end; nothing after it, nothing without one."""
        events = [ev(1, "turn/start", {"turn": 1}), turn_end(2, "completed"), ev(3, "turn/start", {"turn": 2})]
        assert list(completed_prefix(events)) == events[:2]
        assert list(completed_prefix(events[:1])) == []
        assert list(completed_prefix([])) == []

    def test_builtin_providers(self) -> None:
        """spawn inherits nothing; fork inherits the parent's completed prefix."""

        class Parent:
            class session:  # noqa: N801 - a stand-in with the one attribute a provider reads
                events = [turn_end(1, "completed"), ev(2, "turn/start", {"turn": 2})]

        assert SpawnProvider().prepare(Parent()) == ()  # type: ignore[arg-type]
        assert list(ForkProvider().prepare(Parent())) == Parent.session.events[:1]  # type: ignore[arg-type]

    def test_registry_rejects_duplicates_blanks_and_unknown_names(self) -> None:
        """DUPLICATE_PROVIDER, INVALID_ARGUMENT and NO_PROVIDER (naming what is registered)."""
        registry = ProviderRegistry()
        handle = registry.register(SpawnProvider())
        with pytest.raises(SubagentError) as excinfo:
            registry.register(SpawnProvider())
        assert excinfo.value.code == "DUPLICATE_PROVIDER"
        with pytest.raises(SubagentError) as excinfo:
            registry.register(SpawnProvider(name=" "))
        assert excinfo.value.code == "INVALID_ARGUMENT"
        with pytest.raises(SubagentError) as excinfo:
            registry.get("fork")
        assert excinfo.value.code == "NO_PROVIDER" and "spawn" in str(excinfo.value)
        handle.dispose()
        assert registry.names() == []
        replacement = registry.register(SpawnProvider())
        handle.dispose()  # a stale handle must not remove the new registration
        assert registry.get("spawn") is not None and not replacement.disposed


class TestDescriptorFold:
    def test_first_descriptor_wins(self) -> None:
        """Later descriptors never shadow the first one."""
        folded = fold_descriptor([ev(1, "note", {}), descriptor(2, label="a", name="alice"), descriptor(3, label="b")])
        assert folded == SubagentDescriptor(version=2, mode="continuable", provider="spawn", label="a", name="alice")

    def test_other_versions_and_absence_fold_to_none(self) -> None:
        """A descriptor of another version (or none at all) means: not resumable by this host."""
        assert fold_descriptor([ev(1, EventType.SUBAGENT_DESCRIPTOR, {"version": 1, "mode": "x"})]) is None
        assert fold_descriptor([ev(1, EventType.SUBAGENT_DESCRIPTOR, [1, 2])]) is None
        assert fold_descriptor([]) is None

    def test_a_malformed_current_descriptor_raises(self) -> None:
        """A version-2 payload with a bad shape is INVALID_DESCRIPTOR, naming its seq."""
        with pytest.raises(SubagentError) as excinfo:
            fold_descriptor([ev(4, EventType.SUBAGENT_DESCRIPTOR, {"version": 2, "mode": "forever", "provider": "x"})])
        assert excinfo.value.code == "INVALID_DESCRIPTOR" and "seq 4" in str(excinfo.value)


class TestEpochOutcome:
    @pytest.mark.parametrize(
        ("kind", "reason"),
        [("completed", "completed"), ("aborted", "aborted"), ("interrupted", "aborted"), ("error", "error"),
         ("blocked", "refusal"), ("max-tokens", "max-tokens"), ("strange", "error")],
    )
    def test_stop_reason_follows_the_last_turn_end(self, kind: str, reason: str) -> None:
        """Each turn/end kind maps to one stop reason."""
        assert epoch_outcome([assistant(1, "hi"), turn_end(2, kind)], 0) == EpochOutcome(reason, "hi")

    def test_only_the_epoch_counts_and_empty_text_is_skipped(self) -> None:
        """Events before ``start`` are ignored; the closing message is the last non-empty assistant text."""
        events = [assistant(1, "old"), turn_end(2, "error"), assistant(3, "new"), assistant(4, " "), turn_end(5, "completed")]
        assert epoch_outcome(events, 2) == EpochOutcome("completed", "new")
        assert epoch_outcome(events, 5) == EpochOutcome("completed", None)

    def test_notice_text_and_source(self) -> None:
        """The notice names the child and quotes its closing message; the summary stays short."""
        text, source = settlement_notice("c-1", "helper", EpochOutcome("completed", "bye"))
        assert text.startswith("Background subagent c-1 (helper) finished") and text.endswith("Its closing message:\nbye")
        assert source == {"kind": "subagent-settled", "form": "notice", "summary": "subagent helper completed",
                          "sender_session_id": "c-1"}
        text, source = settlement_notice("c-1", "x" * 200, EpochOutcome("aborted", None))
        assert "was stopped" in text and text.endswith("It left no closing message.") and len(source["summary"]) == 120


class TestDirectory:
    async def test_resolve_by_id_label_or_name(self, tmp_path: Path) -> None:
        """An id resolves to itself, a unique label or name to its id, an unknown ref stays as is."""
        directory = ChildDirectory(host=None)
        directory.note(ChildInfo("c-1", "p", "researcher", "alice", "spawn"))
        directory.note(ChildInfo("c-2", "p", "writer", "writer", "fork"))
        directory.note(ChildInfo("c-3", "other", "researcher", "researcher", "spawn"))
        assert await directory.resolve("p", "c-1") == "c-1"
        assert await directory.resolve("p", "alice") == "c-1"
        assert await directory.resolve("p", "researcher") == "c-1"
        assert await directory.resolve("p", "c-3") == "c-3"  # someone else's: delivery will refuse it
        assert [c.child_id for c in await directory.list("p")] == ["c-1", "c-2"]

    async def test_stored_children_are_discovered_once_and_unreadable_logs_skipped(self, tmp_path: Path) -> None:
        """Children written by an earlier host are found from their logs; roots and corrupt logs are not children."""
        host = await open_host(tmp_path, {"kid": [{"text": "ok"}]})
        try:
            root = await start_root(host)
            child_id = await start_child(host, root, "kid", name="kiddo", notify=False)
            await until_released(host, child_id)
        finally:
            await host.close()
        corrupt = tmp_path / "data" / "sessions" / "broken"
        corrupt.mkdir()
        (corrupt / "session.jsonl").write_text('{"type":"session","id":"broken","created_at":1}\nnot json\n{"x":1}\n')
        fresh = await open_host(tmp_path, {})
        try:
            found = await fresh.continuations.directory.list(root.id)
            again = await fresh.continuations.directory.resolve(root.id, "kiddo")
        finally:
            await fresh.close()
        assert [(c.child_id, c.label, c.name, c.provider) for c in found] == [(child_id, "kid", "kiddo", "spawn")]
        assert again == child_id  # its name resolves to it

    async def test_ambiguous_labels_are_refused(self) -> None:
        """Two children with one label cannot be addressed by it (AMBIGUOUS_AGENT)."""
        directory = ChildDirectory(host=None)
        directory.note(ChildInfo("c-1", "p", "twin", "twin", "spawn"))
        directory.note(ChildInfo("c-2", "p", "twin", "twin", "spawn"))
        with pytest.raises(SubagentError) as excinfo:
            await directory.resolve("p", "twin")
        assert excinfo.value.code == "AMBIGUOUS_AGENT"


def test_descriptor_round_trips_its_name() -> None:
    """The additive ``name`` field is optional on decode (older descriptors) and kept on encode."""
    old = msgspec.json.decode(b'{"version":2,"mode":"continuable","provider":"spawn","label":"x"}', type=SubagentDescriptor)
    assert old.name is None
    assert b'"name":"n"' in msgspec.json.encode(SubagentDescriptor(version=2, mode="continuable", provider="p", name="n"))


async def test_agent_name_prefers_the_descriptor_name(tmp_path: Path) -> None:
    """``dsh resume CHILD`` runs a child under its recorded name, else its label; a root is ``lead``."""
    from host_spec.host.runs import agent_name

    host = await open_host(tmp_path, {})
    try:
        root = await start_root(host)
        named = await start_child(host, root, "a label", name="alice", notify=False)
        plain = await start_child(host, root, "plain label", notify=False)
        await until_released(host, named)
        await until_released(host, plain)
        names = [agent_name(await host.sessions.inspect(i)) for i in (named, plain)] + [agent_name(root.session)]
    finally:
        await host.close()
    assert names == ["alice", "plain label", "lead"]
