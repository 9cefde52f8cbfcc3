"""``dsh team show``: the Team of a stored Lead log, folded offline (roster, board, mail).

Logs are real JSONL files written by the reference host's store (Team records are
appended to a root session the way the service appends them); the command runs
through the host's ``dsh`` entry point -- in process for the many small cases,
as a real subprocess for the end-to-end ones.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from dsh_team import cli as team_cli
from dsh_team.views.show import ShowFailure, TeamShow, build_show, offline_status
from dsh_team.views.show_text import render_text
from dsh_team.core.state import initial_state
from host_spec.cli import StoredLog
from host_spec.errors import SessionCorruptError, SessionNotFoundError
from host_spec.host.cli import extensions as cli_ext
from host_spec.host.cli.main import main
from host_spec.host.store.session import NullObserver
from host_spec.host.store.sessions import SessionStore
from host_spec.host.store.jsonl import JsonlStore

from team_builders import delivered, member, mode, queued, task
from team_host import open_host, service, team

LEAD = "lead-1"
EXIT_FAILED = 3


# ---------------------------------------------------------------- fixtures


def write_session(
    data: Path, session_id: str, events: Sequence[tuple[str, Any]], *, parent: str | None = None, created: int = 1000
) -> Path:
    """Write one session log through the reference store (real JSONL, real fsync)."""

    async def body() -> None:
        store = SessionStore(JsonlStore(data), NullObserver(), clock=lambda: created)
        session = store.create(session_id, parent_session=parent)
        for type_, payload in events:
            session.append(type_, payload)
        await store.dispose(session)

    asyncio.run(body())
    return JsonlStore(data).path(session_id)


def team_events(team_id: str = LEAD) -> list[tuple[str, Any]]:
    """A Team mid-run: three members (one failed), a DAG, scope overlap, mail both ways.

    Seqs: 1 turn/start, 2-7 roster, 8-12 tasks (task-1 claimed at 10, task-3 claimed
    at 12), 13-16 mail (m-1 delivered; m-2, m-3 pending), 17 task-1 completed,
    18 mode on, 19 turn/end.
    """
    t = team_id
    return [
        ("turn/start", {"turn": 1}),
        ("team/member", member("c-alpha", "alpha", team_id=t, description="Finds sources")),
        ("team/member", member("c-alpha", "alpha", "active", team_id=t, description="Finds sources")),
        ("team/member", member("c-beta", "beta", provider="fork", context="fork", team_id=t, description="Writes")),
        ("team/member", member("c-beta", "beta", "active", provider="fork", context="fork", team_id=t,
                               description="Writes")),
        ("team/member", member("c-gamma", "gamma", team_id=t)),
        ("team/member", member("c-gamma", "gamma", "failed", team_id=t, error="provider exploded")),
        ("team/task", task("task-1", subject="Collect sources", write_scopes=["docs"], team_id=t)),
        ("team/task", task("task-2", subject="Write draft", blocked_by=["task-1"], team_id=t)),
        ("team/task", task("task-1", 2, status="in_progress", owner_id="c-alpha", subject="Collect sources",
                           write_scopes=["docs"], team_id=t)),
        ("team/task", task("task-3", subject="Edit intro", write_scopes=["docs/intro.md"], team_id=t)),
        ("team/task", task("task-3", 2, status="in_progress", owner_id="c-beta", subject="Edit intro",
                           write_scopes=["docs/intro.md"], team_id=t)),
        ("team/message/queued", queued("m-1", "c-alpha", sender_id=t, team_id=t,
                                       content=[{"type": "text", "text": "Start with the RFCs"}])),
        ("team/message/delivered", delivered("m-1", "c-alpha", team_id=t)),
        ("team/message/queued", queued("m-2", t, sender_id="c-beta", sender_name="beta", team_id=t,
                                       content=[{"type": "text", "text": "Intro done.\nPlease review " + "x" * 80}])),
        ("team/message/queued", queued("m-3", "c-beta", sender_id=t, team_id=t)),
        ("team/task", task("task-1", 3, status="completed", owner_id="c-alpha", subject="Collect sources",
                           write_scopes=["docs"], team_id=t)),
        ("team/mode", mode(True, team_id=t)),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A data dir holding the mid-run Team and one teammate's own log."""
    root = tmp_path / "data"
    write_session(root, LEAD, team_events())
    write_session(root, "c-alpha", [("turn/start", {"turn": 1})], parent=LEAD, created=2000)
    return root


