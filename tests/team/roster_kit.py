"""Helpers for the roster, mailbox and crash suites: a real host, real JSONL files, real children.

Every host is the reference ``app.Host`` on a ``JsonlStore`` under ``tmp_path``
with the ``dsh-team`` plugin and the scripted model. The only test-side parts
are a ``block`` tool (parks a turn until the test opens its gate: how a test
holds a teammate "running"), a flush recorder (the order of durable commits)
and providers that misbehave on purpose (a seam of the host contract). Nothing
of ours is mocked.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dsh_team.core.fold import replay
from dsh_team.api import TeamServiceAPI
from dsh_team.service import TeamService
from dsh_team.core.state import TeamState
from host_spec import hookimpl
from host_spec.events import Event, EventType, InboxSplice
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.store.jsonl import JsonlStore
from host_spec.messages import message_text, text_block
from host_spec.records import ToolSpec
from host_spec.testing import FaultyLog, FaultyStorage
from kit_gates import BLOCK, BlockArgs, BlockResult, Gates, faulty_log  # noqa: F401 - re-exported to the suites
from kit_waits import ready_work_ran, until  # noqa: F401 - re-exported to the suites

class Flushes:
    """Records every completed group commit as ``(session id, durable seq)``, in order."""

    def __init__(self) -> None:
        self.commits: list[tuple[str, int]] = []

    @hookimpl
    def dsh_session_flushed(self, host: Any, session: Any, durable_seq: int) -> None:
        self.commits.append((session.id, durable_seq))

    def sessions(self) -> list[str]:
        """Session ids of the commits, consecutive repeats collapsed."""
        order: list[str] = []
        for session_id, _ in self.commits:
            if not order or order[-1] != session_id:
                order.append(session_id)
        return order

    def clear(self) -> None:
        self.commits.clear()


class Provider:
    """A continuable provider whose ``prepare`` runs a test callback (a race window) or fails."""

    def __init__(self, name: str, on_prepare: Callable[[Any], Any] | None = None) -> None:
        self.name = name
        self.on_prepare = on_prepare

    def prepare(self, parent: Any) -> Sequence[Event]:
        if self.on_prepare is not None:
            self.on_prepare(parent)
        return ()


async def open_team(
    tmp_path: Path,
    script: Mapping[str, Any] | None = None,
    config: Mapping[str, Any] | None = None,
    *,
    gates: Gates | None = None,
    flushes: Flushes | None = None,
    invariant: bool = False,
    plugins: Sequence[object] = (),
) -> Host:
    """A real host on ``tmp_path/data`` with the Team plugin (and optional test plugins)."""
    extra: list[tuple[str, object]] = []
    if gates is not None:
        extra.append(("test-gates", gates))
    if flushes is not None:
        extra.append(("test-flushes", flushes))
    extra.extend((f"test-plugin-{index}", plugin) for index, plugin in enumerate(plugins))
    model = ScriptedModel.from_mapping(dict(script or {}))
    host = await Host.open(tmp_path / "data", None, model, extra_plugins=extra, wrap_storage=FaultyStorage)
    host.plugins.load("dsh-team", dict(config or {}))
    if invariant:
        host.plugins.load("dsh-team-invariant")
    return host


def teams_of(host: Host) -> TeamService:
    """The host's Team service (looked up on the host: a hot reload replaces the plugin module)."""
    found: TeamService = host.service(TeamServiceAPI)  # after a reload: the new module's class
    return found


@contextmanager
def restored_modules(prefix: str) -> Iterator[None]:
    """Put ``prefix``'s modules back after a test that hot-reloads them (later tests keep their classes)."""
    saved = {name: module for name, module in sys.modules.items() if name == prefix or name.startswith(prefix + ".")}
    try:
        yield
    finally:
        for name in [n for n in sys.modules if n == prefix or n.startswith(prefix + ".")]:
            del sys.modules[name]
        sys.modules.update(saved)
        for name, module in saved.items():
            parent, _, child = name.rpartition(".")
            if parent in sys.modules:
                setattr(sys.modules[parent], child, module)


async def lead(host: Host, session_id: str = "lead") -> Any:
    session = await host.create_session(session_id)
    return host.start_agent(session, name="lead")


