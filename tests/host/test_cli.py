"""The ``dsh`` command, run as a real subprocess (and in-process for the error paths)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import structlog

from host_spec.cli import HANDLER_KEY
from host_spec.host.app import Host
from host_spec.host.cli.main import main
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.cli.run_settings import RunSettings, absolute_spec, lookup, record
from host_spec.messages import user_message

ECHO_PLUGIN = '''
import msgspec
from host_spec import hookimpl
from host_spec.records import ToolSpec

class EchoArgs(msgspec.Struct, forbid_unknown_fields=True):
    """Echo the text back."""
    text: str

class EchoResult(msgspec.Struct):
    echo: str

async def _echo(args, call):
    return EchoResult(echo=args.text)

@hookimpl
def dsh_plugin_loaded(host, ctx):
    ctx.own(host.tools.register(ToolSpec("echo", "Echo the text back.", EchoArgs, EchoResult, _echo)))
'''

SCRIPT = {
    "lead": [
        {"text": "calling echo", "tool_calls": [{"name": "echo", "arguments": {"text": "ping"}}]},
        {"text": "done: ping came back", "when": "ping"},
    ]
}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, Any]:
    """A tmp site with an ``echo-plug`` plugin distribution, a profile using it, and a script."""
    site = tmp_path / "site"
    (site / "echoplug").mkdir(parents=True)
    (site / "echoplug" / "__init__.py").write_text(ECHO_PLUGIN)
    dist = site / "echoplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: echoplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[dsh]\necho-plug = echoplug\n")
    profile = tmp_path / "echo.toml"
    profile.write_text('extends = "headless"\n[plugins.echo-plug]\n')
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    variables = dict(os.environ)
    variables["PYTHONPATH"] = os.pathsep.join([str(site), variables.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    variables.pop("DSH_DATA_DIR", None)
    return {"site": site, "profile": profile, "script": script, "data": tmp_path / "data", "env": variables}


def dsh(env: dict[str, Any], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "host_spec.host.cli.main", *args],
        env=env["env"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def run_echo(env: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return dsh(env, "run", "--profile", str(env["profile"]), "--model", f"scripted:{env['script']}",
               "--data-dir", str(env["data"]), "say ping")


def session_id(result: subprocess.CompletedProcess[str]) -> str:
    line = next(line for line in result.stderr.splitlines() if line.startswith("dsh: session "))
    return line.removeprefix("dsh: session ")


@pytest.mark.slow
class TestRun:
    def test_run_prints_a_member_prefixed_transcript(self, env: dict[str, Any]) -> None:
        """``dsh run`` completes a scripted session that calls a tool and prints every step."""
        result = run_echo(env)
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == [
            "[lead] user: say ping",
            "[lead] assistant: calling echo",
            '[lead] tool call echo {"text":"ping"}',
            '[lead] tool result echo {"echo":"ping"}',
            "[lead] assistant: done: ping came back",
        ]
        assert "Traceback" not in result.stderr

    def test_log_prints_the_stored_events(self, env: dict[str, Any]) -> None:
        """``dsh log`` prints every stored event of the session, read-only."""
        sid = session_id(run_echo(env))
        result = dsh(env, "log", "--data-dir", str(env["data"]), sid)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0].startswith(f"session {sid} ")
        types = [line.split()[1] for line in lines[1:]]
        assert types[:2] == ["agent/inbox/spliced", "turn/start"]
        assert "tool/call" in types and "tool/result" in types and types[-1] == "turn/end"
        raw = dsh(env, "log", "--json", "--data-dir", str(env["data"]), sid)
        assert json.loads(raw.stdout.splitlines()[0])["id"] == sid

    def test_resume_defaults_to_the_latest_root(self, env: dict[str, Any]) -> None:
        """``dsh resume`` without an id resumes the most recent root session."""
        first = session_id(run_echo(env))
        second = session_id(run_echo(env))
        assert first != second
        result = dsh(env, "resume", "--profile", str(env["profile"]), "--data-dir", str(env["data"]))
        assert result.returncode == 0, result.stderr
        assert session_id(result) == second

    def test_data_dir_defaults_from_the_environment(self, env: dict[str, Any], tmp_path: Path) -> None:
        """Without ``--data-dir``, ``$DSH_DATA_DIR`` (else ``./.dsh-data``) is used."""
        env["env"]["DSH_DATA_DIR"] = str(tmp_path / "from-env")
        result = dsh(env, "run", "--profile", str(env["profile"]), "--model", f"scripted:{env['script']}", "x")
        assert result.returncode == 0, result.stderr
        assert (tmp_path / "from-env" / "sessions").is_dir()
        del env["env"]["DSH_DATA_DIR"]
        work = tmp_path / "cwd"
        work.mkdir()
        result = dsh(env, "run", "--profile", str(env["profile"]), "--model", f"scripted:{env['script']}", "x", cwd=work)
        assert result.returncode == 0, result.stderr
        assert (work / ".dsh-data" / "sessions").is_dir()


@pytest.mark.slow
class TestHelp:
    @pytest.mark.parametrize("command", [[], ["run"], ["resume"], ["log"]])
    def test_help_everywhere(self, env: dict[str, Any], command: list[str]) -> None:
        """Every command answers ``--help`` with its usage and exits 0."""
        result = dsh(env, *command, "--help")
        assert result.returncode == 0
        assert result.stdout.startswith("usage: dsh")
        assert "--data-dir" in result.stdout or not command


class TestErrors:
    """Bad input prints ``dsh: <code>: <message>`` on stderr, exits 2, and shows no traceback."""

    def fails(self, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
        assert main(list(argv)) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err
        return err

    def test_malformed_script(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """A script that is not the documented shape is a SCRIPT_INVALID error."""
        script = tmp_path / "bad.json"
        script.write_text('{"lead": [{"txt": 1}]}')
        err = self.fails(capsys, "run", "--model", f"scripted:{script}", "--data-dir", str(tmp_path / "d"), "x")
        assert err.startswith("dsh: SCRIPT_INVALID: ")

    def test_unknown_model(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """Only ``scripted:FILE`` models exist."""
        err = self.fails(capsys, "run", "--model", "gpt:x", "--data-dir", str(tmp_path / "d"), "x")
        assert err.startswith('dsh: MODEL_UNKNOWN: unknown model "gpt:x"')

    def test_unknown_plugin(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """A profile naming a plugin nobody installed is rejected, naming it."""
        profile = tmp_path / "p.toml"
        profile.write_text("[plugins.nope]\n")
        script = tmp_path / "s.json"
        script.write_text("{}")
        err = self.fails(capsys, "run", "--profile", str(profile), "--model", f"scripted:{script}",
                         "--data-dir", str(tmp_path / "d"), "x")
        assert err.startswith("dsh: CONFIG_INVALID: ") and 'unknown plugin "nope" @ plugins.nope' in err

    def test_unknown_config_key(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """A misspelt key in a plugin's table names the plugin and the key."""
        profile = tmp_path / "p.toml"
        profile.write_text("[plugins.subagent]\nmax_dept = 2\n")
        script = tmp_path / "s.json"
        script.write_text("{}")
        err = self.fails(capsys, "run", "--profile", str(profile), "--model", f"scripted:{script}",
                         "--data-dir", str(tmp_path / "d"), "x")
        assert err.strip() == "dsh: CONFIG_INVALID: extra fields found (max_dept) @ plugins.subagent"

    def test_unknown_profile(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """An unknown built-in profile name lists the built-ins."""
        script = tmp_path / "s.json"
        script.write_text("{}")
        err = self.fails(capsys, "run", "--profile", "nope", "--model", f"scripted:{script}",
                         "--data-dir", str(tmp_path / "d"), "x")
        assert 'unknown profile "nope"' in err

    def test_unusable_data_dir(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """A data dir that is a file cannot be used."""
        not_a_dir = tmp_path / "file"
        not_a_dir.write_text("")
        script = tmp_path / "s.json"
        script.write_text("{}")
        err = self.fails(capsys, "run", "--model", f"scripted:{script}", "--data-dir", str(not_a_dir), "x")
        assert err.startswith("dsh: DATA_DIR_UNUSABLE: ")
        err = self.fails(capsys, "log", "--data-dir", str(not_a_dir), "s1")
        assert err.startswith("dsh: DATA_DIR_UNUSABLE: ")

    def test_missing_data_dir(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """``log`` and ``resume`` never create a data dir."""
        err = self.fails(capsys, "resume", "--data-dir", str(tmp_path / "missing"))
        assert err.startswith("dsh: DATA_DIR_NOT_FOUND: ")
        assert not (tmp_path / "missing").exists()

    def test_unknown_session(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """Asking for a session that is not stored is SESSION_NOT_FOUND."""
        (tmp_path / "d").mkdir()
        assert self.fails(capsys, "log", "--data-dir", str(tmp_path / "d"), "nope").startswith("dsh: SESSION_NOT_FOUND: ")
        assert self.fails(capsys, "resume", "--data-dir", str(tmp_path / "d"), "nope").startswith("dsh: SESSION_NOT_FOUND: ")
        err = self.fails(capsys, "resume", "--data-dir", str(tmp_path / "d"))
        assert err.startswith("dsh: SESSION_NOT_FOUND: no root session")

    def test_uncreatable_data_dir(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """A data dir whose parent is a file cannot be created."""
        (tmp_path / "file").write_text("")
        script = tmp_path / "s.json"
        script.write_text("{}")
        err = self.fails(capsys, "run", "--model", f"scripted:{script}", "--data-dir", str(tmp_path / "file" / "d"), "x")
        assert err.startswith("dsh: DATA_DIR_UNUSABLE: cannot create")

    @pytest.mark.slow
    def test_errors_via_the_real_command(self, env: dict[str, Any], tmp_path: Path) -> None:
        """The console entry point behaves the same in a real process."""
        bad = tmp_path / "bad.json"
        bad.write_text("[1, 2]")
        result = dsh(env, "run", "--model", f"scripted:{bad}", "--data-dir", str(env["data"]), "x")
        assert result.returncode == 2 and result.stderr.startswith("dsh: SCRIPT_INVALID: ")
        assert "Traceback" not in result.stderr and result.stdout == ""


def failing_extension(exc: BaseException) -> tuple[str, Any]:
    """A CLI extension whose ``boom`` command raises ``exc`` (through the public extension seam)."""

    async def boom(args: Any) -> int:
        raise exc

    def register(subparsers: Any, env: Any) -> None:
        subparsers.add_parser("boom").set_defaults(**{HANDLER_KEY: boom})

    return ("boom", register)


@pytest.fixture
def in_process(env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The echo plugin importable in this process; structlog reset after ``main`` configured it."""
    monkeypatch.syspath_prepend(str(env["site"]))
    monkeypatch.delenv("DSH_DATA_DIR", raising=False)
    yield env
    structlog.reset_defaults()
    sys.modules.pop("echoplug", None)


class TestInProcess:
    """The same commands through ``main()``, so their paths count towards coverage."""

    def test_run_log_resume(self, in_process: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
        """run prints the transcript, log prints events, resume picks the latest root."""
        env = in_process
        data = str(env["data"])
        assert main(["run", "--profile", str(env["profile"]), "--model", f"scripted:{env['script']}",
                     "--data-dir", data, "say ping"]) == 0
        out, err = capsys.readouterr()
        assert out.splitlines()[2] == '[lead] tool call echo {"text":"ping"}'
        sid = err.strip().splitlines()[-1].removeprefix("dsh: session ")
        assert main(["log", "--data-dir", data, sid]) == 0
        assert "tool/result" in capsys.readouterr().out
        assert main(["log", "--json", "--data-dir", data, sid]) == 0
        assert json.loads(capsys.readouterr().out.splitlines()[1])["seq"] == 1
        assert main(["resume", "--profile", str(env["profile"]), "--data-dir", data]) == 0
        assert capsys.readouterr().err.strip().endswith(f"dsh: session {sid}")

    def test_resume_reuses_the_runs_profile_and_model(
        self, in_process: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """``dsh resume`` with no flags loads the profile and model the run was started with."""
        env = in_process
        data = env["data"]
        monkeypatch.chdir(env["script"].parent)  # a relative script path is recorded absolute
        assert main(["run", "--profile", str(env["profile"]), "--model", f"scripted:{env['script'].name}",
                     "--data-dir", str(data), "say ping"]) == 0
        sid = capsys.readouterr().err.strip().splitlines()[-1].removeprefix("dsh: session ")
        recorded = lookup(data, sid)
        assert recorded == RunSettings(str(Path(env["profile"]).resolve()), f"scripted:{env['script'].resolve()}")
        monkeypatch.chdir(data)
        assert main(["resume", "--data-dir", str(data), sid]) == 0  # the echo tool exists: the profile loaded
        assert capsys.readouterr().err.strip().endswith(f"dsh: session {sid}")

    def test_run_settings_lookup_and_specs(self, tmp_path: Path) -> None:
        """Unknown or unreadable records are ``None``; names pass through, file parts become absolute."""
        assert lookup(tmp_path, "nope") is None
        record(tmp_path, "a/b", RunSettings("headless", "scripted:/x.json"))
        assert lookup(tmp_path, "a/b") == RunSettings("headless", "scripted:/x.json")
        next((tmp_path / "runs").iterdir()).write_text("{not json")
        assert lookup(tmp_path, "a/b") is None
        assert absolute_spec("agent-teams") == "agent-teams"
        assert absolute_spec("p.toml") == str(Path("p.toml").resolve())
        assert absolute_spec("dir/p") == str(Path("dir/p").resolve())
        assert absolute_spec("echo:x", prefix="scripted:") == "echo:x"

    def test_resume_finishes_pending_work_and_reports_failure(
        self, in_process: dict[str, Any], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A stored pending prompt runs on resume; without ``--model`` the turn fails and exit is 1."""
        data = in_process["data"]

        async def leave_pending() -> str:
            host = await Host.open(data, None, ScriptedModel.from_mapping({}))
            session = await host.create_session()
            host.start_agent(session, name="lead").followup(user_message("pending work"))
            await host.close()
            return session.id

        sid = asyncio.run(leave_pending())
        capsys.readouterr()  # unconfigured structlog wrote to stdout until main() configured it
        assert main(["resume", "--data-dir", str(data), sid]) == 1
        out = capsys.readouterr().out
        assert out.splitlines()[0] == "[lead] user: pending work"
        assert '"code":"MODEL_UNKNOWN"' in out.splitlines()[1]

    @pytest.mark.parametrize(
        ("exc", "status", "text"),
        [
            (OSError(28, "No space left on device"), 2, "dsh: IO_ERROR: [Errno 28] No space left on device"),
            (KeyboardInterrupt(), 130, "dsh: interrupted"),
            (RuntimeError("bug"), 1, "dsh: INTERNAL_ERROR: RuntimeError: bug (rerun with -v for details)"),
        ],
    )
    def test_unexpected_failures_print_one_line(
        self, in_process: dict[str, Any], capsys: pytest.CaptureFixture[str], exc: BaseException, status: int, text: str
    ) -> None:
        """I/O errors, interrupts and bugs end with one line on stderr and no traceback."""
        assert main(["boom"], extensions=[failing_extension(exc)]) == status
        assert capsys.readouterr().err.strip() == text

    def test_verbose_shows_the_bug(self, in_process: dict[str, Any]) -> None:
        """With ``-v`` an unexpected exception propagates with its traceback."""
        with pytest.raises(RuntimeError, match="bug"):
            main(["-v", "boom"], extensions=[failing_extension(RuntimeError("bug"))])

    def test_resume_skips_children_and_sessions_without_turns(
        self, in_process: dict[str, Any], capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The default resume target is the newest *root*; a root that never ran a turn exits 0."""
        data = in_process["data"]

        async def store_sessions() -> str:
            host = await Host.open(data, None, ScriptedModel.from_mapping({}))
            root = await host.create_session("root")
            root.append("demo/note", {"n": 1})
            child = await host.create_session("child", parent_session="root")
            child.append("demo/note", {"n": 2})
            await host.close()
            return root.id

        root_id = asyncio.run(store_sessions())
        capsys.readouterr()
        assert main(["resume", "--data-dir", str(data)]) == 0
        assert capsys.readouterr().err.strip().endswith(f"dsh: session {root_id}")

    def test_inaccessible_data_dir(
        self, in_process: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A data dir without the needed permissions is rejected before anything runs."""
        in_process["data"].mkdir()
        monkeypatch.setattr(os, "access", lambda path, mode: False)  # root passes every permission check
        assert main(["log", "--data-dir", str(in_process["data"]), "x"]) == 2
        assert capsys.readouterr().err.startswith("dsh: DATA_DIR_UNUSABLE: ")
