"""``dsh worker``: run Teams' members, and take over Teams whose process died, on any machine that reaches the store.

::

    dsh worker --store postgresql://user@db-host/dsh [--workspace DIR [--lead-repo URL]]
               [--max-members N] [--max-teams N]

A worker does two jobs. It runs *members*: while it is alive, the Lead processes
on the store hand their members' model calls and workspace tool calls to workers
(:mod:`host_spec.host.placement`); this worker holds up to ``--max-members``
members' leases at once (default: from its CPUs and memory,
:mod:`host_spec.host.placement.capacity`; its first line says how many) and runs their calls here, the file, search and shell
tools acting on ``--workspace`` (default: the checkout each member's session
records, for workers on the Lead's machine). A member in ``worktree`` mode gets its
own worktree of ``--workspace``, a clone of the Lead's repository, on its branch
fetched from ``--lead-repo`` (a URL, a path, or a remote's name; default
``origin``), and its completion's commit is pushed back there for the Lead to merge
(:mod:`host_spec.host.placement.checkouts`). The profile's MCP servers run here
too, started against that checkout (a server table's own ``cwd`` wins), so a
member's ``mcp__SERVER__TOOL`` calls act on the same files as its other tools.

A Team on a shared store is written by one holder at a time under a lease on its
root session (:mod:`host_spec.host.store.postgres.leases`). A holder that dies
(SIGKILL, a lost machine, a frozen process) stops renewing; once its lease
expires the Team is *orphaned*. A worker watches for orphaned Teams, claims one
(the claim raises the fencing epoch, so the old holder can never write again),
cold-resumes it from the store exactly as ``dsh resume`` does (the tool-call
rules of resume apply: a call cut off mid-flight is ``TOOL_OUTCOME_UNKNOWN``),
runs it to quiescence and lets it go. Several workers may watch one store; the
claim is atomic, so each orphan gets one new holder.

A Team that closed cleanly released its lease and is not taken over: it is done
until someone resumes it. The profile and model are the ones the run recorded in
the store (``--profile`` / ``--model`` override them); the workspace is the one
recorded in the root session's header. SIGINT/SIGTERM stops taking new Teams and
lets the running ones finish (a second signal ends the process at once).

The unit a worker takes over is the whole Team (the Lead's process is gone, so
the Lead and the Team's logs move into the worker's process); its members' calls
are then handed out again, to any worker.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from host_spec.errors import DshError, SessionLockedError
from host_spec.extras import require
from host_spec.permissions import PermissionSettings

from host_spec.host.app import Host
from host_spec.host.cli.run_commands import _NoModel, taken_over
from host_spec.host.cli.run_settings import decode_settings
from host_spec.host.cli.output import transcript_line
from host_spec.host.cli.transcript import Transcript
from host_spec.host.cli.usage import CliError
from host_spec.host.plugins.profiles import MCP_PLUGIN, PluginEntry, load_profile
from host_spec.host.redaction import redact_url
from host_spec.host.sandbox.policy import SandboxSettings
from host_spec.host.sandbox.service import Sandbox
from host_spec.host.runs import agent_name
from host_spec.host.store.selection import STORE_ENV, chosen_store, open_backend

if TYPE_CHECKING:
    from host_spec.host.placement.capacity import Machine

__all__ = ["add_parser", "room_line", "run"]


def add_parser(commands: Any) -> None:
    """Register the ``worker`` subcommand on the ``dsh`` parser."""
    worker = commands.add_parser(
        "worker", help="take over Teams whose process died (shared store only)",
        description="Watch a shared store and cold-resume every Team whose holder's lease expired.")
    worker.add_argument("--store", default=None, metavar="URL",
                        help=f"the shared store, e.g. postgresql://user@host/db (default: ${STORE_ENV})")
    worker.add_argument("--max-teams", type=int, default=4, metavar="N",
                        help="orphaned Teams this worker takes over at once (default: 4)")
    worker.add_argument("--max-members", type=int, default=None, metavar="N",
                        help="members whose calls this worker runs at once (default: from this machine, "
                             "min(4 x CPUs, memory / 256 MiB), at least 1)")
    worker.add_argument("--workspace", default=None, metavar="DIR",
                        help="this worker's checkout for members' file and shell tools "
                             "(default: the one each member's session records)")
    worker.add_argument("--lead-repo", default="origin", metavar="URL",
                        help="how --workspace reaches the Lead's repository, for members in worktree mode: "
                             "a URL, a path or a remote's name (default: origin)")
    worker.add_argument("--linger", type=float, default=5.0, metavar="SECONDS",
                        help="how long a member without calls stays with this worker (default: 5)")
    worker.add_argument("--poll", type=float, default=1.0, metavar="SECONDS",
                        help="longest pause between two looks for orphaned Teams (default: 1; "
                             "the next lease expiry wakes the worker sooner)")
    worker.add_argument("--profile", default=None, help="profile to load (default: the one each run recorded)")
    worker.add_argument("--model", default=None, help="model spec (default: the one each run recorded)")


def _recorded(records: Any, root: str, args: argparse.Namespace) -> tuple[str, Any]:
    """The profile and model Team ``root`` was started with (``--profile`` / ``--model`` win)."""
    data = records.get_run(root)
    recorded = decode_settings(data) if data is not None else None
    profile = args.profile or (recorded.profile if recorded is not None else "headless")
    model: Any = args.model or (recorded.model if recorded is not None else None) or _NoModel()
    return profile, model


def _member_host_opener(store: Any, args: argparse.Namespace, audits_plugin: Any, store_url: str | None = None) -> Any:
    """``await open(root)``: a host for running Team ``root``'s members' calls here.

    It has the run's model (and the profile's member models) and, of the
    profile's plugins, only the workspace tools and the MCP servers (on this
    worker's checkout: :func:`_on_checkout`): the Team itself lives in the Lead's
    process, which judges writes against the board and sends its verdict.
    """

    async def open_host(root: str) -> Host:
        profile_name, model = await asyncio.to_thread(_recorded, store, root, args)
        profile = load_profile(profile_name)
        checkout = args.workspace or (await asyncio.to_thread(store.header, root)).cwd
        kept = tuple(_on_checkout(e, checkout) if e.name == MCP_PLUGIN else e
                     for e in profile.plugins if e.name in ("workspace", MCP_PLUGIN))
        # The call was checked against the permission rules (and asked, if need be) by the
        # Lead's process before it was placed here: the worker runs what was allowed.
        profile = attrs.evolve(profile, plugins=kept, permissions=PermissionSettings())
        # The run's own sandbox policies: a member's calls are confined here as in the Lead's process.
        return await Host.open(None, profile, model, extra_plugins=[("dsh-placement-audits", audits_plugin())],
                               run_data=store_url)

    return open_host


def _on_checkout(entry: PluginEntry, checkout: str | None) -> PluginEntry:
    """The ``mcp`` plugin's entry with each stdio server started in ``checkout`` (unless its table sets ``cwd``)."""
    servers = entry.config.get("servers")
    if checkout is None or not isinstance(servers, Mapping):
        return entry
    placed = {name: {**table, "cwd": checkout} if isinstance(table, Mapping) and "command" in table
              and "cwd" not in table else table for name, table in servers.items()}
    return attrs.evolve(entry, config={**entry.config, "servers": placed})


