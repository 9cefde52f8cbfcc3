"""One editor session: a host of its own with the run's Lead, opened new or from the store.

An editor session is a root session, and its id is the root's id, so the editor
can ``session/load`` it later, and ``dsh resume``, ``dsh chat --resume`` and
``dsh team show`` know it too. Both ways in are the ones ``dsh chat`` and
``dsh resume`` take, nothing of their own:

* **new** (:func:`open_new`): ``claim_root`` a fresh root in the client's ``cwd``
  (the workspace), record the profile and model before the Lead does anything
  (:mod:`host_spec.host.cli.run_settings`, or the shared store's run record), start
  the Lead. It waits for its first prompt.
* **load** (:func:`open_stored`): resume the stored root (crash closers appended
  while it is rebuilt), replay its log and its members' logs as updates, in the
  order they were written (:func:`replay`), then
  :func:`~host_spec.host.resume.continue_run` exactly as ``dsh resume``: an
  interrupted turn gets the resume notice and the Lead carries on; a failed one is
  retried; members with work are cold-resumed.

The client's ``mcpServers`` join the profile's MCP servers
(:func:`~host_spec.host.acp.servers.joined_profile`). The host stays open between
prompts: the Team goes on working, and its updates keep streaming.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import structlog

from host_spec.errors import DshError, SessionNotFoundError
from host_spec.events import Event, EventType
from host_spec.permissions import PermissionDesk

from host_spec.host.acp.asks import EditorAsks
from host_spec.host.acp.feed import RunFeed, UpdateSender
from host_spec.host.acp.progress import Progress, progress_sources
from host_spec.host.acp.servers import joined_profile
from host_spec.host.acp.updates import event_updates
from host_spec.host.app import Host
from host_spec.host.cli.extensions import StoreReader
from host_spec.host.resume import continue_run
from host_spec.host.cli.run_commands import claim_root
from host_spec.host.cli.run_settings import RunSettings, absolute_spec, decode_settings, encode_settings, lookup, record
from host_spec.host.cli.usage import CliError, check_data_dir, workspace_dir
from host_spec.host.runs import agent_name
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.store.selection import chosen_store, open_backend

__all__ = ["DEFAULT_PROFILE", "AcpOptions", "RunSession", "open_new", "open_stored", "replay"]

log = structlog.get_logger(__name__)

#: The profile of a new session unless ``--profile`` says otherwise (as ``dsh chat``).
DEFAULT_PROFILE = "agent-teams"


@attrs.frozen
class AcpOptions:
    """What ``dsh acp`` was started with (its flags)."""

    data_dir: Path
    profile: str | None = None
    model: str | None = None
    store: str | None = None


@attrs.define(eq=False)
class RunSession:
    """A live editor session: its host, the Lead, the feed and the task sending updates."""

    host: Host
    root: Any
    feed: RunFeed
    sending: asyncio.Task[None]
    asks: EditorAsks | None = None

    def ask_editor(self, client: Any) -> None:
        """Put the Team's permission asks to the editor from now on, and those open now (none: no Team plugin)."""
        desk = self.host.find_service(PermissionDesk)
        if desk is None:
            return
        self.asks = EditorAsks(desk, self.root, client, self.id, self.feed.sender.drained)
        self.asks.open_now()

    @property
    def id(self) -> str:
        return str(self.root.id)

    async def close(self) -> None:
        """Close the host (members keep their inboxes for a cold resume), then stop sending."""
        try:
            if self.asks is not None:
                await self.asks.close()
            await self.host.close()
        finally:
            self.sending.cancel()
            await asyncio.gather(self.sending, return_exceptions=True)


def _location(options: AcpOptions, profile: str, *, create: bool) -> tuple[str | None, Any]:
    url = chosen_store(options.store, profile)
    if url is None:
        check_data_dir(options.data_dir, create=create)
    return url, url if url is not None else options.data_dir


async def _host(location: Any, profile: str, servers: Any, model: str, feed: RunFeed) -> Host:
    return await Host.open(location, joined_profile(profile, servers), model, extra_plugins=[("dsh-acp", feed)])


def _start(host: Host, root: Any, feed: RunFeed) -> RunSession:
    feed.root_id = feed.sender.session_id = root.id
    feed.sender.progress = Progress(host, root, progress_sources())
    return RunSession(host, root, feed, asyncio.get_running_loop().create_task(feed.sender.run()))


async def open_new(options: AcpOptions, cwd: str, servers: Any, sender: UpdateSender) -> RunSession:
    """A new root session in ``cwd`` and its Lead (``session/new``).

    Raises:
        CliError: ``CLI_USAGE`` without ``--model``; ``WORKSPACE_NOT_FOUND`` for a ``cwd`` that is no directory.
        DshError: the profile, model or a store refused.
    """
    if options.model is None:
        raise CliError("dsh acp needs --model for a new session (session/load uses the stored one)", code="CLI_USAGE")
    workspace = workspace_dir(Path(cwd))
    profile = options.profile or DEFAULT_PROFILE
    url, location = _location(options, profile, create=True)
    model = absolute_spec(options.model, prefix="scripted:")
    feed = RunFeed(sender)
    host = await _host(location, profile, servers, model, feed)
    try:
        session = await claim_root(host, workspace)
        settings = RunSettings(absolute_spec(profile), model)
        if url is not None:  # a shared store keeps the record, so any machine can load the session
            host.store.put_run(session.id, encode_settings(settings))  # type: ignore[union-attr]
        else:
            record(options.data_dir, session.id, settings)
        root = host.start_agent(session, name="lead", source="startup", model=host.models.default_spec)
    except BaseException:
        await host.close()
        raise
    return _start(host, root, feed)


