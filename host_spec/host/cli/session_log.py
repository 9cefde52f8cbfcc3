"""``dsh log``: every event of one stored session, read-only.

The log is the session's whole truth (there is no other state), so reading it is
the first step of any diagnosis. It is read without taking the session's lock and
without repairing anything, so looking never changes what is stored. By default
each event is one readable line (:func:`~host_spec.host.cli.transcript.format_event`) under a summary
of the header; ``--json`` prints the stored JSONL lines as they are encoded.
"""

from __future__ import annotations

import argparse
from typing import Any

from host_spec.events import encode_event, encode_header

from host_spec.host.cli.extensions import CliEnvironment
from host_spec.host.cli.transcript import format_event
from host_spec.host.cli.usage import check_data_dir
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.store.selection import chosen_store, open_backend

__all__ = ["add_parser", "run"]


def add_parser(commands: Any, env: CliEnvironment) -> None:
    """Register the ``log`` subcommand on the ``dsh`` parser."""
    log = commands.add_parser("log", help="print the events of a stored session",
                              description="Print every event of a stored session (read-only).")
    env.add_data_dir(log)
    log.add_argument("--json", action="store_true", help="print the raw JSONL lines")
    log.add_argument("session_id", help="session to print")


async def run(args: argparse.Namespace) -> int:
    """Print the session's header and events; exit status 0.

    Raises:
        CliError: the data directory does not exist or is unusable.
        SessionNotFoundError: nothing is stored under the session id.
        SessionCorruptError: the stored log is unreadable.
    """
    url = chosen_store(getattr(args, "store", None))
    store = open_backend(url) if url is not None else JsonlStore(check_data_dir(args.data_dir, create=False))
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
