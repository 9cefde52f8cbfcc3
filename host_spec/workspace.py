"""The workspace contract: file-change events, the write audit seam and workspace error codes.

A host that lets agents read, edit and run code in a shared checkout records
every read and every write as an event in the acting agent's own session log:

* ``workspace/read`` (:class:`FileRead`): which content (by sha256) the agent has
  seen of a path. Because it is durable, a stale-version guard built on it
  survives a cold resume and a crash.
* ``workspace/write`` (:class:`FileWrite`): a write or edit the agent made. The
  event's ``cause`` names the agent and the tool call; ``audit`` carries the
  verdict of the write auditor, when one is provided.

The write auditor is how a coordination plugin (Agent Teams) takes part in writes
without the host knowing about it, and without the plugin knowing about the host's
file tools: the plugin provides a :class:`WriteAuditor` (``ctx.provide(WriteAuditor,
auditor)``); the host looks it up per write (``host.find_service(WriteAuditor)``)
and keeps its answer in the ``workspace/write`` event and the tool result. The
audit is advisory: it can only add warnings, never refuse a write.

The command runner is the other direction: a coordination plugin that must run a
command in the workspace (a task's quality checks) asks the host's workspace to
run it under the same rules as the ``bash`` tool (the host's sandbox under the
member's policy, own process group, timeout, capped output, credentials stripped
from the environment) through
:class:`CommandRunner`, looked up by type (``host.find_service(CommandRunner)``),
instead of spawning processes itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

import msgspec

from host_spec.errors import DshError

if TYPE_CHECKING:
    from host_spec.protocols import Agent
    from host_spec.records import AbortSignal

__all__ = [
    "WORKSPACE_READ",
    "WORKSPACE_WRITE",
    "FileRead",
    "FileWrite",
    "WriteAudit",
    "WriteAuditor",
    "CommandOutcome",
    "CommandRunner",
    "WorkspaceCode",
    "WorkspaceError",
]

WORKSPACE_READ: Final = "workspace/read"
WORKSPACE_WRITE: Final = "workspace/write"


class FileRead(msgspec.Struct, frozen=True, omit_defaults=True):
    """Payload of ``workspace/read``: the agent has seen this exact content of ``path``.

    Attributes:
        path: Workspace-relative path, ``/``-separated.
        sha256: Hex digest of the whole file's bytes at the time of the read.
        snapshot: The text itself when small, so a later stale rejection can show a
            diff even after a restart; ``None`` for large files.
    """

    path: str
    sha256: str
    snapshot: str | None = None


class WriteAudit(msgspec.Struct, frozen=True, omit_defaults=True):
    """The write auditor's verdict on one write (advisory).

    Attributes:
        member: The writer's name in its coordination group (``lead``, ``builder``).
        tasks: The in-progress tasks the writer owns.
        in_scope: Whether the write is covered by ``tasks``: the path lies inside a write
            scope of one of them, or one of them declares no write scopes (it limits nothing).
        warnings: Short sentences for the model (out of scope, another member's scope).
    """

    member: str
    tasks: tuple[str, ...] = ()
    in_scope: bool = False
    warnings: tuple[str, ...] = ()


class FileWrite(msgspec.Struct, frozen=True, omit_defaults=True):
    """Payload of ``workspace/write``: the agent replaced the content of ``path``.

    Attributes:
        path: Workspace-relative path, ``/``-separated.
        tool: The tool that wrote (``write_file``, ``edit_file``).
        sha256: Digest of the new content (the agent knows it: it wrote it).
        previous_sha256: Digest before the write; ``None`` when the file was created.
        snapshot: The new text when small (see :class:`FileRead`).
        audit: The write auditor's verdict, when one was provided.
    """

    path: str
    tool: str
    sha256: str
    previous_sha256: str | None = None
    snapshot: str | None = None
    audit: WriteAudit | None = None


@runtime_checkable
class WriteAuditor(Protocol):
    """Judges a write against a coordination plan (for instance a task's write scopes)."""

    def audit_write(self, agent: Agent, path: str) -> WriteAudit | None:
        """The verdict on ``agent`` writing ``path`` now, or ``None`` when it has no say.

        Called synchronously right before the write, so the verdict describes the
        plan as it was at that moment. Must not raise for an agent it does not know.
        """
        ...


class CommandOutcome(msgspec.Struct, frozen=True, omit_defaults=True):
    """How one command run by a :class:`CommandRunner` ended.

    Attributes:
        exit_code: The command's exit status; ``None`` when it was killed (timeout, interrupt).
        output: Its stdout and stderr interleaved, capped like the ``bash`` tool's (head and tail kept).
        output_bytes: The full size of the output.
        truncated: ``output`` lost its middle to the cap.
        timed_out: It ran past its timeout and its process group was killed.
        interrupted: The caller's abort signal fired and its process group was killed.
    """

    exit_code: int | None
    output: str
    output_bytes: int = 0
    truncated: bool = False
    timed_out: bool = False
    interrupted: bool = False

    @property
    def passed(self) -> bool:
        """Exit status 0: the command ran to its end and succeeded."""
        return self.exit_code == 0


@runtime_checkable
class CommandRunner(Protocol):
    """Runs a command in a workspace under the host's ``bash`` rules (provided by the workspace)."""

    async def run_command(
        self, root: str, command: str, *, timeout_ms: int, signal: AbortSignal | None = None,
        member: str | None = None,
        role: str | None = None,
    ) -> CommandOutcome:
        """Run ``command`` with ``/bin/bash -c`` in the workspace ``root`` and wait for its end.

        The command runs in the host's sandbox under ``member``'s policy (the member it
        runs for, by name, spawned with ``role``; ``None``: the profile's own policy, no
        role), exactly like that member's ``bash`` calls: ``root`` is its writable root
        under ``workspace-write``.
        A command the sandbox stops (a write outside, a process limit) simply fails.

        Nothing it started is left running when this returns (or is cancelled): the
        whole process group is killed. A timeout or an abort is an outcome, not an error.

        Raises:
            WorkspaceError: ``INVALID_ARGUMENT`` (empty command, ``timeout_ms`` above the
                host's maximum), ``NO_WORKSPACE`` (``root`` is no directory).
        """
        ...


class WorkspaceCode:
    """Stable codes of :class:`WorkspaceError` (docs/error-codes.md lists what each means)."""

    PATH_OUTSIDE_WORKSPACE: Final = "PATH_OUTSIDE_WORKSPACE"
    NO_WORKSPACE: Final = "NO_WORKSPACE"
    FILE_NOT_FOUND: Final = "FILE_NOT_FOUND"
    NOT_A_FILE: Final = "NOT_A_FILE"
    NOT_A_DIRECTORY: Final = "NOT_A_DIRECTORY"
    BINARY_FILE: Final = "BINARY_FILE"
    FILE_TOO_LARGE: Final = "FILE_TOO_LARGE"
    NOT_UTF8: Final = "NOT_UTF8"
    FILE_NOT_READ: Final = "FILE_NOT_READ"
    FILE_STALE: Final = "FILE_STALE"
    EMPTY_OLD_STRING: Final = "EMPTY_OLD_STRING"
    OLD_STRING_NOT_FOUND: Final = "OLD_STRING_NOT_FOUND"
    OLD_STRING_AMBIGUOUS: Final = "OLD_STRING_AMBIGUOUS"
    OLD_STRING_COUNT_MISMATCH: Final = "OLD_STRING_COUNT_MISMATCH"
    EDIT_NO_CHANGE: Final = "EDIT_NO_CHANGE"
    INVALID_PATTERN: Final = "INVALID_PATTERN"
    INVALID_ARGUMENT: Final = "INVALID_ARGUMENT"
    PATH_PROTECTED: Final = "PATH_PROTECTED"
    BASH_TIMEOUT: Final = "BASH_TIMEOUT"
    BASH_INTERRUPTED: Final = "BASH_INTERRUPTED"
    IO_ERROR: Final = "WORKSPACE_IO_ERROR"


class WorkspaceError(DshError):
    """A workspace tool refused or failed a call; nothing was written."""

    code = "WORKSPACE_ERROR"
