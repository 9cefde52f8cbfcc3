"""``dsh run`` and ``dsh resume``: drive a root session to quiescence in a host of its own.

Both open a host on the data directory with the CLI's transcript printer loaded
first (so it unloads last and prints to the end), optionally the Team panel
(``--web``) and watch mode (``--watch``), and exit 0 when the root's last turn
completed, else 1. The last line on stderr is ``dsh: session ID``; when the root's
last turn did not complete, one more line follows it, so a run never ends on a bare
id: how the turn ended (an error's code and message) and the ``dsh resume`` command
that continues it. A run on a shared store whose Team another process took over
(its lease claimed under a higher epoch) never ends as finished: it exits 2 with
``SESSION_FENCED``, naming the holder that has the Team now, however its last turn
ended.

A new run claims a fresh root id under that session's lock and records its profile
and model (:mod:`host_spec.host.cli.run_settings`) before the root does anything,
so a run killed at its first step still resumes with the same settings and two
runs on one data directory never share a root. ``dsh resume`` reads those
settings back; flags given again override them. ``--base-url`` and
``--api-key-env`` are folded into the ``openai:`` spec so the record keeps them;
the key itself never is recorded, only the name of its variable.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import attrs

from host_spec.errors import (
    ModelError,
    SessionExistsError,
    SessionFencedError,
    SessionLockedError,
    SessionNotFoundError,
)
from host_spec.events import EventType

from host_spec.host.app import Host
from host_spec.host.plugins.profiles import Profile, load_profile
from host_spec.host.cli.extensions import CliEnvironment, StoreReader
from host_spec.host.cli.run_settings import (
    RunSettings,
    absolute_spec,
    decode_settings,
    encode_settings,
    lookup,
    record,
)
from host_spec.host.cli.output import transcript_line
from host_spec.host.cli.transcript import Transcript
from host_spec.host.cli.usage import CliError, check_data_dir, workspace_dir
from host_spec.host.cli.watching import wait_for_stop, watching
from host_spec.host.runs import agent_name
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.store.selection import chosen_store, open_backend

__all__ = ["WEB_PLUGIN", "add_parsers", "resume", "run", "claim_root", "taken_over", "with_model_options"]

#: Entry-point name of the browser panel ``--web`` loads after the profile's plugins.
WEB_PLUGIN = "dsh-team-web"


class _NoModel:
    """Stands in when ``resume`` gets no ``--model``: a turn that needs one fails clearly."""

    async def complete(self, request: Any) -> Any:
        raise ModelError("no model configured; pass --model scripted:FILE", code="MODEL_UNKNOWN")


def add_parsers(commands: Any, env: CliEnvironment) -> None:
    """Register the ``run`` and ``resume`` subcommands on the ``dsh`` parser."""

    def model_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--base-url", default=None,
                         help="openai: server root, e.g. http://127.0.0.1:8080/v1 (default: $OPENAI_BASE_URL)")
        sub.add_argument("--api-key-env", default=None, metavar="NAME",
                         help="openai: environment variable holding the API key (default: OPENAI_API_KEY)")

    def watch(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--watch", action="store_true",
                         help="reload plugins whose source files change; stay up after the team is quiescent "
                              "until Ctrl-C (needs the dev extra: watchfiles)")
        sub.add_argument("--watch-path", action="append", default=[], type=Path, metavar="PATH",
                         help="also watch PATH (repeatable); a change there reloads every plugin")

    def keep(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--keep-worktrees", action="store_true",
                         help="keep teammates' git worktrees when the Team ends, merged or not (worktree mode)")

    def web(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--web", nargs="?", const=0, default=None, type=_port, metavar="PORT",
                         help="serve the Team panel on 127.0.0.1 during the run (--web=PORT; default: any free port)")

    run = commands.add_parser("run", help="run a new root session until the team is quiescent",
                              description="Run a new root session from PROMPT until every agent is idle.")
    run.add_argument("--profile", default="headless", help="built-in profile name or path to a .toml (default: headless)")
    run.add_argument("--model", required=True,
                     help="model spec: scripted:FILE, openai:MODEL[?tools=constrained&...] (entry points dsh.models)")
    model_options(run)
    run.add_argument("--workspace", default=".", type=Path,
                     help="directory the agents' file and shell tools work in (default: the current directory; "
                          "recorded in the session, so resume uses it again)")
    env.add_data_dir(run)
    web(run)
    watch(run)
    keep(run)
    run.add_argument("prompt", help="the user's task")

    resume = commands.add_parser("resume", help="resume a stored session and finish its pending work",
                                 description="Cold-resume a stored session (default: the most recent root).")
    resume.add_argument("--profile", default=None,
                        help="profile to load (default: the one the run was started with, else headless)")
    resume.add_argument("--model", default=None,
                        help="model spec, e.g. scripted:script.json (default: the one the run was started with)")
    model_options(resume)
    env.add_data_dir(resume)
    web(resume)
    watch(resume)
    keep(resume)
    resume.add_argument("session_id", nargs="?", default=None, help="session to resume")


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"PORT must be an integer, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"PORT must be 0..65535, got {value}")
    return value


def _last_end(agent: Any) -> dict[str, Any] | None:
    """The reason the root's last turn ended with (``None``: no turn ended)."""
    for event in reversed(agent.session.events):
        if event.type == EventType.TURN_END:
            return event.value().get("reason") or {}
    return None


