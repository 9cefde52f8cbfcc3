"""``dsh team send`` / ``dsh team transcript`` in process: admission, refusals, a corrupt stream, rendering.

The logs are real JSONL files written by the reference store; the commands run
through the host's ``dsh`` entry point (the real ``CliEnv``, its appender taking
the Team's lock). The end-to-end SIGKILL case is ``test_team_send_cli``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh_team.core.fold import replay
from dsh_team.views.transcript import transcript_lines
from host_spec.host.cli.main import main
from host_spec.host.store.jsonl import JsonlStore

from team_builders import event, member, queued
from test_cli_show import write_session

LEAD = "lead-1"


def roster(*extra: tuple[str, Any]) -> list[tuple[str, Any]]:
    return [
        ("team/member", member("c-alpha", "alpha", team_id=LEAD)),
        ("team/member", member("c-alpha", "alpha", "active", team_id=LEAD)),
        *extra,
    ]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["team", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


class TestSend:
    def test_queues_the_users_message_and_it_folds(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        data = tmp_path / "data"
        write_session(data, LEAD, roster())
        code, out, _ = run(capsys, "send", "--data-dir", str(data), "alpha", "hello\nthere")
        assert code == 0 and out.startswith("queued team-message-") and "for alpha" in out
        code, out, _ = run(capsys, "send", "--data-dir", str(data), "--team", LEAD, " lead ", "and you")
        assert code == 0 and "for lead" in out
        state = replay(JsonlStore(data).read(LEAD)[1], LEAD)
        assert state.failure is None and state.mail.pending_count("c-alpha") == 1 and state.mail.pending_count(LEAD) == 1
        message = next(iter(state.mail.messages.values()))
        assert (message.sender_id, message.sender_name) == ("user", "user")

    def test_a_full_mailbox_and_a_corrupt_stream_write_nothing(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        data = tmp_path / "data"
        full = [("team/message/queued", queued(f"m-{i}", "c-alpha", team_id=LEAD, index=i)) for i in range(100)]
        write_session(data, LEAD, roster(*full))
        code, _, err = run(capsys, "send", "--data-dir", str(data), "alpha", "one more")
        assert code == 2 and "dsh: TEAM_MAILBOX_FULL:" in err
        broken = tmp_path / "broken"
        write_session(broken, LEAD, roster(("team/message/delivered", {"version": 2, "team_id": LEAD,
                                                                     "message_id": "never", "target_id": "c-alpha"})))
        before = JsonlStore(broken).path(LEAD).read_bytes()
        code, _, err = run(capsys, "send", "--data-dir", str(broken), "alpha", "hi")
        assert code == 2 and "dsh: TEAM_STREAM_FAILED:" in err
        assert JsonlStore(broken).path(LEAD).read_bytes() == before


class TestTranscript:
    def test_renders_each_kind_of_entry(self) -> None:
        events = [
            event(1, "user/message", {"id": "u1", "content": [{"type": "text", "text": "do it"}]}),
            event(2, "user/message", {"id": "u2", "source": {"kind": "team-message", "sender_name": "bob"},
                                      "content": [{"type": "text", "text": "Team message x from bob:"},
                                                  {"type": "text", "text": "hi"}]}),
            event(3, "user/message", {"id": "u3", "source": {"kind": "team-budget"}, "content": []}),
            event(4, "user/message", {"id": "u4", "source": 5, "content": [{"type": "image"}]}),
            event(5, "assistant/message", {"turn": 1, "step": 1, "content": [{"type": "text", "text": "a\nb"}]}),
            event(6, "assistant/message", {"turn": 1, "step": 2, "content": []}),
            event(7, "tool/call", {"name": "grep", "arguments": '{"q":1}'}),
            event(8, "tool/call", {"name": "ls"}),
            event(9, "tool/result", {"name": "grep", "content": [{"type": "text", "text": "none"}], "is_error": True}),
            event(10, "turn/end", {"turn": 1, "reason": {"kind": "error", "error": {"code": "MODEL_ERROR"}}}),
            event(11, "turn/end", {"turn": 2, "reason": {"kind": "completed"}}),
            event(12, "turn/start", {"turn": 3}),
        ]
        assert transcript_lines(events) == [
            "user: do it",
            "team message from bob: Team message x from bob: hi",
            "user (team-budget):",
            "user:",
            "assistant: a",
            "  b",
            'tool call grep {"q":1}',
            "tool call ls {}",
            "tool result grep (error): none",
            'turn 1 ended: {"kind":"error","error":{"code":"MODEL_ERROR"}}',
        ]

    def test_a_forks_inherited_prefix_is_skipped(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        data = tmp_path / "data"
        write_session(data, LEAD, [("user/message", {"id": "u", "content": [{"type": "text", "text": "plan"}]}),
                                   *roster()])
        write_session(data, "c-alpha", [("user/message", {"id": "w", "content": [{"type": "text", "text": "work"}]})],
                      parent=LEAD, created=2000)
        code, out, _ = run(capsys, "transcript", "--data-dir", str(data), "alpha")
        assert code == 0 and out.splitlines() == ["user: work"]
        code, out, _ = run(capsys, "transcript", "--data-dir", str(data), "lead")
        assert code == 0 and out.splitlines() == ["user: plan"]
        code, _, err = run(capsys, "transcript", "--data-dir", str(data), "zed")
        assert code == 2 and "dsh: TEAM_MEMBER_NOT_FOUND:" in err


class TestRefusals:
    def test_too_large_and_a_held_team_are_refused(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        data = tmp_path / "data"
        write_session(data, LEAD, roster())
        code, _, err = run(capsys, "send", "--data-dir", str(data), "alpha", "x" * 70_000)
        assert code == 2 and "dsh: TEAM_MESSAGE_TOO_LARGE:" in err
        held, _ = JsonlStore(data).resume(LEAD)  # another writer holds the Team's lock
        try:
            code, _, err = run(capsys, "send", "--data-dir", str(data), "alpha", "hi")
        finally:
            held.close()
        assert code == 2 and "dsh: TEAM_RUN_LIVE:" in err and "web panel" in err
        assert replay(JsonlStore(data).read(LEAD)[1], LEAD).mail.pending_count("c-alpha") == 0
