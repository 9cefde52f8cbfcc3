"""The Team domain's typed errors and their stable codes.

Callers branch on ``code`` (never on message text); tools surface it to the model
and the remote view maps it to ``team-task-conflict`` / ``team-rejected``. Besides
the request rejections, some codes name states rather than bad requests:
``TEAM_TASK_PERSISTENCE_UNCONFIRMED`` / ``TEAM_PERSISTENCE_UNCONFIRMED`` (the record
is visible but its flush failed), ``TEAM_MODE_DISABLED`` (a task mutation while Team
mode is off), ``TEAM_STREAM_FAILED`` (the durable Team stream is corrupt, so no
authoritative operation can run) and ``TEAM_STORAGE_NOT_DURABLE`` (the host keeps
sessions in memory only). ``docs/error-codes.md`` lists every code.
"""

from __future__ import annotations

from typing import Any, Final

from host_spec.errors import ConfigError, DshError

__all__ = ["TeamCode", "TeamError", "TeamConfigError", "UnconfirmedError", "MemberCommandError", "render_reason"]


class TeamCode:
    """Every stable ``TeamError.code``. Names equal values, so both read the same in logs."""

    INVALID_CONFIG: Final = "TEAM_INVALID_CONFIG"
    NOT_MEMBER: Final = "TEAM_NOT_MEMBER"
    LEAD_REQUIRED: Final = "TEAM_LEAD_REQUIRED"
    INVALID_TARGET: Final = "TEAM_INVALID_TARGET"
    MEMBER_NOT_FOUND: Final = "TEAM_MEMBER_NOT_FOUND"
    INVALID_MEMBER_NAME: Final = "TEAM_INVALID_MEMBER_NAME"
    MEMBER_NAME_TAKEN: Final = "TEAM_MEMBER_NAME_TAKEN"
    MEMBER_LIMIT: Final = "TEAM_MEMBER_LIMIT"
    PROVISIONING_CONFLICT: Final = "TEAM_PROVISIONING_CONFLICT"
    INVALID_ARGUMENT: Final = "TEAM_INVALID_ARGUMENT"
    SELF_MESSAGE: Final = "TEAM_SELF_MESSAGE"
    MAILBOX_FULL: Final = "TEAM_MAILBOX_FULL"
    MESSAGE_TOO_LARGE: Final = "TEAM_MESSAGE_TOO_LARGE"
    TASK_LIMIT: Final = "TEAM_TASK_LIMIT"
    TASK_NOT_FOUND: Final = "TEAM_TASK_NOT_FOUND"
    TASK_STALE_REVISION: Final = "TEAM_TASK_STALE_REVISION"
    TASK_DELETED: Final = "TEAM_TASK_DELETED"
    TASK_UNAUTHORIZED: Final = "TEAM_TASK_UNAUTHORIZED"
    TASK_ALREADY_CLAIMED: Final = "TEAM_TASK_ALREADY_CLAIMED"
    TASK_BLOCKED: Final = "TEAM_TASK_BLOCKED"
    TASK_INVALID_TRANSITION: Final = "TEAM_TASK_INVALID_TRANSITION"
    TASK_HAS_DEPENDENTS: Final = "TEAM_TASK_HAS_DEPENDENTS"
    TASK_DEPENDENCY_CYCLE: Final = "TEAM_TASK_DEPENDENCY_CYCLE"
    INVALID_WRITE_SCOPE: Final = "TEAM_INVALID_WRITE_SCOPE"
    INVALID_TIMEOUT: Final = "TEAM_INVALID_TIMEOUT"
    WAIT_ABORTED: Final = "TEAM_WAIT_ABORTED"
    DISPOSED: Final = "TEAM_DISPOSED"
    DISPOSAL_TIMEOUT: Final = "TEAM_DISPOSAL_TIMEOUT"
    TASK_PERSISTENCE_UNCONFIRMED: Final = "TEAM_TASK_PERSISTENCE_UNCONFIRMED"
    PERSISTENCE_UNCONFIRMED: Final = "TEAM_PERSISTENCE_UNCONFIRMED"
    MODE_DISABLED: Final = "TEAM_MODE_DISABLED"
    STREAM_FAILED: Final = "TEAM_STREAM_FAILED"
    STORAGE_NOT_DURABLE: Final = "TEAM_STORAGE_NOT_DURABLE"
    BUDGET_EXCEEDED: Final = "TEAM_BUDGET_EXCEEDED"
    TASK_CHECK_FAILED: Final = "TEAM_TASK_CHECK_FAILED"
    PLAN_NOT_APPROVED: Final = "TEAM_PLAN_NOT_APPROVED"
    WORKTREE_UNAVAILABLE: Final = "TEAM_WORKTREE_UNAVAILABLE"
    MERGE_CONFLICT: Final = "TEAM_MERGE_CONFLICT"
    MERGE_BLOCKED: Final = "TEAM_MERGE_BLOCKED"
    PLAN_INVALID: Final = "TEAM_PLAN_INVALID"
    ROLE_NOT_FOUND: Final = "TEAM_ROLE_NOT_FOUND"
    ROLE_INVALID: Final = "TEAM_ROLE_INVALID"
    SHUTDOWN_PENDING: Final = "TEAM_SHUTDOWN_PENDING"
    NO_SHUTDOWN_REQUEST: Final = "TEAM_NO_SHUTDOWN_REQUEST"
    PERMISSION_NOT_FOUND: Final = "PERMISSION_NOT_FOUND"
    PERMISSION_ALREADY_ANSWERED: Final = "PERMISSION_ALREADY_ANSWERED"
    PERMISSION_NOT_DELEGATED: Final = "PERMISSION_NOT_DELEGATED"

    #: Every code above, for exhaustiveness checks.
    ALL: Final = frozenset(
        value for name, value in list(vars().items()) if name.isupper() and isinstance(value, str)
    )


