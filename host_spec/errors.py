"""Typed errors with stable codes.

Every error that crosses a package boundary is a :class:`DshError` with a stable
``code`` string. Callers branch on ``code`` (never on the message text), tools
surface ``code`` to the model, and the CLI prints ``dsh: <code>: <message>``.
Domain packages subclass :class:`DshError` and set their own codes (``TEAM_*``).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "DshError",
    "InvariantError",
    "ConfigError",
    "SessionError",
    "SessionNotFoundError",
    "SessionExistsError",
    "SessionLockedError",
    "SequenceConflictError",
    "SessionCorruptError",
    "SessionFormatError",
    "SessionNotLiveError",
    "ReentrantAppendError",
    "InvalidEventError",
    "SessionForkError",
    "SubagentError",
    "ToolError",
    "ModelError",
    "ScriptError",
    "PluginError",
    "RegistrationError",
    "SessionFencedError",
    "StoreUnavailableError",
    "coded_leaves",
]


class DshError(Exception):
    """Root of every error raised by ``host_spec`` and the plugins.

    Args:
        message: Human-readable explanation; shown to users and models.
        code: Overrides the class default ``code`` for this instance.
        **details: Structured facts (ids, field paths) kept on ``details``.
    """

    #: The class default; an instance given ``code=`` shadows it without touching the class.
    code: str = "DSH_ERROR"

    def __init__(self, message: str, *, code: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details

    def __str__(self) -> str:
        return self.message


class InvariantError(DshError):
    """A ``dsh_pre_append`` implementation vetoed an append; nothing was written.

    Attributes:
        plugin: Name of the vetoing plugin (the pluggy registration name).
        reasons: Every violation reason, in hook order.
    """

    code = "INVARIANT"

    def __init__(self, plugin: str, reason: str, *, reasons: list[str] | None = None) -> None:
        super().__init__(f'invariant violated by "{plugin}": {reason}', plugin=plugin)
        self.plugin = plugin
        self.reason = reason
        self.reasons = reasons if reasons is not None else [reason]


class ConfigError(DshError):
    """Plugin, profile or script configuration is invalid. ``path`` names the field."""

    code = "CONFIG_INVALID"

    def __init__(self, message: str, *, path: str = "", code: str | None = None) -> None:
        super().__init__(message if not path or path in message else f"{message} @ {path}", code=code, path=path)
        self.path = path


class SessionError(DshError):
    """Base for session store and persistence failures."""

    code = "SESSION_ERROR"


class SessionNotFoundError(SessionError):
    """No live or persisted session has the requested id."""

    code = "SESSION_NOT_FOUND"


class SessionExistsError(SessionError):
    """A session with this id already exists (live or on disk)."""

    code = "SESSION_ALREADY_EXISTS"


class SessionLockedError(SessionError):
    """Another process holds the write lock of this session's log."""

    code = "SESSION_LOCKED"


class SequenceConflictError(SessionError):
    """An append expected the log to end at one seq and it ends at another.

    The compare-and-set on a log's tail: a writer that lost track of the stored
    tail (a stale writer, a retry after an unknown outcome) is refused and writes
    nothing, so no seq is ever stored twice. ``expected`` and ``actual`` are the
    caller's and the log's last seq.
    """

    code = "SESSION_SEQ_CONFLICT"


class SessionCorruptError(SessionError):
    """The committed region of a log is unreadable (not a torn tail)."""

    code = "SESSION_CORRUPT"


class SessionFormatError(SessionError):
    """The log was written in a format version this host does not read."""

    code = "SESSION_FORMAT_UNSUPPORTED"


class SessionNotLiveError(SessionError):
    """The operation needs a live (attached) session."""

    code = "SESSION_NOT_LIVE"


class ReentrantAppendError(SessionError):
    """An observer tried to append to the session whose append it is observing."""

    code = "SESSION_REENTRANT_APPEND"


class InvalidEventError(SessionError):
    """The event data is not lossless JSON or the type string is malformed."""

    code = "INVALID_EVENT"


class SessionForkError(SessionError):
    """A fork request cannot be honoured (``OPEN_TURN``, ``INVALID_BOUNDARY`` ...)."""

    code = "SESSION_FORK_ERROR"


class SubagentError(DshError):
    """Continuable-children failures.

    Codes: ``UNAUTHORIZED``, ``DUPLICATE_CHILD``, ``NOT_RESUMABLE``, ``DRAINING``,
    ``NO_PROVIDER``, ``DUPLICATE_PROVIDER``, ``PARENT_UNAVAILABLE``, ``CANCELLED``,
    ``INVALID_ARGUMENT``, ``INVALID_DESCRIPTOR``, ``ACTIVATION_TEARDOWN_FAILED``; the
    legacy tools add ``AMBIGUOUS_AGENT`` and ``MAX_DEPTH``.
    """

    code = "SUBAGENT_ERROR"


class ToolError(DshError):
    """A tool call failed before or during execution.

    Codes: ``UNKNOWN_TOOL``, ``INVALID_ARGS``, ``INVALID_TOOL_OUTPUT``, ``ABORTED``,
    ``ABORTED_BEFORE_DISPATCH``. Domain errors raised by a tool keep their own code.
    """

    code = "TOOL_ERROR"


class ModelError(DshError):
    """A model adapter failed or no adapter serves the requested route."""

    code = "MODEL_ERROR"


class ScriptError(ModelError):
    """A scripted-model JSON file is malformed; ``path`` names the offending item."""

    code = "SCRIPT_INVALID"

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(f"{message} @ {path}" if path else message, path=path)
        self.path = path


class PluginError(DshError):
    """A plugin could not be discovered, loaded, registered or reloaded."""

    code = "PLUGIN_ERROR"


class ServiceNotFoundError(PluginError):
    """No loaded plugin provides the service type asked for (``host.service(api)``)."""

    code = "SERVICE_NOT_FOUND"


class RegistrationError(DshError):
    """A registration collided with an existing one in the same layer (a name, a service type)."""

    code = "ALREADY_REGISTERED"


class SessionFencedError(SessionError):
    """A writer's lease was taken over: its appends are refused (fencing).

    A shared store lets one holder at a time write a session; every claim raises
    the lease's epoch and every append carries the epoch it was opened under. A
    holder presumed dead (stalled, cut off) that comes back finds a higher epoch
    and is refused with this code, writing nothing; its work is the new holder's
    to redo from the log. ``epoch`` is the writer's, ``current`` the lease's.
    """

    code = "SESSION_FENCED"


class StoreUnavailableError(SessionError, ConnectionError):
    """A networked store cannot be reached (the connection is lost or refused).

    An ``OSError`` too, so the storage contract's medium-failure rule applies: a
    failed append or sync leaves the log at its last synced seq and the caller
    retries the same events.
    """

    code = "STORE_UNAVAILABLE"


def coded_leaves(exc: BaseException) -> list[DshError]:
    """The coded errors ``exc`` is made of: itself, or every leaf of an exception group; ``[]`` if any leaf is uncoded.

    Two failures at once (a write refused, then the record of that failure
    refused too) come as a group; when each has a code the group is still a
    coded failure, to be reported by code on one line rather than as a traceback.
    """
    if not isinstance(exc, BaseExceptionGroup):
        return [exc] if isinstance(exc, DshError) else []
    found: list[DshError] = []
    for inner in exc.exceptions:
        leaves = coded_leaves(inner)
        if not leaves:
            return []
        found += leaves
    return found
