"""``dsh chat``: a terminal conversation with the Lead, one turn per line, resumable.

::

    dsh chat --model llm:gpt-4o-mini            # a new session (profile agent-teams by default)
    dsh chat --resume [SESSION_ID]              # the most recent root session (or that one), same settings

Each line you type is the Lead's next turn (typed during a turn, it waits for the
next one); every member's activity streams in prefixed by its name, as in ``dsh
run``. Tool results show as one short line each (``/last [N]`` prints one in full) and a
teammate's identity reminder only the first time (:mod:`host_spec.host.cli.chat_render`).
Lines starting with ``/`` are commands: ``/help``, ``/last``, ``/exit`` and whatever
installed plugins contribute through entry-point group ``dsh.chat``
(:mod:`host_spec.chat`; the Team adds ``/team`` and ``/send``).

Ctrl-C during a turn cancels that turn (its inbox kept) and the conversation goes
on; at the prompt a second Ctrl-C in a row, Ctrl-D or ``/exit`` ends it: the host
closes (every session flushed, members' inboxes kept for a cold resume) and
``dsh chat --resume`` continues the same session id, history and settings, as does
``dsh resume``. A new session records its profile and model before the Lead does
anything (:mod:`host_spec.host.cli.run_settings`).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from host_spec.chat import CHAT_ENTRY_POINT_GROUP, ChatCommand
from host_spec.errors import DshError, SessionNotFoundError
from host_spec.messages import user_message
from host_spec.records import CancelCause

from host_spec.host.app import Host
from host_spec.host.cli.chat_render import ChatRender
from host_spec.host.cli.chat_terminal import ChatFeed, ChatTerminal
from host_spec.host.cli.extensions import CliEnvironment, Extension, StoreReader, discover_extensions
from host_spec.host.resume import continue_run
from host_spec.host.cli.run_commands import claim_root
from host_spec.host.cli.run_settings import RunSettings, absolute_spec, lookup, record
from host_spec.host.cli.usage import CliError, check_data_dir, workspace_dir
from host_spec.host.runs import agent_name
from host_spec.host.store.jsonl import JsonlStore

__all__ = ["add_parser", "run", "chat_commands", "DEFAULT_PROFILE"]

DEFAULT_PROFILE: Final = "agent-teams"
#: Conversation lines replayed when a session is resumed.
RECAP_LINES: Final = 12
_BUILTIN: Final = ("help", "last", "exit", "quit")


def add_parser(commands: Any, env: CliEnvironment) -> None:
    """Register ``dsh chat``."""
    chat = commands.add_parser("chat", help="talk with the Lead in the terminal, one turn per line",
                               description="A terminal conversation with the Lead; /help lists the commands.")
    chat.add_argument("--profile", default=None,
                      help=f"profile name or .toml (default: the session's own on --resume, else {DEFAULT_PROFILE})")
    chat.add_argument("--model", default=None,
                      help="model spec: llm:MODEL, openai:MODEL, scripted:FILE (default on --resume: the session's)")
    chat.add_argument("--workspace", default=".", type=Path,
                      help="directory the agents' file and shell tools work in (new sessions; default: .)")
    chat.add_argument("--resume", nargs="?", const="", default=None, metavar="SESSION_ID",
                      help="continue a stored session (default: the most recent root session)")
    env.add_data_dir(chat)


def chat_commands(contributors: Sequence[Extension] | None = None) -> dict[str, ChatCommand]:
    """Commands by name from ``(name, commands)`` contributors (default: the installed ``dsh.chat`` ones).

    A contributor that fails is reported and skipped; a built-in name or one already
    taken is ignored (the first contributor, by entry-point name, keeps a name).
    """
    found: dict[str, ChatCommand] = {}
    if contributors is None:
        contributors = discover_extensions(CHAT_ENTRY_POINT_GROUP, what="chat command")
    for name, contribute in contributors:
        try:
            for command in contribute():
                if command.name not in _BUILTIN:
                    found.setdefault(command.name, command)
        except Exception as exc:
            print(f'dsh: warning: chat command "{name}" failed: {type(exc).__name__}: {exc}', file=sys.stderr)
    return found


@attrs.define(eq=False)
class ChatSession:
    """One chat: the host, its root agent, the terminal and the commands (implements ``ChatContext``)."""

    host: Any  # the reference Host: it offers what ``protocols.Host`` names
    root: Any
    terminal: ChatTerminal
    commands: dict[str, ChatCommand]
    render: ChatRender = attrs.field(factory=ChatRender)
    _armed: bool = False
    _busy_since: float | None = None

    def write(self, line: str) -> None:
        self.terminal.write(line)

    def _running(self) -> list[str]:
        return [agent.name for agent in self.host.agents.list() if agent.status == "running"]

    async def _ticker(self) -> None:
        """The progress line: how long members have been running, and who."""
        while True:
            await asyncio.sleep(0.5)
            running = self._running()
            if not running:
                self._busy_since = None
                continue
            if self._busy_since is None:
                self._busy_since = time.monotonic()
            self.terminal.progress(self._busy_since, running)

    async def loop(self) -> None:
        """Read events until the user leaves."""
        ticker = asyncio.create_task(self._ticker())
        try:
            while True:
                if self.root.status != "running" and self.terminal.events.empty():  # typed-ahead lines first
                    self.terminal.clear_progress()
                    self.terminal.prompt()
                kind, value = await self.terminal.events.get()
                if kind == "eof":
                    return
                if kind == "interrupt":
                    if self._interrupt():
                        return
                elif kind == "line" and value is not None:
                    self._armed = False
                    if await self.handle_line(value.strip()):
                        return
        finally:
            ticker.cancel()
            await asyncio.gather(ticker, return_exceptions=True)

    def _interrupt(self) -> bool:
        """Ctrl-C: cancel the running turn, or at the prompt arm (then confirm) leaving; ``True``: leave."""
        if self.root.status == "running":
            self.root.cancel(CancelCause("user", "Ctrl-C"), keep_inbox=True)
            kept = len(self.root.inbox.pending())
            self.terminal.write(f"(interrupted; {kept} queued line(s) kept: they run before your next one)" if kept
                                else "(interrupted)")
            self._armed = False
            return False
        if self._armed:
            return True
        self._armed = True
        self.terminal.write("(Ctrl-C again, Ctrl-D or /exit to leave)")
        return False

    async def handle_line(self, line: str) -> bool:
        """One typed line: a ``/command`` or the Lead's next turn; ``True`` when the user leaves."""
        if not line:
            return False
        if line.startswith("/"):
            return await self._command(line[1:])
        busy = self.root.status == "running"
        self.root.followup(user_message(line))
        if busy:
            self.terminal.write("(queued: the lead reads it when this turn ends)")
        return False

    async def _command(self, text: str) -> bool:
        name, _, argument = text.partition(" ")
        if name in ("exit", "quit"):
            return True
        if name == "help":
            rows = [("help", "this list"), ("last [N]", "tool result N in full (default: the newest)"), ("exit", "leave (or Ctrl-D, or Ctrl-C twice at the prompt); "
                                                    "dsh chat --resume continues"),
                    *(((c.name + " " + c.usage).strip(), c.summary) for c in self.commands.values())]
            for synopsis, summary in rows:
                self.write(f"/{synopsis:<21} {summary}")
            return False
        if name == "last":
            for line in self.render.last(argument.strip()):
                self.write(line)
            return False
        command = self.commands.get(name)
        if command is None:
            self.write(f"unknown command /{name} (/help lists them)")
            return False
        try:
            result = command.run(self, argument.strip())
            if inspect.isawaitable(result):
                await result
        except DshError as exc:
            self.write(f"error: {exc.code}: {exc.message}")
        return False


