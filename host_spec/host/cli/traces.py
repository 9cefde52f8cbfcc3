"""``dsh trace export``: a stored run as OpenTelemetry spans (OTLP JSON).

::

    dsh trace export [--data-dir D] [--out FILE] [--content] [SESSION_ID]

The spans come from :func:`host_spec.trace_export.export_trace`; installed
plugins add theirs through entry-point group ``dsh.trace``
(:mod:`host_spec.trace`), loaded like CLI extensions: one that fails to import
is reported and skipped, one that raises while contributing adds nothing.
``SESSION_ID`` (default: the most recent root session) may be any session of the
run; the whole run is exported. The logs are only read: no lock is taken, so it
works next to a live run (its newest events may be missing from the export).

``--out FILE`` is written only once the whole document is built, by a rename, so
a failed export leaves no partial file. Exit status: 0 exported; 2 nothing
exported (``dsh: <code>: <message>``); 3 exported, but a log is damaged or
unreadable and the export holds only its readable part.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from host_spec.errors import DshError
from host_spec.trace import TRACE_ENTRY_POINT_GROUP, TraceContributor
from host_spec.trace_export import export_trace

from host_spec.host.cli.extensions import CliEnvironment, discover_extensions

__all__ = ["TraceOutputError", "add_parser", "run", "EXIT_DAMAGED"]

#: Exported, but a log is damaged: the readable part is in the export.
EXIT_DAMAGED: Final = 3

Contributors = Sequence[tuple[str, TraceContributor]]


class TraceOutputError(DshError):
    """``--out`` cannot be written (``TRACE_OUT_UNUSABLE``); nothing is written."""

    code = "TRACE_OUT_UNUSABLE"


def add_parser(commands: Any, env: CliEnvironment, contributors: Contributors | None) -> None:
    """Add ``trace export``; ``contributors`` replace the installed ones (tests)."""
    trace = commands.add_parser("trace", help="export stored runs as OpenTelemetry traces",
                                description="Export stored runs as OpenTelemetry traces (read-only).")
    sub = trace.add_subparsers(dest="trace_command", required=True, metavar="COMMAND")
    export = sub.add_parser(
        "export", help="write a run as OTLP JSON spans",
        description="Write a stored run as OTLP JSON (an ExportTraceServiceRequest): a span per session, turn, "
                    "model call and tool call; plugins add their events and links. No content unless --content.",
    )
    env.add_data_dir(export)
    export.add_argument("--out", type=Path, default=None, metavar="FILE", help="write to FILE (default: stdout)")
    export.add_argument("--content", action="store_true",
                        help="include message text, tool arguments, tool results and error messages")
    export.add_argument("session_id", nargs="?", default=None,
                        help="any session of the run (default: the most recent root session)")
    export.set_defaults(trace_env=env, trace_contributors=contributors)


def _write(path: Path, data: bytes) -> None:
    directory = path.parent
    if not directory.is_dir() or path.is_dir():
        raise TraceOutputError(f"cannot write {path}: {'it is a directory' if path.is_dir() else 'no such directory'}")
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    except OSError as exc:
        raise TraceOutputError(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


async def run(args: argparse.Namespace) -> int:
    """Export the run; see the module docstring for the exit status."""
    env: CliEnvironment = args.trace_env
    reader = env.open_store(args.data_dir)
    contributors = args.trace_contributors
    if contributors is None:
        contributors = discover_extensions(TRACE_ENTRY_POINT_GROUP, what="trace contributor")
    exported = export_trace(reader, args.session_id or reader.latest_root(), content=args.content,
                            contributors=contributors)
    for name, error in exported.failed:
        print(f'dsh: warning: trace contributor "{name}" failed and added nothing: {error}', file=sys.stderr)
    for session_id, damage in exported.damage:
        print(f"dsh: warning: session {session_id}: {damage.code}: {damage.message}", file=sys.stderr)
    if args.out is None:
        sys.stdout.buffer.write(exported.data)
        sys.stdout.flush()
    else:
        _write(args.out, exported.data)
        print(f"dsh: wrote {exported.spans} spans to {args.out}", file=sys.stderr)
    return EXIT_DAMAGED if exported.damage else 0