#: Characters of an error message the closing line keeps (the log holds it all).
_ENDING_MESSAGE_CHARS = 300
#: Errors a resume with the same settings can only repeat: the way out the closing line names instead.
_NOT_RESUMABLE: Final = {
    "MODEL_TOOLS_UNSUPPORTED": "choose a model with tool support (for llm: models, `llm models list --tools`) "
                               "and run again with it (--model)",
}


def ending(reason: dict[str, Any] | None, session_id: str, data_dir: Path) -> str | None:
    """The closing line of a run whose root's last turn did not complete (``None`` when it did).

    It names how the turn ended (an error's code and a one-line message) and the exact
    ``dsh resume`` command that continues the run, so a failed run never ends silently;
    for an error a resume could only repeat (:data:`_NOT_RESUMABLE`) it names the way
    out instead.
    """
    if reason is None or reason.get("kind") == "completed":
        return None
    kind = str(reason.get("kind") or "unknown")
    error = reason.get("error") if kind == "error" else None
    if isinstance(error, dict):
        message = " ".join(str(error.get("message") or "").split())
        if len(message) > _ENDING_MESSAGE_CHARS:
            message = message[: _ENDING_MESSAGE_CHARS - 3] + "..."
        what = f"{error.get('code') or 'UNKNOWN'}: {message}" if message else str(error.get("code") or "UNKNOWN")
        way_out = _NOT_RESUMABLE.get(str(error.get("code")))
        if way_out is not None:
            return f"dsh: the run failed ({what}); {way_out}"
    else:
        what = f"the turn was {kind}"
    command = shlex.join(["dsh", "resume", "--data-dir", str(data_dir), session_id])
    return f"dsh: the run failed ({what}); resume it with: {command}"


#: The Team plugin, whose ``keep_worktrees`` ``--keep-worktrees`` sets.
TEAM_PLUGIN = "dsh-team"


def kept_worktrees(name: str) -> Profile:
    """Profile ``name`` with ``keep_worktrees = true`` in the Team plugin's table (``--keep-worktrees``)."""
    profile = load_profile(name)
    entries = tuple(
        attrs.evolve(entry, config={**entry.config, "keep_worktrees": True}) if entry.name == TEAM_PLUGIN else entry
        for entry in profile.plugins
    )
    return attrs.evolve(profile, plugins=entries)


async def _drive(args: argparse.Namespace, model: Any, session_id: str | None) -> int:
    transcript = Transcript(write=transcript_line, fallback=agent_name)
    if isinstance(model, str):
        model = absolute_spec(model, prefix="scripted:")  # agents and child descriptors record it as well
    location = args.store_url if args.store_url is not None else args.data_dir
    profile = kept_worktrees(args.profile) if args.keep_worktrees else args.profile
    host = await Host.open(location, profile, model, extra_plugins=[("dsh-transcript", transcript)])
    if args.store_url is not None:
        # A store that refuses for good (STORE_AUTH, ...) fails here on its one line, before the run says anything.
        try:
            await asyncio.to_thread(host.store.check)  # type: ignore[union-attr]
        except BaseException:
            await host.close()
            raise
    print(f"dsh: {host.sandbox.header()}", file=sys.stderr, flush=True)  # who runs sandboxed, and how
    try:
        if args.web is not None:  # after the profile's plugins: it unloads first, while the Team still runs
            host.plugins.load(WEB_PLUGIN, {"port": args.web})
        if args.watch or args.watch_path:
            async with watching(host, args.watch_path):
                agent = await _start(host, args, model, session_id)
                sys.stdout.flush()
                await wait_for_stop()
        else:
            agent = await _start(host, args, model, session_id)
    except SessionFencedError as exc:
        await host.close()
        raise taken_over(host) or exc from None
    except BaseException:
        await host.close()
        raise
    await host.close()  # before judging the run: closing may find the Team was taken over
    sys.stdout.flush()
    print(f"dsh: session {agent.id}", file=sys.stderr)
    lost = taken_over(host)
    if lost is not None:  # however the turn ended, a process that lost its Team did not finish it
        raise lost
    reason = _last_end(agent)
    closing = ending(reason, agent.id, args.data_dir)
    if closing is not None:
        print(closing, file=sys.stderr)
    return 0 if reason is None or reason.get("kind") == "completed" else 1