async def resume_lead(host: Host, session_id: str = "lead") -> Any:
    session = await host.resume_session(session_id)
    return host.start_agent(session, name="lead", source="resume")


async def spawn(
    host: Host, root: Any, name: str, prompt: str = "work", *, context: str = "fresh", provider: str | None = None, **kw: Any
) -> Any:
    """``spawn_teammate`` with defaults (provider ``spawn`` for fresh, ``fork`` for fork)."""
    return await teams_of(host).spawn_teammate(
        root,
        name=name,
        description=kw.pop("description", f"{name} worker"),
        prompt=[text_block(prompt)],
        context=context,
        provider=provider or ("fork" if context == "fork" else "spawn"),
        **kw,
    )


async def until_released(host: Host, child_id: str) -> None:
    """Wait until the child left residency (its log is on disk and closed)."""
    await until(lambda: host.sessions.get(child_id) is None, what=f"{child_id} to be released")


def stored(tmp_path: Path, session_id: str) -> list[Event]:
    """Events of a log read straight from its JSONL file (what a restarted process sees)."""
    return JsonlStore(tmp_path / "data").read(session_id)[1]


def stored_team(tmp_path: Path, team_id: str = "lead") -> TeamState:
    """The Team state folded from the Lead's file."""
    return replay(stored(tmp_path, team_id), team_id)


def of_type(events: Sequence[Event], event_type: str) -> list[Any]:
    return [event.value() for event in events if event.type == event_type]


def user_texts(events: Sequence[Event]) -> list[str]:
    return [message_text(value["content"]) for value in of_type(events, EventType.USER_MESSAGE)]


def history_ids(events: Sequence[Event]) -> list[str]:
    return [value["id"] for value in of_type(events, EventType.USER_MESSAGE)]


def pending_ids(events: Sequence[Event]) -> list[str]:
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


def team_types(events: Sequence[Event]) -> list[str]:
    return [event.type for event in events if event.type.startswith("team/")]


def member_phases(state: TeamState) -> dict[str, str]:
    return {member.name: member.phase for member in state.members.listed()}


class OnSession:
    """Calls ``callback(session)`` for every created or resumed session (before its first write)."""

    def __init__(self, callback: Callable[[Any], Any]) -> None:
        self.callback = callback
        self.faults: dict[str, FaultyLog] = {}

    @hookimpl
    def dsh_session_created(self, host: Any, session: Any) -> None:
        found = self.callback(session)
        if isinstance(found, FaultyLog):
            self.faults[session.id] = found


class AfterPrompt:
    """Appends a marker to a child right after its first durable write (the accepted prompt),
    so the child's log is not fully durable when the creator's checkpoint runs."""

    def __init__(self) -> None:
        self.marked: set[str] = set()

    @hookimpl
    def dsh_session_flushed(self, host: Any, session: Any, durable_seq: int) -> None:
        if session.header.parent_session and session.id not in self.marked:
            self.marked.add(session.id)
            session.append("test/marker", {})


class Stubborn:
    """A ``stubborn`` tool that ignores cancellation until the test opens its gate."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()

    async def _run(self, args: BlockArgs, call: Any) -> BlockResult:
        self.entered.set()
        await self.gate.wait()
        return BlockResult(opened=True)

    @hookimpl
    def dsh_plugin_loaded(self, host: Any, ctx: Any) -> None:
        ctx.own(host.tools.register(ToolSpec("stubborn", "Ignore cancellation.", BlockArgs, BlockResult, self._run)))


def children(host: Host) -> list[str]:
    return [session.id for session in host.sessions.list() if session.header.parent_session is not None]


PARK = {"text": "park", "tool_calls": [BLOCK]}


async def parked_team(tmp_path: Path, *names: str, lead_script: list[Any] | None = None, **kw: Any) -> tuple[Any, Any, Gates, list[Any]]:
    """A host whose teammates (and optionally the Lead) park in ``block`` until their gate opens."""
    gates = Gates()
    script: dict[str, Any] = {name: [PARK] for name in names}
    if lead_script is not None:
        script["lead"] = lead_script
    host = await open_team(tmp_path, script, gates=gates, **kw)
    root = await lead(host)
    agents = []
    for name in names:
        view = await spawn(host, root, name)
        await gates.parked(name)
        agents.append(host.agents.get(view.id))
    return host, root, gates, agents