def _not_a_run(session_id: str) -> SessionNotFoundError:
    return SessionNotFoundError(f"session {session_id} is a member's session, not a run's root: load the Lead's session",
                                session=session_id)


def _recorded(options: AcpOptions, url: str | None, session_id: str) -> RunSettings | None:
    """The stored run's profile and model (``None``: never recorded).

    Raises:
        SessionNotFoundError: nothing is stored under ``session_id``, or it is a member's session.
    """
    if url is not None:
        from host_spec.host.cli.backend_reader import BackendReader  # needs the postgres extra

        shared: Any = open_backend(url)
        try:
            if not shared.exists(session_id):
                raise SessionNotFoundError(f"session {session_id} not found in the store", session=session_id)
            if BackendReader(shared).header(session_id).parent_session is not None:
                raise _not_a_run(session_id)
            data = shared.get_run(session_id)
            return decode_settings(data) if data is not None else None
        finally:
            shared.close()
    store = JsonlStore(options.data_dir)
    if not store.exists(session_id):
        raise SessionNotFoundError(f"session {session_id} not found in {options.data_dir}", session=session_id)
    if StoreReader(store).header(session_id).parent_session is not None:
        raise _not_a_run(session_id)
    return lookup(options.data_dir, session_id)


async def _member_logs(host: Host, root_id: str) -> list[tuple[str, str, Sequence[Event]]]:
    """``(name, session id, own events)`` of each member of the run, read without loading it.

    A member log that cannot be read is left out of the replay (logged); loading the run
    reports it when the member is woken.
    """
    logs: list[tuple[str, str, Sequence[Event]]] = []
    for child in await host.continuations.directory.list(root_id):
        try:
            stored = await host.sessions.inspect(child.child_id)
        except DshError as exc:
            log.warning("acp.member_not_replayed", member=child.child_id, error=str(exc))
            continue
        logs.append((child.name or child.label or child.child_id, child.child_id, stored.own_events()))
    return logs


def replay(logs: Sequence[tuple[str, str, Sequence[Event]]]) -> list[Any]:
    """The updates of stored logs (the Lead's first), merged in the order they were written.

    Events of different sessions interleave by commit time (then by log, then by seq), as
    they streamed live; the first log is the Lead's.
    """
    merged = sorted(((event.time, index, event.seq, event) for index, (_, _, events) in enumerate(logs)
                     for event in events), key=lambda entry: entry[:3])
    updates: list[Any] = []
    for _, index, _, event in merged:
        name, session_id, _ = logs[index]
        updates += event_updates(name, session_id, event, lead=index == 0, replay=True)
    return updates


def _last_turn_failed(events: Any) -> bool:
    for event in reversed(events):
        if event.type == EventType.TURN_END:
            return (event.value().get("reason") or {}).get("kind") == "error"
    return False


async def open_stored(options: AcpOptions, session_id: str, servers: Any, sender: UpdateSender) -> RunSession:
    """The stored root ``session_id``, replayed into ``sender``, then continued as ``dsh resume`` would.

    Raises:
        SessionNotFoundError: nothing stored under ``session_id``, or it is a member's session.
        CliError: ``CLI_USAGE`` when neither ``--model`` nor the record names a model.
        DshError: the store, profile or model refused (``SESSION_LOCKED``: live in another process).
    """
    url, location = _location(options, options.profile or DEFAULT_PROFILE, create=False)
    recorded = _recorded(options, url, session_id)
    profile = options.profile or (recorded.profile if recorded is not None else DEFAULT_PROFILE)
    model = options.model or (recorded.model if recorded is not None else None)
    if model is None:
        raise CliError(f"session {session_id} has no recorded model: start dsh acp with --model", code="CLI_USAGE")
    if options.model is not None:
        model = absolute_spec(model, prefix="scripted:")
    feed = RunFeed(sender, live=False)  # the log's events are sent once, by the replay below
    host = await _host(location, profile, servers, model, feed)
    run: RunSession | None = None
    try:
        members = await _member_logs(host, session_id)  # asleep on disk until continue_run wakes them
        session = await host.resume_session(session_id)
        root = host.start_agent(session, name=agent_name(session), source="resume", model=host.models.default_spec)
        run = _start(host, root, feed)
        # No await since the agent started: the replay holds exactly what the logs hold now,
        # and everything appended from here on streams live, after it.
        for update in replay([("lead", root.id, session.own_events()), *members]):
            sender.put(update)
        feed.live = True
        sender.progress_changed()
        await continue_run(host, root, interrupted=bool(root.repaired), failed=_last_turn_failed(session.events))
        await sender.drained()
        return run
    except BaseException:
        await (run.close() if run is not None else host.close())
        raise