async def _take_over(url: str, root: str, args: argparse.Namespace) -> None:
    """Claim the orphaned Team ``root``, resume it to quiescence and release it."""
    records: Any = open_backend(url)
    try:
        profile, model = _recorded(records, root, args)
    finally:
        records.close()
    transcript = Transcript(write=transcript_line, fallback=agent_name)
    host = await Host.open(url, profile, model, extra_plugins=[("dsh-transcript", transcript)])
    outcome: str | None = None
    try:
        await host.resume(root)
        outcome = f"team {root} is quiescent"
    except SessionLockedError:
        pass  # another worker claimed it first
    except (DshError, OSError) as exc:
        outcome = f"team {root}: {_one_line(exc)}"
    finally:
        await host.close()
        sys.stdout.flush()
    lost = taken_over(host)
    if lost is not None:  # it lost the Team again: say so instead of "quiescent"
        outcome = f"team {root}: {_one_line(lost)}"
    if outcome is not None:
        print(f"dsh worker: {outcome}", file=sys.stderr, flush=True)


def _forget(running: dict[str, asyncio.Task[None]], root: str) -> Any:
    """Done-callback of a takeover: drop it from ``running`` and tell its failure (nobody else awaits it)."""

    def done(task: asyncio.Task[None]) -> None:
        running.pop(root, None)
        failure = None if task.cancelled() else task.exception()
        if failure is not None:
            print(f"dsh worker: team {root}: {_one_line(failure)}", file=sys.stderr, flush=True)

    return done


def room_line(max_members: int, machine: Machine | None) -> str:
    """How many members the worker holds, and where that number came from (``machine``: the default's inputs)."""
    what = f"it holds up to {max_members} member" + ("" if max_members == 1 else "s") + " at once"
    return f"{what} (--max-members)" if machine is None else f"{what} (from {machine.describe()})"