def taken_over(host: Host) -> SessionFencedError | None:
    """How ``host``'s store lost the Team to another holder (``SESSION_FENCED``, naming it), or ``None``.

    Only a shared store's lease can be lost; an embedded store answers ``None``.
    """
    takeover = getattr(host.store, "takeover", None)
    return takeover() if takeover is not None else None


async def _start(host: Host, args: argparse.Namespace, model: Any, session_id: str | None) -> Any:
    """Run a new root (``session_id`` None) or resume one, to quiescence."""
    if session_id is not None:
        return await host.resume(session_id)
    session = await claim_root(host, args.workspace)
    # Under the session's lock (no other run can hold this id), before the root
    # runs (a crash at step 1 still resumes with the right profile and model).
    settings = RunSettings(absolute_spec(args.profile), model)
    if args.store_url is not None:  # a shared store keeps the record, so any machine can resume
        host.store.put_run(session.id, encode_settings(settings))  # type: ignore[union-attr]
    else:
        record(args.data_dir, session.id, settings)
    return await host.run(args.prompt, session=session)


#: Fresh ids tried before a new run gives up (other runs on the same data dir hold them).
_CLAIM_ATTEMPTS = 1000


async def claim_root(host: Host, cwd: str | None) -> Any:
    """Create and lock a fresh root session; an id another run holds is skipped, never shared.

    Raises:
        SessionLockedError: every id tried was taken.
    """
    attempts = _CLAIM_ATTEMPTS
    while True:
        attempts -= 1
        try:
            return await host.create_session(host.sessions.new_id(), cwd=cwd)
        except (SessionLockedError, SessionExistsError):
            if not attempts:
                raise
            # another process created it between the check and the lock: take the next id


def with_model_options(spec: str, args: argparse.Namespace) -> str:
    """Fold ``--base-url`` / ``--api-key-env`` into an ``openai:`` spec, so the run record keeps them.

    The spec is recorded and resolved again by ``dsh resume``; the key never is: only
    the *name* of its variable goes into the spec.
    """
    options = [(key, value) for key, value in (("base_url", args.base_url), ("api_key_env", args.api_key_env))
               if value is not None]
    if not options:
        return spec
    if not spec.startswith("openai:"):
        raise CliError("--base-url and --api-key-env apply to openai: models only", code="CLI_USAGE")
    query = "&".join(f"{key}={quote(value, safe=':/')}" for key, value in options)
    return f"{spec}{'&' if '?' in spec else '?'}{query}"


async def run(args: argparse.Namespace) -> int:
    """``dsh run``: a new root session from ``args.prompt`` to quiescence; the exit status."""
    args.store_url = chosen_store(args.store, args.profile)
    if args.store_url is None:
        check_data_dir(args.data_dir, create=True)
    args.workspace = workspace_dir(args.workspace)
    args.model = with_model_options(args.model, args)
    return await _drive(args, args.model, None)


async def resume(args: argparse.Namespace) -> int:
    """``dsh resume``: a stored root (default: the most recent) to quiescence; the exit status.

    Raises:
        SessionNotFoundError: nothing is stored under the session id.
    """
    args.store_url = chosen_store(args.store, args.profile)
    recorded: RunSettings | None
    if args.store_url is not None:
        from host_spec.host.cli.backend_reader import BackendReader  # needs the postgres extra

        shared: Any = open_backend(args.store_url)
        try:
            session_id = args.session_id or BackendReader(shared).latest_root()
            if not shared.exists(session_id):
                raise SessionNotFoundError(f"session {session_id} not found in the store")
            data = shared.get_run(session_id)
            recorded = decode_settings(data) if data is not None else None
        finally:
            shared.close()
    else:
        store = JsonlStore(check_data_dir(args.data_dir, create=False))
        session_id = args.session_id or StoreReader(store).latest_root()  # headers only: a damaged child log is no obstacle
        if not store.exists(session_id):
            raise SessionNotFoundError(f"session {session_id} not found in {args.data_dir}")
        recorded = lookup(args.data_dir, session_id)
    args.prompt = None
    if args.profile is None:
        args.profile = recorded.profile if recorded is not None else "headless"
    spec = args.model or (recorded.model if recorded is not None else None)
    model = with_model_options(spec, args) if spec is not None else _NoModel()
    return await _drive(args, model, session_id)