class TeamError(DshError):
    """A Team domain failure with a stable ``code`` from :class:`TeamCode`.

    Args:
        message: What went wrong, phrased for the model and the user.
        code: One of :class:`TeamCode`; required because a Team error without a code
            cannot be mapped to a tool result or a remote rejection.
        **details: Structured facts (task id, field) for logs and tests.
    """

    code = "TEAM_ERROR"

    def __init__(self, message: str, code: str, **details: Any) -> None:
        super().__init__(message, code=code, **details)


class UnconfirmedError(TeamError):
    """The change was appended and is visible, but its flush failed.

    The code names what is unconfirmed: ``TEAM_TASK_PERSISTENCE_UNCONFIRMED`` for a
    task record, ``TEAM_PERSISTENCE_UNCONFIRMED`` for any other Team record (a
    member, a message, a delivery, a mode selection) or a flush that only retried
    earlier records.

    Not a rejection: the record stays in the log and the session retries it on its
    next flush, so a caller that simply retries would duplicate it. ``value`` holds
    what the operation would have returned (the new task view, the send receipt),
    so a caller can show it and read before retrying.

    Args:
        message: What is visible and why durability is unknown.
        code: :attr:`TeamCode.TASK_PERSISTENCE_UNCONFIRMED` or
            :attr:`TeamCode.PERSISTENCE_UNCONFIRMED` (the default).
        value: The operation's result as rendered right after the append (``None``
            until the journal attaches it).
        **details: Structured facts for logs and tests.
    """

    def __init__(
        self, message: str, *, code: str = TeamCode.PERSISTENCE_UNCONFIRMED, value: Any = None, **details: Any
    ) -> None:
        super().__init__(message, code, **details)
        self.value = value


class TeamConfigError(TeamError, ConfigError):
    """``TEAM_INVALID_CONFIG``: a Team config field is invalid; ``path`` names it.

    It is also a :class:`~host_spec.errors.ConfigError`, which is what the plugin
    loader expects from ``dsh_plugin_loaded``, so a bad value fails the load with the
    Team code and the field path.
    """

    def __init__(self, message: str, *, path: str) -> None:
        DshError.__init__(self, message, code=TeamCode.INVALID_CONFIG, path=path)
        self.path = path


class MemberCommandError(DshError):
    """A ``dsh team`` command on a stored run that cannot be carried out (the code says why:
    ``TEAM_RUN_LIVE``, ``TEAM_MEMBER_NOT_FOUND``, ...); the host prints it and exits 2."""

    code = "TEAM_COMMAND_ERROR"


def render_reason(value: Any) -> str:
    """Render an abort reason for a message (``wait_agent aborted: <reason>``).

    Strings are kept verbatim, exceptions show their message (or their type when the
    message is empty), and anything else shows its ``repr`` so structured reasons
    such as ``CancelCause(kind='user')`` stay recognisable.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, BaseException):
        return str(value) or type(value).__name__
    return repr(value)
