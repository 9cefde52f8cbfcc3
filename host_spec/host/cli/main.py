"""The ``dsh`` command: run a root session to quiescence, resume one, print a log.

::

    dsh run --profile agent-teams --model scripted:script.json [--workspace DIR] "build the thing"
    dsh run --profile agent-teams --model openai:gpt-4o-mini "build the thing"   # key from $OPENAI_API_KEY
    dsh run --web=8765 ...             # also serve the Team panel (plugin dsh-team-web) during the run
    dsh resume [SESSION_ID]            # default: the most recent root session
    dsh log SESSION_ID                 # every event of one stored session
    dsh trace export [--out FILE]      # a run as OpenTelemetry spans (OTLP JSON), plugins' events included
    dsh chat --model llm:MODEL         # talk with the Lead in the terminal; dsh chat --resume continues
    dsh team show [SESSION_ID]         # from an installed CLI extension (entry points "dsh.cli")
    dsh worker --store URL             # take over Teams of a shared store whose process died
    dsh acp --model llm:MODEL          # the Lead as an Agent Client Protocol agent for editors (stdio)
    dsh demo [DIR]                     # the scripted demo team shipped in the package, then what it did
    dsh --version                      # dsh <version of the installed dsh-team distribution>

Every subcommand takes ``--data-dir`` (default ``$DSH_DATA_DIR`` or ``./.dsh-data``).
Errors print ``dsh: <code>: <message>`` on stderr and exit 2, without a traceback.
``run`` and ``resume`` exit 0 when the root's last turn completed, else 1. This is
the only module that configures structlog (to stderr; ``-v`` for more).

Each built-in command lives in a module of its own (:mod:`~host_spec.host.cli.run_commands`,
:mod:`~host_spec.host.cli.session_log`, :mod:`~host_spec.host.cli.plugins_list`,
:mod:`~host_spec.host.cli.traces`, :mod:`~host_spec.host.cli.demo`); this module only
assembles the parser and reports errors. Nothing it imports needs an optional extra:
a command imports its extra's modules when it runs, after
:func:`host_spec.extras.require`. Extension commands come from entry-point group ``dsh.cli``
(:mod:`host_spec.cli`, :mod:`host_spec.host.cli.extensions`); their handlers return
their own exit status and their errors are reported like the built-in commands'.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import logging
from importlib import metadata
import sys
from collections.abc import MutableMapping, Sequence
from typing import Any

import structlog

from host_spec.cli import HANDLER_KEY
from host_spec.errors import DshError, coded_leaves

from host_spec.host.cli import chat, demo, plugins_list, run_commands, session_log, traces, worker
from host_spec.host.cli.output import reader_gone
from host_spec.host.cli.extensions import CliEnvironment, Extension, discover_extensions, register_extensions
from host_spec.host.cli.usage import check_data_dir, default_data_dir
from host_spec.host.redaction import redact_url

__all__ = ["DISTRIBUTION", "main", "build_parser", "version"]

#: The distribution whose installed metadata ``dsh --version`` reports.
DISTRIBUTION = "dsh-team"


def version() -> str:
    """The installed ``dsh-team`` version (from package metadata, the one place it is kept)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown (not installed)"


def build_parser(
    extensions: Sequence[Extension] | None = None, *, trace_contributors: Sequence[Any] | None = None
) -> argparse.ArgumentParser:
    """The ``dsh`` parser: built-in commands, then CLI extensions (default: the installed ones).

    ``trace_contributors`` replace the installed ``dsh.trace`` contributors of ``dsh trace export``.
    """
    parser = argparse.ArgumentParser(prog="dsh", description="Reference host for dsh plugins (Agent Teams).")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more to stderr (-v info, -vv debug)")
    parser.add_argument("--version", action="version", version=f"dsh {version()}", help="print the version and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    env = CliEnvironment(default_data_dir=default_data_dir, check_data_dir=check_data_dir)
    run_commands.add_parsers(commands, env)
    session_log.add_parser(commands, env)
    plugins_list.add_parser(commands)
    traces.add_parser(commands, env, trace_contributors)
    chat.add_parser(commands, env)
    worker.add_parser(commands)
    demo.add_parser(commands)
    register_extensions(commands, env, discover_extensions() if extensions is None else extensions)
    return parser


class _Stderr:
    """Resolves ``sys.stderr`` at every write, so a swapped stream (tests, redirection) is honoured."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _coded_in_one_line(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """A log line's coded error (a ``DshError``, a group of them, an ``OSError``) as ``error="CODE: message"``.

    A store or fencing error is an operator's fact, not a bug: it reaches the user
    on one line. An uncoded exception keeps its traceback; ``-v`` keeps them all.
    """
    given = event.get("exc_info")
    failure = sys.exc_info()[1] if given is True else given[1] if isinstance(given, tuple) else given
    if isinstance(failure, BaseException):
        coded = coded_leaves(failure)
        if coded:
            text = "; ".join(f"{leaf.code}: {leaf.message}" for leaf in coded)
        elif isinstance(failure, OSError):
            text = f"{type(failure).__name__}: {failure}"
        else:
            return event
        del event["exc_info"]
        event["error"] = redact_url(" ".join(text.split()))
    return event


def _configure_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    one_line = [_coded_in_one_line] if verbosity <= 0 else []
    structlog.configure(
        processors=[structlog.processors.add_log_level, *one_line, structlog.dev.ConsoleRenderer(colors=False)],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(_Stderr()),  # type: ignore[arg-type]  # structlog wants a TextIO; _Stderr writes like one
        cache_logger_on_first_use=False,
    )


async def _extension(args: argparse.Namespace) -> int:
    result = getattr(args, HANDLER_KEY)(args)
    return await result if inspect.isawaitable(result) else result


_HANDLERS = {
    "run": run_commands.run,
    "resume": run_commands.resume,
    "log": session_log.run,
    "plugins": plugins_list.run,
    "trace": traces.run,
    "chat": chat.run,
    "worker": worker.run,
    "demo": demo.run,
}


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
    try:
        return _main(argv, extensions, trace_contributors)
    except BrokenPipeError:  # the reader of our output left (``dsh team show | head``): end as SIGPIPE would
        return reader_gone()


def _main(argv: Sequence[str] | None, extensions: Sequence[Extension] | None,
          trace_contributors: Sequence[Any] | None) -> int:
    args = build_parser(extensions, trace_contributors=trace_contributors).parse_args(argv)
    _configure_logging(args.verbose)
    handler = _extension if getattr(args, HANDLER_KEY, None) is not None else _HANDLERS[args.command]
    try:
        status = asyncio.run(handler(args))
        sys.stdout.flush()  # a reader that left shows here, not as a noisy error at the interpreter's exit
        return status
    except BrokenPipeError:
        raise
    except DshError as exc:
        print(f"dsh: {exc.code}: {redact_url(exc.message)}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"dsh: IO_ERROR: {redact_url(str(exc))}", file=sys.stderr)
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