def _one_line(exc: BaseException) -> str:
    """``CODE: message`` of a failure, on one line (a bug keeps its type's name instead of a code)."""
    what = f"{exc.code}: {exc.message}" if isinstance(exc, DshError) else f"{type(exc).__name__}: {exc}"
    return redact_url(" ".join(what.split()))


async def run(args: argparse.Namespace) -> int:
    """Watch the store until SIGINT/SIGTERM; exit status 0.

    Raises:
        ExtraNotInstalledError: ``EXTRA_NOT_INSTALLED`` without the ``postgres`` extra.
        CliError: ``CLI_USAGE`` when no shared store is named, or ``--max-teams`` is below 1.
        SandboxUnavailable: ``SANDBOX_UNAVAILABLE``, the profile's policy needs a sandbox this machine cannot make.
    """
    require("psycopg", extra="postgres", feature="dsh worker")
    from host_spec.host.placement.capacity import default_max_members, machine
    from host_spec.host.placement.checkouts import WorkerCheckouts
    from host_spec.host.placement.runner import MemberRunner, audits_plugin  # the postgres extra: only here

    url = chosen_store(args.store)
    if url is None:
        raise CliError(f"dsh worker needs a shared store: --store postgresql://... or ${STORE_ENV}", code="CLI_USAGE")
    here = machine()
    max_members = default_max_members(here.cpus, here.memory) if args.max_members is None else args.max_members
    if args.max_teams < 1 or max_members < 1 or args.poll <= 0 or args.linger < 0:
        raise CliError("--max-teams and --max-members must be at least 1, --poll above 0 and --linger not negative",
                       code="CLI_USAGE")
    workspace = Path(args.workspace).resolve() if args.workspace is not None else None
    if workspace is not None and not workspace.is_dir():
        raise CliError(f"--workspace {args.workspace} is not a directory", code="CLI_USAGE")
    if not args.lead_repo or args.lead_repo.startswith("-"):
        raise CliError(f"--lead-repo {args.lead_repo!r} names no repository", code="CLI_USAGE")
    # A worker that could not sandbox the calls it takes says so now, not at its first call
    # (a --profile it cannot read fails each call instead, as it always did: the defaults are checked).
    try:
        settings = load_profile(args.profile or "headless").sandbox
    except DshError:
        settings = SandboxSettings()
    Sandbox.for_run(settings, url).check()
    store: Any = open_backend(url)
    try:
        # Ready means connected: a refusal (STORE_AUTH, STORE_NOT_FOUND) fails here at once,
        # an outage after the store's retry window, before the worker claims to watch anything.
        await asyncio.to_thread(store.check)
    except BaseException:
        store.close()
        raise
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, lambda: sys.exit(2) if stop.is_set() else stop.set())
    running: dict[str, asyncio.Task[None]] = {}
    print(f"dsh worker: {store.holder} is connected to {redact_url(url)} and is watching the store; "
          f"{room_line(max_members, None if args.max_members is not None else here)}", file=sys.stderr, flush=True)
    members = MemberRunner(store, max_members=max_members, workspace=workspace,
                           open_host=_member_host_opener(store, args, audits_plugin, url), linger_seconds=args.linger,
                           say=lambda text: print(f"dsh worker: {text}", file=sys.stderr, flush=True),
                           checkouts=WorkerCheckouts(None if workspace is None else str(workspace), args.lead_repo))
    serving = asyncio.create_task(members.run(stop))
    try:
        while not stop.is_set() and not serving.done():
            orphaned, upcoming = await asyncio.to_thread(store.orphaned_teams)
            for root in orphaned:
                if root not in running and len(running) < args.max_teams:
                    print(f"dsh worker: taking over team {root}", file=sys.stderr, flush=True)
                    task = running[root] = asyncio.create_task(_take_over(url, root, args))
                    task.add_done_callback(_forget(running, root))
            delay = args.poll if upcoming is None else min(args.poll, upcoming + 0.05)
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait([stopping, serving], timeout=delay, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
    except asyncio.CancelledError:
        for task in (serving, *running.values()):
            task.cancel()
        raise
    finally:
        # However the loop ended (a signal, the store gone for good, the member runner failing),
        # the running Teams finish and every task's outcome is collected: none is left unretrieved.
        stop.set()
        await asyncio.gather(serving, *running.values(), return_exceptions=True)
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        store.close()
    failure = None if serving.cancelled() else serving.exception()
    if failure is not None:
        raise failure
    return 0
