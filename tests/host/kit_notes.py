"""A one-tool plugin (``note``) and a host opener for the model adapter tests.

``note`` appends its text to ``NotesPlugin.notes`` so a test can tell a call that
ran from one that was only recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import msgspec

from host_spec import hookimpl
from host_spec.events import Event, EventType
from host_spec.host.app import Host
from host_spec.records import ToolSpec

KEY_ENV = "DSH_TEST_MODEL_KEY"
KEY = "sk-test-0123456789abcdef-SECRET"


class NoteArgs(msgspec.Struct, forbid_unknown_fields=True):
    """Write a note."""

    text: Annotated[str, msgspec.Meta(max_length=60)]  # bounded, so a constrained tiny model's JSON stays short


class NoteResult(msgspec.Struct):
    saved: bool


class NotesPlugin:
    def __init__(self) -> None:
        self.notes: list[str] = []

    async def _note(self, args: NoteArgs, call: Any) -> NoteResult:
        self.notes.append(args.text)
        return NoteResult(saved=True)

    @hookimpl
    def dsh_plugin_loaded(self, host: Any, ctx: Any) -> None:
        ctx.own(host.tools.register(ToolSpec("note", "Write a note.", NoteArgs, NoteResult, self._note)))


def spec(base_url: str, options: str = "") -> str:
    """An ``openai:`` spec for the stub server with tiny backoffs."""
    extra = f"&{options}" if options else ""
    return f"openai:stub-model?base_url={base_url}&api_key_env={KEY_ENV}&backoff=0.01{extra}"


async def open_notes(data: Path, model: str) -> tuple[Host, NotesPlugin]:
    notes = NotesPlugin()
    host = await Host.open(data, None, model, extra_plugins=[("notes", notes)])
    return host, notes


async def run_prompt(data: Path, model: str, prompt: str = "write a note") -> tuple[list[Event], NotesPlugin]:
    """One root run to quiescence; returns the root's events and the plugin."""
    host, notes = await open_notes(data, model)
    try:
        agent = await host.run(prompt)
        events = list(agent.session.events)
    finally:
        await host.close()
    return events, notes


def of(events: list[Event], kind: str) -> list[dict[str, Any]]:
    return [e.value() for e in events if e.type == kind]


def turn_end(events: list[Event]) -> dict[str, Any]:
    return of(events, EventType.TURN_END)[-1]["reason"]

