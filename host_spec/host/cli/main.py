"""The ``dsh`` command: run a root session to quiescence, resume one, print a log.

::

    dsh run --profile agent-teams --model scripted:script.json [--workspace DIR] "build the thing"
    dsh run --profile agent-teams --model openai:gpt-4o-mini "build the thing"   # key from $OPENAI_API_KEY
    dsh run --web=8765 ...             # also serve the Team panel (plugin dsh-team-web) during the run
    dsh resume [SESSION_ID]            # default: the most recent root session
    dsh log SESSION_ID                 # every event of one stored session
    dsh trace export [--out FILE]      # a run as OpenTelemetry spans (OTLP JSON), plugins' events included
    dsh team show [SESSION_ID]         # from an installed CLI extension (entry points "dsh.cli")

Every subcommand takes ``--data-dir`` (default ``$DSH_DATA_DIR`` or ``./.dsh-data``).
Errors print ``dsh: <code>: <message>`` on stderr and exit 2, without a traceback.
``run`` and ``resume`` exit 0 when the root's last turn completed, else 1. This is
the only module that configures structlog (to stderr; ``-v`` for more).

Extension commands come from entry-point group ``dsh.cli`` (:mod:`host_spec.cli`,
:mod:`host_spec.host.cli.extensions`); their handlers return their own exit status and
their errors are reported like the built-in commands'.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import structlog

from host_spec.cli import HANDLER_KEY
from host_spec.errors import DshError, ModelError, SessionExistsError, SessionLockedError, SessionNotFoundError
from host_spec.events import EventType, encode_event, encode_header

from host_spec.host.app import Host
from host_spec.host.runs import agent_name
from host_spec.host.cli.extensions import CliEnvironment, Extension, StoreReader, discover_extensions, register_extensions
from host_spec.host.cli.run_settings import RunSettings, absolute_spec, lookup, record
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.cli import plugins_list, traces
from host_spec.host.cli.transcript import Transcript, format_event
from host_spec.host.cli.watching import wait_for_stop, watching

__all__ = ["main", "build_parser"]

DEFAULT_DATA_DIR = ".dsh-data"
#: Entry-point name of the browser panel ``--web`` loads after the profile's plugins.
WEB_PLUGIN = "dsh-team-web"


class CliError(DshError):
    """A usage problem the CLI detects itself (data directory, missing session)."""

    code = "CLI_ERROR"


class _NoModel:
    """Stands in when ``resume`` gets no ``--model``: a turn that needs one fails clearly."""

    async def complete(self, request: Any) -> Any:
        raise ModelError("no model configured; pass --model scripted:FILE", code="MODEL_UNKNOWN")


def _default_data_dir() -> str:
    return os.environ.get("DSH_DATA_DIR") or DEFAULT_DATA_DIR


def build_parser(
    extensions: Sequence[Extension] | None = None, *, trace_contributors: Sequence[Any] | None = None
) -> argparse.ArgumentParser:
    """The ``dsh`` parser: built-in commands, then CLI extensions (default: the installed ones).

    ``trace_contributors`` replace the installed ``dsh.trace`` contributors of ``dsh trace export``.
    """
    parser = argparse.ArgumentParser(prog="dsh", description="Reference host for dsh plugins (Agent Teams).")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more to stderr (-v info, -vv debug)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def data_dir(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--data-dir", default=_default_data_dir(), type=Path,
                         help="session store root (default: $DSH_DATA_DIR or ./.dsh-data)")

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
    data_dir(run)
    web(run)
    watch(run)
    run.add_argument("prompt", help="the user's task")

    resume = commands.add_parser("resume", help="resume a stored session and finish its pending work",
                                 description="Cold-resume a stored session (default: the most recent root).")
    resume.add_argument("--profile", default=None,
                        help="profile to load (default: the one the run was started with, else headless)")
    resume.add_argument("--model", default=None,
                        help="model spec, e.g. scripted:script.json (default: the one the run was started with)")
    model_options(resume)
    data_dir(resume)
    web(resume)
    watch(resume)
    resume.add_argument("session_id", nargs="?", default=None, help="session to resume")

    log = commands.add_parser("log", help="print the events of a stored session",
                              description="Print every event of a stored session (read-only).")
    data_dir(log)
    log.add_argument("--json", action="store_true", help="print the raw JSONL lines")
    log.add_argument("session_id", help="session to print")
    plugins_list.add_parser(commands)
    env = CliEnvironment(default_data_dir=_default_data_dir, check_data_dir=_data_dir)
    traces.add_parser(commands, env, trace_contributors)
    register_extensions(commands, env, discover_extensions() if extensions is None else extensions)
    return parser


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"PORT must be an integer, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"PORT must be 0..65535, got {value}")
    return value


class _Stderr:
    """Resolves ``sys.stderr`` at every write, so a swapped stream (tests, redirection) is honoured."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _configure_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.dev.ConsoleRenderer(colors=False)],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(_Stderr()),  # type: ignore[arg-type]  # structlog wants a TextIO; _Stderr writes like one
        cache_logger_on_first_use=False,
    )


