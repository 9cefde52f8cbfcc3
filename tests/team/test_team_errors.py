"""TeamError codes and abort-reason rendering."""

from __future__ import annotations

from dsh_team.errors import TeamCode, TeamError, render_reason
from host_spec.errors import DshError
from host_spec.records import CancelCause

APPENDIX_B = {
    "TEAM_INVALID_CONFIG", "TEAM_NOT_MEMBER", "TEAM_LEAD_REQUIRED", "TEAM_INVALID_TARGET",
    "TEAM_MEMBER_NOT_FOUND", "TEAM_INVALID_MEMBER_NAME", "TEAM_MEMBER_NAME_TAKEN", "TEAM_MEMBER_LIMIT",
    "TEAM_PROVISIONING_CONFLICT", "TEAM_INVALID_ARGUMENT", "TEAM_SELF_MESSAGE", "TEAM_MAILBOX_FULL",
    "TEAM_MESSAGE_TOO_LARGE", "TEAM_TASK_LIMIT", "TEAM_TASK_NOT_FOUND", "TEAM_TASK_STALE_REVISION",
    "TEAM_TASK_DELETED", "TEAM_TASK_UNAUTHORIZED", "TEAM_TASK_ALREADY_CLAIMED", "TEAM_TASK_BLOCKED",
    "TEAM_TASK_INVALID_TRANSITION", "TEAM_TASK_HAS_DEPENDENTS", "TEAM_TASK_DEPENDENCY_CYCLE",
    "TEAM_INVALID_WRITE_SCOPE", "TEAM_INVALID_TIMEOUT", "TEAM_WAIT_ABORTED", "TEAM_DISPOSED",
    "TEAM_DISPOSAL_TIMEOUT",
}  # fmt: skip


class TestCodes:
    def test_every_reference_code_exists(self) -> None:
        """Appendix B's codes plus the two persistence-unconfirmed codes, mode-disabled, stream-failed, budgets, roles, shutdown and worktrees."""
        assert TeamCode.ALL == APPENDIX_B | {
            "TEAM_BUDGET_EXCEEDED",
            "TEAM_TASK_PERSISTENCE_UNCONFIRMED",
            "TEAM_PERSISTENCE_UNCONFIRMED",
            "TEAM_MODE_DISABLED",
            "TEAM_STREAM_FAILED",
            "TEAM_STORAGE_NOT_DURABLE",
            "TEAM_TASK_CHECK_FAILED",
            "TEAM_PLAN_NOT_APPROVED",
            "TEAM_PLAN_INVALID",
            "TEAM_ROLE_NOT_FOUND",
            "TEAM_ROLE_INVALID",
            "TEAM_SHUTDOWN_PENDING",
            "TEAM_NO_SHUTDOWN_REQUEST",
            "TEAM_WORKTREE_UNAVAILABLE",
            "TEAM_MERGE_CONFLICT",
            "TEAM_MERGE_BLOCKED",
            "PERMISSION_NOT_FOUND",
            "PERMISSION_ALREADY_ANSWERED",
            "PERMISSION_NOT_DELEGATED",
        }

    def test_team_error_carries_code_and_details(self) -> None:
        """A TeamError is a DshError whose instance code and details are kept."""
        error = TeamError("boom", TeamCode.TASK_LIMIT, task_id="task-1")
        assert isinstance(error, DshError)
        assert (error.code, error.message, error.details, str(error)) == (
            "TEAM_TASK_LIMIT",
            "boom",
            {"task_id": "task-1"},
            "boom",
        )
        assert TeamError.code == "TEAM_ERROR"


class TestRenderReason:
    def test_strings_are_verbatim(self) -> None:
        """A string reason renders as itself."""
        assert render_reason("string cancellation") == "string cancellation"

    def test_exceptions_render_their_message_or_type(self) -> None:
        """An exception renders its message, or its type name when the message is empty."""
        assert render_reason(RuntimeError("stop")) == "stop"
        assert render_reason(KeyboardInterrupt()) == "KeyboardInterrupt"

    def test_structured_reasons_render_structurally(self) -> None:
        """Objects render via repr, so their fields stay visible."""
        assert render_reason(CancelCause("user")) == "CancelCause(kind='user', detail=None)"
        assert render_reason({"kind": "user"}) == "{'kind': 'user'}"
