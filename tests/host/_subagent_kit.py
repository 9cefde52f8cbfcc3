"""Helpers for the continuation tests: a real host on a tmp JSONL store, gates, log readers.

No conftest (other helpers own tests/host too). Every host here is the real
``app.Host`` with a real ``JsonlStore`` under ``tmp_path``; the only test double
is the scripted model and a ``block`` tool that parks a turn until the test opens
its gate, which is how a test holds a child "running" at a known point.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from host_spec import hookimpl
from host_spec.events import Event, EventType, InboxSplice
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.store.jsonl import JsonlStore
from host_spec.messages import message_text, text_block, user_message
from kit_gates import BLOCK, BlockArgs, BlockResult, Gates  # noqa: F401 - re-exported to the suites
from kit_waits import ready_work_ran, until  # noqa: F401 - re-exported to the suites

class Recorder:
    """Records agent lifecycle hooks in order: ``(hook, agent id, extra)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    @hookimpl
    def dsh_agent_session_start(self, host: Any, agent: Any, source: str) -> None:
        self.calls.append(("start", agent.id, source))

    @hookimpl
    def dsh_agent_disposed(self, host: Any, agent: Any) -> None:
        self.calls.append(("disposed", agent.id, None))

    @hookimpl
    def dsh_session_disposed(self, host: Any, session: Any) -> None:
        self.calls.append(("session_disposed", session.id, None))

    def of(self, hook: str) -> list[tuple[str, Any]]:
        return [(agent_id, extra) for name, agent_id, extra in self.calls if name == hook]


async def open_host(
    tmp_path: Path, script: Mapping[str, Any], *, profile: Any = None, plugins: tuple[tuple[str, object], ...] = ()
) -> Host:
    """A real host on ``tmp_path/data`` with the scripted model."""
    return await Host.open(tmp_path / "data", profile, ScriptedModel.from_mapping(script), extra_plugins=plugins)


async def start_root(host: Host, prompt: str | None = None, *, name: str = "lead") -> Any:
    """A root agent (optionally given a first prompt, then run to idle)."""
    session = await host.create_session()
    agent = host.start_agent(session, name=name)
    if prompt is not None:
        agent.followup(user_message(prompt))
        await agent.when_idle()
    return agent


async def start_child(host: Host, parent: Any, label: str, prompt: str = "go", *, provider: str = "spawn", **kw: Any) -> str:
    child_id = host.continuations.new_child_id()
    await host.continuations.start_continuable(
        child_id=child_id, provider=provider, label=label, prompt=[text_block(prompt)], parent=parent, **kw
    )
    return child_id


async def until_released(host: Host, child_id: str) -> None:
    """Wait until the child left residency (its log is on disk and closed)."""
    await until(
        lambda: not host.continuations.is_resident(child_id) and host.continuations.activation(child_id) is None,
        what=f"{child_id} to be released",
    )


def stored(tmp_path: Path, session_id: str) -> tuple[Any, list[Event]]:
    """Read a log straight from its JSONL file (what a restarted process would see)."""
    return JsonlStore(tmp_path / "data").read(session_id)


def user_texts(events: Any) -> list[str]:
    return [message_text(e.value()["content"]) for e in events if e.type == EventType.USER_MESSAGE]


def pending_ids(events: Any) -> list[str]:
    """Message ids inserted and not removed, replayed from the splices of ``events``."""
    pending: dict[str, None] = {}
    for event in events:
        if event.type == EventType.INBOX_SPLICED:
            splice = event.decode(InboxSplice)
            for item in splice.inserted:
                pending[item["id"]] = None
            for removed in splice.removed_ids:
                pending.pop(removed, None)
    return list(pending)


def types(events: Any) -> list[str]:
    return [e.type for e in events]