def _data_dir(path: Path, *, create: bool) -> Path:
    if path.exists() and not path.is_dir():
        raise CliError(f"data dir {path} is not a directory", code="DATA_DIR_UNUSABLE")
    if not path.exists():
        if not create:
            raise CliError(f"data dir {path} does not exist", code="DATA_DIR_NOT_FOUND")
        try:
            path.mkdir(parents=True)
        except OSError as exc:
            raise CliError(f"cannot create data dir {path}: {exc.strerror}", code="DATA_DIR_UNUSABLE") from None
    if not os.access(path, os.R_OK | os.X_OK | (os.W_OK if create else 0)):
        raise CliError(f"data dir {path} is not accessible", code="DATA_DIR_UNUSABLE")
    return path


def _exit_code(agent: Any) -> int:
    for event in reversed(agent.session.events):
        if event.type == EventType.TURN_END:
            return 0 if (event.value().get("reason") or {}).get("kind") == "completed" else 1
    return 0


async def _drive(args: argparse.Namespace, model: Any, session_id: str | None) -> int:
    transcript = Transcript(write=print, fallback=agent_name)
    if isinstance(model, str):
        model = absolute_spec(model, prefix="scripted:")  # agents and child descriptors record it as well
    host = await Host.open(args.data_dir, args.profile, model, extra_plugins=[("dsh-transcript", transcript)])
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
        code = _exit_code(agent)
        print(f"dsh: session {agent.id}", file=sys.stderr)
    finally:
        await host.close()
    sys.stdout.flush()
    return code


async def _start(host: Host, args: argparse.Namespace, model: Any, session_id: str | None) -> Any:
    """Run a new root (``session_id`` None) or resume one, to quiescence."""
    if session_id is not None:
        return await host.resume(session_id)
    session = await _claim_root(host, args.workspace)
    # Under the session's lock (no other run can hold this id), before the root
    # runs (a crash at step 1 still resumes with the right profile and model).
    record(args.data_dir, session.id, RunSettings(absolute_spec(args.profile), model))
    return await host.run(args.prompt, session=session)


#: Fresh ids tried before a new run gives up (other runs on the same data dir hold them).
_CLAIM_ATTEMPTS = 1000


async def _claim_root(host: Host, cwd: str | None) -> Any:
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


def _workspace(path: Path) -> str:
    if not path.is_dir():
        raise CliError(f"workspace {path} is not a directory", code="WORKSPACE_NOT_FOUND")
    return os.path.realpath(path)


def _with_options(spec: str, args: argparse.Namespace) -> str:
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


async def _run(args: argparse.Namespace) -> int:
    _data_dir(args.data_dir, create=True)
    args.workspace = _workspace(args.workspace)
    args.model = _with_options(args.model, args)
    return await _drive(args, args.model, None)


async def _resume(args: argparse.Namespace) -> int:
    store = JsonlStore(_data_dir(args.data_dir, create=False))
    session_id = args.session_id or StoreReader(store).latest_root()  # headers only: a damaged child log is no obstacle
    if not store.exists(session_id):
        raise SessionNotFoundError(f"session {session_id} not found in {args.data_dir}")
    args.prompt = None
    recorded = lookup(args.data_dir, session_id)
    if args.profile is None:
        args.profile = recorded.profile if recorded is not None else "headless"
    spec = args.model or (recorded.model if recorded is not None else None)
    model = _with_options(spec, args) if spec is not None else _NoModel()
    return await _drive(args, model, session_id)


async def _log(args: argparse.Namespace) -> int:
    store = JsonlStore(_data_dir(args.data_dir, create=False))
    header, events = store.read(args.session_id)
    if args.json:
        print(encode_header(header).decode())
        for event in events:
            print(encode_event(event).decode())
        return 0
    parent = f" parent={header.parent_session}" if header.parent_session else ""
    print(f"session {header.id}{parent} seed_length={header.seed_length} events={len(events)}")
    for event in events:
        print(format_event(event))
    return 0


async def _extension(args: argparse.Namespace) -> int:
    result = getattr(args, HANDLER_KEY)(args)
    return await result if inspect.isawaitable(result) else result


_HANDLERS = {"run": _run, "resume": _resume, "log": _log, "plugins": plugins_list.run, "trace": traces.run}


def main(
    argv: Sequence[str] | None = None,
    *,
    extensions: Sequence[Extension] | None = None,
    trace_contributors: Sequence[Any] | None = None,
) -> int:
    """Entry point of the ``dsh`` console script; returns the exit status.

    Args:
        argv: Arguments (default ``sys.argv[1:]``).
        extensions: ``(name, register)`` CLI extensions instead of the installed ones (tests).
        trace_contributors: ``(name, contribute)`` trace contributors instead of the installed ones (tests).
    """
    args = build_parser(extensions, trace_contributors=trace_contributors).parse_args(argv)
    _configure_logging(args.verbose)
    handler = _extension if getattr(args, HANDLER_KEY, None) is not None else _HANDLERS[args.command]
    try:
        return asyncio.run(handler(args))
    except DshError as exc:
        print(f"dsh: {exc.code}: {exc.message}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"dsh: IO_ERROR: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dsh: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: one line by default, the traceback with -v
        if args.verbose:
            raise
        print(f"dsh: INTERNAL_ERROR: {type(exc).__name__}: {exc} (rerun with -v for details)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