async def _open(args: argparse.Namespace, feed: ChatFeed) -> tuple[Host, Any]:
    """The host and the root agent: a new session, or the stored one ``--resume`` names."""
    if args.resume is None:
        if args.model is None:
            raise CliError("dsh chat needs --model for a new session (or --resume)", code="CLI_USAGE")
        check_data_dir(args.data_dir, create=True)
        model = absolute_spec(args.model, prefix="scripted:")
        profile = args.profile or DEFAULT_PROFILE
        host = await Host.open(args.data_dir, profile, model, extra_plugins=[("dsh-chat", feed)])
        try:
            session = await claim_root(host, str(workspace_dir(args.workspace)))
            record(args.data_dir, session.id, RunSettings(absolute_spec(profile), model))
            feed.root_id = session.id
            return host, host.start_agent(session, name="lead", source="startup", model=host.models.default_spec)
        except BaseException:
            await host.close()
            raise
    store = JsonlStore(check_data_dir(args.data_dir, create=False))
    session_id = args.resume or StoreReader(store).latest_root()
    if not store.exists(session_id):
        raise SessionNotFoundError(f"session {session_id} not found in {args.data_dir}")
    recorded = lookup(args.data_dir, session_id)
    profile = args.profile or (recorded.profile if recorded is not None else DEFAULT_PROFILE)
    spec = args.model or (recorded.model if recorded is not None else None)
    if spec is None:
        raise CliError(f"session {session_id} has no recorded model: pass --model", code="CLI_USAGE")
    host = await Host.open(args.data_dir, profile, spec, extra_plugins=[("dsh-chat", feed)])
    try:
        session = await host.resume_session(session_id)
        feed.root_id = session.id
        _recap(feed, session)
        root = host.start_agent(session, name=agent_name(session), source="resume", model=host.models.default_spec)
        await continue_run(host, root, interrupted=bool(root.repaired))
        return host, root
    except BaseException:
        await host.close()
        raise


def _recap(feed: ChatFeed, session: Any) -> None:
    """The last lines of the stored conversation, so the user sees where it stands (``/last`` reaches its results)."""
    terminal = feed.terminal
    lines = [line for event in session.own_events() for line in feed.render.lines("lead", event)]
    turns = sum(1 for event in session.own_events() if event.type == "turn/end")
    terminal.write(f"(resumed session {session.id}: {turns} turns so far)")
    for line in lines[-RECAP_LINES:]:
        terminal.write(line)


async def run(args: argparse.Namespace) -> int:
    """``dsh chat``: converse until the user leaves; exit status 0.

    Raises:
        CliError: ``CLI_USAGE`` for a new session without ``--model``.
        SessionNotFoundError: ``--resume`` names nothing stored.
    """
    terminal = ChatTerminal()
    feed = ChatFeed(terminal, agent_name)
    host, root = await _open(args, feed)
    conversation = ChatSession(host, root, terminal, chat_commands(), render=feed.render)
    terminal.write(f"dsh chat: session {root.id} ({root.model or 'no model'}); /help for commands, Ctrl-D to leave")
    terminal.start()
    try:
        await conversation.loop()
    finally:
        terminal.stop()
        terminal.clear_progress()
        if terminal.prompt_shown:
            terminal.out.write("\n")
        await host.close()
    print(f"dsh: session {root.id} saved; continue with: dsh chat --resume {root.id}")
    return 0
