"""Plugin ``workspace``: file, search and shell tools over the session's workspace directory.

The workspace of an agent is its session header's ``cwd``: the CLI records it
when the root session is created (``dsh run --workspace DIR``), every child
inherits it, and a cold resume reads it back from the log -- so resuming a run
acts on the same checkout without being told again. A session without a ``cwd``
has no workspace and is offered none of these tools.

The tools are registered once, globally, and look up everything per call
(workspace, ledger, write auditor). Each host gets its own :class:`Tools` (its
ledgers and locks), registered with that host's hooks, so the module keeps no
state and one import serves any number of hosts. Its shell is also provided as
the contract's :class:`~host_spec.workspace.CommandRunner`, so a plugin's
commands (a task's quality checks) run under the ``bash`` tool's rules. It also
provides the members' git worktrees (:class:`~host_spec.worktrees.Worktrees`,
:mod:`host_spec.host.worktrees.git`) unless a plugin loaded before it already does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs
import structlog

from host_spec import hookimpl
from host_spec.records import ToolSpec
from host_spec.workspace import CommandRunner
from host_spec.worktrees import Worktrees

from host_spec.host.sandbox.service import sandbox_of
from host_spec.host.workspace.config import WorkspaceConfig, load_config
from host_spec.host.workspace.files import FileTools
from host_spec.host.workspace.ledger import Ledgers
from host_spec.host.workspace.schemas import (
    BashArgs, BashResult, EditArgs, GlobArgs, GrepArgs, ListArgs, ListResult, ReadArgs, ReadResult, WriteArgs,
    WriteResult,
)
from host_spec.host.workspace.search import SearchTools
from host_spec.host.workspace.shell import ShellTool
from host_spec.host.worktrees.git import GitWorktrees

if TYPE_CHECKING:
    from host_spec.events import Event
    from host_spec.protocols import Agent, Host, PluginContext, Session

__all__ = ["Tools", "TOOL_NAMES", "effective_config"]

log = structlog.get_logger(__name__)

TOOL_NAMES: Final = ("read_file", "write_file", "edit_file", "glob", "list_dir", "grep", "bash")


def has_workspace(agent: Agent) -> bool:
    """Offered only to agents whose session names a workspace."""
    return agent.session.header.cwd is not None


@attrs.define(eq=False)
class Tools:
    """One host's workspace tools and the state they share."""

    host: Host
    config: WorkspaceConfig
    ledgers: Ledgers = attrs.Factory(Ledgers)
    files: FileTools = attrs.field(init=False)
    search: SearchTools = attrs.field(init=False)
    shell: ShellTool = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        sandbox = sandbox_of(self.host)  # the host's: every tool obeys the member's sandbox policy
        self.files = FileTools(self.host, self.config, self.ledgers, sandbox)
        self.search = SearchTools(self.config, sandbox)
        self.shell = ShellTool(self.config, sandbox)

    @hookimpl(specname="dsh_session_event")
    def committed(self, session: Session, event: Event) -> None:
        """Keep folded ledgers current (the tools' own appends included)."""
        self.ledgers.committed(session, event)

    @hookimpl(specname="dsh_session_disposed")
    def disposed(self, session: Session) -> None:
        self.ledgers.drop(session)

    def specs(self) -> list[ToolSpec]:
        def spec(name: str, description: str, args: type, result: Any, execute: Any, safe: bool) -> ToolSpec:
            return ToolSpec(name=name, description=description, args_type=args, result_type=result, execute=execute,
                            available=has_workspace, concurrency_safe=safe)

        return [
            spec("read_file", "Read a text file with numbered lines; records the version you saw "
                 "(needed to write or edit it).",
                 ReadArgs, ReadResult, self.files.read, True),
            spec("write_file", "Create a file, or replace one you have read (FILE_STALE if it changed since).", WriteArgs, WriteResult, self.files.write, False),
            spec("edit_file", "Replace old_string (unique, or expected_count times) in a file you have read; "
                 "FILE_STALE if it changed since.", EditArgs, WriteResult, self.files.edit, False),
            spec("glob", "List files matching a glob.", GlobArgs, ListResult, self.search.glob, True),
            spec("list_dir", "List a directory (dirs end with /).", ListArgs, ListResult, self.search.list_dir, True),
            spec("grep", "Search files by regex (path:line: text).", GrepArgs, ListResult,
                 self.search.grep, True),
            spec("bash", "Run a shell command in the workspace root. Files it changes must be read again "
                 "before editing.",
                 BashArgs, BashResult, self.shell.run, False),
        ]


def effective_config(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """The config table validated, with every default filled in (``dsh plugins``)."""
    return attrs.asdict(load_config(raw))


@hookimpl
def dsh_plugin_loaded(host: Host, ctx: PluginContext) -> None:
    tools = Tools(host, load_config(ctx.config, f"plugins.{ctx.name}"))
    for spec in tools.specs():
        ctx.own(host.tools.register(spec))
    ctx.register(tools)
    # Checks a coordination plugin runs follow the bash rules; on a shared store a member's
    # run on its worker, in its worktree there (host_spec.host.placement.commands).
    placement = getattr(host, "placement", None)
    ctx.provide(CommandRunner, tools.shell if placement is None else placement.commands(tools.shell))
    if host.find_service(Worktrees) is None:  # a plugin loaded earlier may provide its own (a test's wrapper)
        ctx.provide(Worktrees, GitWorktrees())