def show(capsys: pytest.CaptureFixture[str], data: Path, *args: str) -> tuple[int, str, str]:
    """Run ``dsh team show`` in process through the host's entry point (installed extensions)."""
    code = main(["team", "show", "--data-dir", str(data), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def show_json(capsys: pytest.CaptureFixture[str], data: Path, *args: str) -> tuple[int, dict[str, Any]]:
    code, out, err = show(capsys, data, "--json", *args)
    assert "Traceback" not in err
    return code, json.loads(out)


def dsh(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    variables = dict(os.environ)
    variables.pop("DSH_DATA_DIR", None)
    variables.update(env or {})
    return subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", *args], env=variables,
                          capture_output=True, text=True, timeout=60)


# ---------------------------------------------------------------- text view


class TestTextView:
    def test_roster_lists_offline_statuses_and_pending_mail(self, capsys: pytest.CaptureFixture[str], data: Path) -> None:
        """The Lead row comes first; active members read inactive, failed ones failed with their error."""
        code, out, _ = show(capsys, data)
        assert code == 0
        lines = out.splitlines()
        assert lines[0] == f"Team {LEAD}  (Lead log: all 19 events; last Team record at seq 17)"
        assert "Offline view: no process is attached, so active members and the Lead show as inactive." in lines
        assert "Team mode: on" in lines
        start = lines.index("Members (4)")
        rows = [line.split() for line in lines[start + 2 : start + 6]]
        assert [row[:3] for row in rows] == [
            ["lead", "lead", "inactive"], ["alpha", "teammate", "inactive"],
            ["beta", "teammate", "inactive"], ["gamma", "teammate", "failed"],
        ]
        assert [row[5] for row in rows] == ["1", "0", "1", "0"]  # pending mail per member
        assert "    gamma: error: provider exploded" in lines

    def test_board_shows_status_owner_readiness_blockers_and_warnings(
        self, capsys: pytest.CaptureFixture[str], data: Path
    ) -> None:
        """task-2 is ready once its blocker completed; overlapping in-progress scopes warn."""
        _, out, _ = show(capsys, data, "--at", "16")
        lines = out.splitlines()
        start = lines.index("Tasks (3: 1 pending, 2 in_progress)")
        rows = [line.split(None, 7) for line in lines[start + 2 : start + 5]]
        assert rows == [  # TOKENS: nothing was charged to any task
            ["task-1", "2", "in_progress", "alpha", "no", "-", "-", "Collect sources"],
            ["task-2", "1", "pending", "-", "no", "task-1", "-", "Write draft"],
            ["task-3", "2", "in_progress", "beta", "no", "-", "-", "Edit intro"],
        ]
        assert "    task-1: warning: write scopes overlap with task-3" in lines
        assert "    task-3: warning: write scopes overlap with task-1" in lines
        assert "    task-3: write scopes: docs/intro.md" in lines
        _, out, _ = show(capsys, data)
        assert "task-2  1    pending      -      yes    task-1      -       Write draft" in out
        # The viewed task's own status does not matter; only the *other* task must be in progress.
        assert "    task-1: warning: write scopes overlap with task-3" in out
        assert "task-3: warning" not in out

    def test_pending_mail_lists_queued_minus_delivered(self, capsys: pytest.CaptureFixture[str], data: Path) -> None:
        """Delivered m-1 is gone; m-2 and m-3 are listed in queue order with sender, target and a preview."""
        _, out, _ = show(capsys, data)
        lines = out.splitlines()
        start = lines.index("Pending mail (2 queued, not yet delivered)")
        assert lines[start + 1].startswith("  beta -> lead  [m-2]  Intro done. Please review xxx")
        assert lines[start + 1].endswith("...") and len(lines[start + 1]) < 110
        assert lines[start + 2] == "  lead -> beta  [m-3]  hi"
        assert "[m-1]" not in out

    def test_messages_list_each_recent_message_with_its_status(self, capsys: pytest.CaptureFixture[str], data: Path) -> None:
        """The messages part lists every message in queue order with where it got: delivered m-1, queued m-2 and m-3."""
        _, out, _ = show(capsys, data)
        lines = out.splitlines()
        start = lines.index("Messages (3 most recent: queued, delivered or read)")
        assert [line.split() for line in lines[start + 1 : start + 5]] == [
            ["FROM", "TO", "STATUS", "ID"], ["lead", "alpha", "delivered", "m-1"],
            ["beta", "lead", "queued", "m-2"], ["lead", "beta", "queued", "m-3"]]

    def test_team_without_records_says_so(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """A root with no Team records shows the Lead alone, no tasks, no mail, mode left to the profile."""
        write_session(tmp_path, "solo", [("turn/start", {"turn": 1})])
        code, out, _ = show(capsys, tmp_path, "solo")
        assert code == 0
        assert "Team mode: not selected (the profile's team_mode_default decides)" in out
        assert "Members (1)" in out and "  (no tasks)" in out and "  (none)" in out

    def test_mode_switched_off_is_shown(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """An explicit ``team/mode`` false selection reads off, even with records."""
        write_session(tmp_path, "r", [("team/task", task("task-1", team_id="r")), ("team/mode", mode(False, team_id="r"))])
        _, out, _ = show(capsys, tmp_path, "r")
        assert "Team mode: off" in out


class TestSessionChoice:
    def test_default_is_the_most_recent_root(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """Without SESSION_ID the latest *root* is shown, not a later child."""
        write_session(tmp_path, "older", [("team/task", task("task-1", team_id="older"))], created=1)
        write_session(tmp_path, "newer", [("team/task", task("task-1", subject="newest", team_id="newer"))], created=2)
        write_session(tmp_path, "kid", [("turn/start", {"turn": 1})], parent="newer", created=3)
        _, doc = show_json(capsys, tmp_path)
        assert doc["team_id"] == "newer" and doc["tasks"][0]["subject"] == "newest"

    def test_teammate_id_shows_its_team(self, capsys: pytest.CaptureFixture[str], data: Path) -> None:
        """A teammate's session id resolves to the Team whose roster lists it."""
        code, out, _ = show(capsys, data, "c-alpha")
        assert code == 0
        assert out.splitlines()[:2] == [
            f"Team {LEAD}  (Lead log: all 19 events; last Team record at seq 17)",
            "(session c-alpha is a member of this Team)",
        ]

    def test_child_off_the_roster_leads_its_own_team(self, capsys: pytest.CaptureFixture[str], data: Path) -> None:
        """An ordinary fork (not on its parent's roster) is the Lead of its own, empty Team."""
        write_session(data, "fork-1", [("turn/start", {"turn": 1})], parent=LEAD, created=3000)
        _, doc = show_json(capsys, data, "fork-1")
        assert doc["team_id"] == "fork-1" and [m["name"] for m in doc["members"]] == ["lead"]

    def test_child_with_unreadable_parent_leads_its_own_team(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        """A child whose parent log is missing is shown as its own Team instead of failing."""
        write_session(tmp_path, "orphan", [("turn/start", {"turn": 1})], parent="gone")
        code, doc = show_json(capsys, tmp_path, "orphan")
        assert code == 0 and doc["team_id"] == "orphan"


class TestAt:
    def test_at_folds_only_up_to_that_position(self, capsys: pytest.CaptureFixture[str], data: Path) -> None:
        """``--at`` shows the Team as it was: before the completion task-2 was not ready, m-2 not queued."""
        code, doc = show_json(capsys, data, "--at", "14")
        assert code == 0
        assert (doc["at"], doc["log_length"], doc["position"]) == (14, 19, 14)
        assert {t["id"]: t["ready"] for t in doc["tasks"]} == {"task-1": False, "task-2": False, "task-3": False}
        assert doc["pending_mail"] == [] and doc["writes"] == []  # nobody wrote a file here
        _, later = show_json(capsys, data, "--at", "17")
        assert {t["id"]: t["ready"] for t in later["tasks"]}["task-2"] is True
        assert [m["id"] for m in later["pending_mail"]] == ["m-2", "m-3"]

    def test_at_zero_and_at_the_end(self, capsys: pytest.CaptureFixture[str], data: Path) -> None:
        """``--at 0`` is the empty Team; ``--at`` = log length equals the default view."""
        _, empty = show_json(capsys, data, "--at", "0")
        assert (empty["members"][1:], empty["tasks"], empty["position"], empty["enabled"]) == ([], [], 0, None)
        _, full = show_json(capsys, data)
        _, last = show_json(capsys, data, "--at", "19")
        assert full == last
        code, out, _ = show(capsys, data, "--at", "5")
        assert code == 0 and "(Lead log: seq 5 of 19; last Team record at seq 5)" in out

    def test_at_beyond_the_log_is_refused(self, capsys: pytest.CaptureFixture[str], data: Path) -> None:
        """``--at`` past the last event prints a coded error, no traceback, exit 2."""
        code, out, err = show(capsys, data, "--at", "20")
        assert code == 2 and out == ""
        assert err.strip() == f"dsh: TEAM_SHOW_BAD_POSITION: --at 20 is beyond the Lead log of {LEAD} (19 events)"

    @pytest.mark.parametrize("value", ["-1", "seven"])
    def test_at_must_be_a_non_negative_integer(self, capsys: pytest.CaptureFixture[str], data: Path, value: str) -> None:
        """A negative or non-numeric SEQ is a usage error (exit 2) naming the option."""
        with pytest.raises(SystemExit) as exc:
            main(["team", "show", "--data-dir", str(data), "--at", value])
        assert exc.value.code == 2
        assert "argument --at: SEQ must be" in capsys.readouterr().err


class TestJson:
    def test_json_keys_are_stable_and_snake_case(self, capsys: pytest.CaptureFixture[str], data: Path) -> None:
        """The document pins its key sets (every key always present) and the member/task/mail values."""
        code, doc = show_json(capsys, data)
        assert code == 0
        assert list(doc) == ["version", "team_id", "session_id", "log_length", "at", "position", "offline",
                             "enabled", "failure", "members", "tasks", "pending_mail", "writes", "messages", "costs",
                             "quiescence", "controls", "worktrees", "permissions"]
        assert [(m["id"], m["status"]) for m in doc["messages"]] == [("m-1", "delivered"), ("m-2", "queued"),
                                                                     ("m-3", "queued")]
        assert (doc["version"], doc["team_id"], doc["offline"], doc["enabled"], doc["failure"]) == (1, LEAD, True, True, None)
        assert doc["quiescence"] is None  # mail is still queued: never quiet
        assert doc["controls"] is None  # no gate ran, no plan was gated
        assert doc["worktrees"] is None  # shared mode: no member had a worktree
        assert doc["permissions"] is None  # nobody asked
        assert doc["members"][0] == {
            "id": LEAD, "name": "lead", "role": "lead", "status": "inactive", "phase": "active",
            "description": None, "provider": None, "context": None, "error": None, "pending_mail": 1,
            "usage": {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cached_tokens": 0, "model": None,
                      "compactions": 0},
            "unread_mail": 0,
        }
        assert doc["members"][3] == {
            "id": "c-gamma", "name": "gamma", "role": "teammate", "status": "failed", "phase": "failed",
            "description": "worker", "provider": "spawn", "context": "fresh", "error": "provider exploded",
            "pending_mail": 0, "usage": None, "unread_mail": 0,  # no log of its own: nothing was recorded
        }
        assert doc["tasks"][0] == {
            "id": "task-1", "revision": 3, "subject": "Collect sources", "description": "description",
            "status": "completed", "owner_id": "c-alpha", "owner_name": "alpha", "blocked_by": [],
            "write_scopes": ["docs"], "ready": False, "write_scope_warnings": ["write scopes overlap with task-3"],
        }
        assert doc["tasks"][1]["owner_id"] is None and doc["tasks"][1]["blocked_by"] == ["task-1"]
        assert doc["pending_mail"][1] == {
            "id": "m-3", "sender_id": LEAD, "sender_name": "lead", "target_id": "c-beta", "target_name": "beta",
            "text": "hi", "content": [{"type": "text", "text": "hi"}],
        }

    def test_provisioning_member_keeps_its_phase(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """A member still provisioning (a crash mid-spawn) shows status provisioning offline."""
        write_session(tmp_path, "r", [("team/member", member("c1", "alpha", team_id="r"))])
        _, doc = show_json(capsys, tmp_path)
        assert doc["members"][1]["status"] == doc["members"][1]["phase"] == "provisioning"

    async def test_json_matches_the_live_service_view(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """A Team built by the real service (dsh-team plugin on the reference host) reads back identically."""
        host = await open_host(tmp_path)
        root, (alpha, _beta) = await team(host, "alpha", "beta")
        teams = service(host)
        await teams.create_task(root, subject="a", description="d", write_scopes=["src"])
        await teams.create_task(alpha, subject="b", description="d", blocked_by=["task-1"])
        await teams.update_task(alpha, task_id="task-1", expected_revision=1, action="claim")
        view = teams.view(root)
        await host.close()
        # the CLI runs its own event loop, so it runs on a thread of its own
        code, doc = await asyncio.to_thread(show_json, capsys, tmp_path, "lead")
        assert code == 0
        assert [(m["id"], m["name"], m["role"], m["phase"]) for m in doc["members"]] == [
            (row.id, row.name, row.role, row.phase) for row in view.members
        ]
        live = [{"owner_id": None, "owner_name": None, **json.loads(_encode(t))} for t in view.tasks]
        assert doc["tasks"] == live


def _encode(value: Any) -> str:
    import msgspec

    return msgspec.json.encode(value).decode()


# ---------------------------------------------------------------- bad input


class TestBadInput:
    def test_missing_data_dir(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """A data dir that does not exist: DATA_DIR_NOT_FOUND, exit 2, nothing created."""
        code, out, err = show(capsys, tmp_path / "nope")
        assert (code, out) == (2, "")
        assert err.startswith("dsh: DATA_DIR_NOT_FOUND: data dir ") and "Traceback" not in err
        assert not (tmp_path / "nope").exists()

    def test_data_dir_that_is_a_file(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """A file in place of the data dir: DATA_DIR_UNUSABLE."""
        (tmp_path / "file").write_text("x")
        code, _, err = show(capsys, tmp_path / "file")
        assert code == 2 and err.startswith("dsh: DATA_DIR_UNUSABLE:")

    def test_empty_data_dir(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """An existing but empty data dir: SESSION_NOT_FOUND naming the directory."""
        code, out, err = show(capsys, tmp_path)
        assert (code, out) == (2, "")
        assert err.strip() == f"dsh: SESSION_NOT_FOUND: no root session stored in {tmp_path}"

    def test_unknown_session(self, capsys: pytest.CaptureFixture[str], data: Path) -> None:
        """An unknown SESSION_ID: SESSION_NOT_FOUND naming it."""
        code, _, err = show(capsys, data, "who")
        assert code == 2 and err.strip() == f"dsh: SESSION_NOT_FOUND: session who not found in {data}"

    def test_corrupt_team_stream_shows_failure_and_last_valid_state(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        """A record that breaks the fold: the failure and the state before it, exit 3 (text and JSON)."""
        events = [
            ("team/task", task("task-1", team_id="r")),
            ("team/task", task("task-1", 2, status="in_progress", owner_id="r", team_id="r")),
            ("team/task", task("task-1", 9, status="completed", owner_id="r", team_id="r")),
            ("team/task", task("task-2", team_id="r")),
        ]
        write_session(tmp_path, "r", events)
        code, out, err = show(capsys, tmp_path)
        assert code == EXIT_FAILED and "Traceback" not in err
        lines = out.splitlines()
        assert lines[1] == 'FAILURE (Team stream failed at seq 3): team task "task-1" revision is not contiguous (9 after 2)'
        assert lines[2] == "Showing the last valid state, before seq 3."
        assert "task-1  2    in_progress  lead" in out and "task-2" not in out
        code, doc = show_json(capsys, tmp_path)
        assert code == EXIT_FAILED
        assert doc["failure"] == {"source": "team", "message": 'team task "task-1" revision is not contiguous (9 after 2)',
                                  "seq": 3}
        code, doc = show_json(capsys, tmp_path, "--at", "2")
        assert code == 0 and doc["failure"] is None

    def test_damaged_log_shows_the_readable_prefix(self, capsys: pytest.CaptureFixture[str], data: Path) -> None:
        """A garbage line inside the committed region: the events before it, a ``log`` failure, exit 3."""
        path = JsonlStore(data).path(LEAD)
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join([*lines[:11], b"{not json\n", *lines[11:]]))  # after event seq 10
        code, doc = show_json(capsys, data)
        assert code == EXIT_FAILED
        assert (doc["log_length"], doc["at"]) == (10, 10)
        assert doc["failure"]["source"] == "log" and doc["failure"]["seq"] == 11
        assert "unparsable committed event at line 12" in doc["failure"]["message"]
        assert [t["id"] for t in doc["tasks"]] == ["task-1", "task-2"]
        code, out, _ = show(capsys, data)
        assert code == EXIT_FAILED and "FAILURE (Lead log is damaged at seq 11): " in out

    def test_damaged_log_before_at_is_intact(self, capsys: pytest.CaptureFixture[str], data: Path) -> None:
        """``--at`` inside the readable prefix is exact (exit 0, a warning); past it, a coded error."""
        path = JsonlStore(data).path(LEAD)
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join([*lines[:11], b"garbage\n", *lines[11:]]))
        code, out, err = show(capsys, data, "--at", "7")
        assert code == 0 and "FAILURE" not in out
        assert err.strip() == "dsh: warning: the Lead log is damaged after seq 10; seqs 1..7 are intact"
        code, _, err = show(capsys, data, "--at", "12")
        assert code == 2
        assert err.strip() == f"dsh: TEAM_SHOW_BAD_POSITION: --at 12 is beyond the Lead log of {LEAD} (10 readable events)"

    def test_damaged_header_is_an_error(self, capsys: pytest.CaptureFixture[str], data: Path) -> None:
        """An unreadable header cannot be salvaged: SESSION_CORRUPT, exit 2."""
        path = JsonlStore(data).path(LEAD)
        path.write_bytes(b"[]\n" + path.read_bytes().split(b"\n", 1)[1])
        code, _, err = show(capsys, data, LEAD)
        assert code == 2 and err.startswith("dsh: SESSION_CORRUPT: ") and "line 1 is not a session header" in err


# ---------------------------------------------------------------- rendering units


class TestRendering:
    def test_offline_status_follows_the_phase(self) -> None:
        """provisioning and failed are kept; active reads inactive."""
        assert [offline_status(p) for p in ("provisioning", "active", "failed")] == ["provisioning", "inactive", "failed"]

    def test_team_failure_wins_over_log_damage(self) -> None:
        """When the fold failed, that failure is reported even if the log is damaged later."""
        from team_builders import Log

        log = Log()
        log.task("task-1", 2)
        state = log.fold()
        view = build_show(state, session_id="lead", log_length=1, at=1, damage=("bad line", 2))
        assert view.failure == ShowFailure(source="team", message=state.failure.message, seq=1)
        clean = build_show(initial_state("lead"), session_id="lead", log_length=0, at=0, damage=("bad line", 1))
        assert clean.failure == ShowFailure(source="log", message="bad line", seq=1)
        assert isinstance(clean, TeamShow) and "Lead log is damaged at seq 1" in render_text(clean)


# ---------------------------------------------------------------- the host's extension point


class TestExtensionPoint:
    def test_installed_entry_point_registers_team(self) -> None:
        """The ``dsh.cli`` entry point ``team`` resolves to :func:`dsh_team.cli.register`."""
        found = dict(cli_ext.discover_extensions())
        assert found["team"] is team_cli.register

    def test_broken_extensions_do_not_break_dsh(
        self, capsys: pytest.CaptureFixture[str], data: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An extension that fails to import or register, or clashes by name, is reported; the others still work."""
        bad = EntryPoint(name="bad", value="no_such_module_xyz:register", group="dsh.cli")
        good = EntryPoint(name="team", value="dsh_team.cli:register", group="dsh.cli")
        clash = EntryPoint(name="team", value="elsewhere:register", group="dsh.cli")
        monkeypatch.setattr(cli_ext, "entry_points", lambda group: [good, bad, good, clash])

        def exploding(subparsers: Any, env: Any) -> None:
            raise RuntimeError("boom")

        extensions = [*cli_ext.discover_extensions(), ("exploding", exploding)]
        err = capsys.readouterr().err
        assert 'dsh: warning: CLI extension "bad" failed to import: ModuleNotFoundError' in err
        assert 'CLI extension "team" is declared twice (dsh_team.cli:register, elsewhere:register)' in err
        assert [name for name, _ in extensions] == ["team", "exploding"]  # "bad" skipped, "team" once
        code = main(["team", "show", "--data-dir", str(data), "--at", "1"], extensions=extensions)
        captured = capsys.readouterr()
        assert code == 0 and captured.out.startswith(f"Team {LEAD}")
        assert 'dsh: warning: CLI extension "exploding" failed to register: RuntimeError: boom' in captured.err

    def test_async_handlers_and_reader_services(self, capsys: pytest.CaptureFixture[str], data: Path) -> None:
        """A handler may return an awaitable; the env's reader lists roots and headers read-only."""
        seen: dict[str, Any] = {}

        def register(subparsers: Any, env: Any) -> None:
            parser = subparsers.add_parser("probe")
            env.add_data_dir(parser)

            async def handler(args: Any) -> int:
                reader = env.open_store(args.data_dir)
                seen["roots"] = reader.roots()
                seen["ids"] = reader.list_ids()
                seen["header"] = reader.header("c-alpha").parent_session
                seen["log"] = reader.read(LEAD)
                with pytest.raises(SessionNotFoundError):
                    reader.header("missing")
                with pytest.raises(SessionNotFoundError):
                    reader.read("missing")
                return 7

            parser.set_defaults(dsh_handler=handler)

        assert main(["probe", "--data-dir", str(data)], extensions=[("probe", register)]) == 7
        assert seen["roots"] == [LEAD] and seen["ids"] == [LEAD, "c-alpha"] and seen["header"] == LEAD
        assert isinstance(seen["log"], StoredLog) and len(seen["log"].events) == 19 and seen["log"].damage is None

    def test_reader_raises_damage_without_salvage(self, data: Path) -> None:
        """Without ``salvage`` a damaged committed region raises ``SESSION_CORRUPT``."""
        path = JsonlStore(data).path(LEAD)
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join([*lines[:3], b"junk\n", *lines[3:]]))
        reader = cli_ext.StoreReader(JsonlStore(data))
        with pytest.raises(SessionCorruptError):
            reader.read(LEAD)
        assert len(reader.read(LEAD, salvage=True).events) == 2


# ---------------------------------------------------------------- real subprocess


@pytest.mark.slow
class TestSubprocess:
    def test_dsh_team_show_runs_as_a_real_command(self, data: Path) -> None:
        """``dsh team show`` through a real process: text, ``--json`` with ``--at``, and exit codes."""
        result = dsh("team", "show", "--data-dir", str(data))
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[0] == f"Team {LEAD}  (Lead log: all 19 events; last Team record at seq 17)"
        result = dsh("team", "show", "--json", "--at", "12", LEAD, env={"DSH_DATA_DIR": str(data)})
        assert result.returncode == 0, result.stderr
        doc = json.loads(result.stdout)
        assert doc["at"] == 12 and [t["status"] for t in doc["tasks"]] == ["in_progress", "pending", "in_progress"]

    def test_bad_input_exits_without_traceback(self, tmp_path: Path) -> None:
        """A missing data dir and a corrupt Team stream: one-line message or failure view, no traceback."""
        result = dsh("team", "show", "--data-dir", str(tmp_path / "missing"))
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr.startswith("dsh: DATA_DIR_NOT_FOUND:") and "Traceback" not in result.stderr
        write_session(tmp_path / "d", "r", [("team/task", task("task-1", 5, team_id="r"))])
        result = dsh("team", "show", "--data-dir", str(tmp_path / "d"))
        assert result.returncode == EXIT_FAILED and "Traceback" not in result.stderr
        assert 'FAILURE (Team stream failed at seq 1): team task "task-1" must begin at revision 1' in result.stdout
