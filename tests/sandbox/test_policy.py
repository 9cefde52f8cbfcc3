"""The ``[sandbox]`` table, per-member policies, the file tools' refusals and ``SANDBOX_UNAVAILABLE`` at start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_kit import call, lead_in, open_host

from host_spec.errors import ConfigError
from host_spec.host.plugins.profiles import load_profile
from host_spec.host.sandbox.policy import load_settings
from host_spec.host.sandbox.service import Sandbox


class TestSettings:
    def test_defaults_are_workspace_write_without_network_for_everyone(self) -> None:
        settings = load_settings(None)
        policy = settings.policy_for("lead")
        assert (policy.name, policy.network, policy.protected) == ("workspace-write", False, (".git", ".dsh"))
        assert settings.needs_sandbox() and settings.unsandboxed() == ()

    @pytest.mark.parametrize(("raw", "message"), [
        ({"policy": "open"}, "expected one of 'read-only', 'workspace-write', 'full' @ sandbox.policy"),
        ({"network": "yes"}, "expected a boolean, got str @ sandbox.network"),
        ({"protected": ["/etc"]}, "protected: '/etc' must be a relative path without '..' @ sandbox.protected"),
        ({"home_paths": ["../x"]}, "home_paths: '../x' must be a relative path"),
        ({"env": ["OPENAI_API_KEY"]}, "env: OPENAI_API_KEY looks like a credential; the sandbox never passes one"),
        ({"memory_mb": -1}, "memory_mb must be 0 (no limit) or more @ sandbox.memory_mb"),
        ({"members": {"rev*": {"policy": "all"}}}, "@ sandbox.members.rev*.policy"),
        ({"roles": {"reviewer": {"network": "on"}}}, "expected a boolean, got str @ sandbox.roles.reviewer.network"),
        ({"roles": {"Rev*": {"policy": "full"}}}, "roles: 'Rev*' is not a role name"),
        ({"polcy": "full"}, "extra fields found (polcy) @ sandbox"),
    ])
    def test_bad_tables_fail_naming_the_field(self, raw: dict, message: str) -> None:
        with pytest.raises(ConfigError) as caught:
            load_settings(raw)
        assert message in caught.value.message

    def test_member_patterns_override_in_file_order(self) -> None:
        settings = load_settings({"network": True, "members": {
            "review*": {"policy": "read-only"}, "*": {"network": False}, "ops": {"policy": "full"}}})
        assert (settings.policy_for("reviewer").name, settings.policy_for("reviewer").network) == ("read-only", True)
        assert (settings.policy_for("builder").name, settings.policy_for("builder").network) == (
            "workspace-write", False)
        assert settings.policy_for("ops").name == "workspace-write"  # "*" matched first
        assert settings.policy_for(None).network is True  # the profile's own (an MCP server)

    def test_a_member_pattern_wins_over_a_role_and_a_role_over_the_profile_key_by_key(self) -> None:
        settings = load_settings({"network": True, "roles": {"reviewer": {"policy": "read-only"}, "ops": {
            "policy": "full", "network": False}}, "members": {"rev-2": {"policy": "workspace-write"}}})

        def of(member: str | None, role: str | None) -> tuple[str, bool]:
            policy = settings.policy_for(member, role)
            return policy.name, policy.network

        assert of("rev-1", "reviewer") == ("read-only", True)  # the role's policy, the profile's network
        assert of("rev-2", "reviewer") == ("workspace-write", True)  # the member's pattern is more specific
        assert of("ann", "ops") == ("full", False)
        assert of("ann", "writer") == ("workspace-write", True)  # a role the table does not name: the profile's
        assert of("ann", None) == of(None, None) == ("workspace-write", True)
        assert settings.needs_sandbox() and settings.unsandboxed() == ("role ops",)

    def test_the_header_names_who_runs_unsandboxed(self) -> None:
        mixed = Sandbox(load_settings({"members": {"ops": {"policy": "full"}}}))
        assert mixed.header() == ("sandbox: workspace-write (bubblewrap, network off); members: ops=full; "
                                  "UNSANDBOXED: ops")
        everyone = Sandbox(load_settings({"policy": "full", "members": {"rev*": {"policy": "read-only"}}}))
        assert everyone.header() == "sandbox: full; members: rev*=read-only; UNSANDBOXED: every member except rev*"
        assert not load_settings({"policy": "full"}).needs_sandbox()
        roles = Sandbox(load_settings({"policy": "full", "roles": {"reviewer": {"policy": "read-only"}},
                                       "members": {"ops": {"network": True}}}))
        assert roles.header() == ("sandbox: full; members: role reviewer=read-only; "
                                  "UNSANDBOXED: every member except role reviewer")
        assert roles.settings.needs_sandbox()

    def test_profile_layers_merge_key_by_key(self, tmp_path: Path) -> None:
        (tmp_path / "base.toml").write_text('extends = "headless"\n[sandbox]\nnetwork = true\nmemory_mb = 100\n'
                                            '[sandbox.members.a]\npolicy = "read-only"\n'
                                            '[sandbox.roles.r1]\npolicy = "read-only"\n')
        (tmp_path / "top.toml").write_text('extends = "base.toml"\n[sandbox]\nmemory_mb = 200\n'
                                           '[sandbox.members.b]\npolicy = "full"\n[sandbox.roles.r2]\nnetwork = true\n')
        settings = load_profile(tmp_path / "top.toml").sandbox
        assert (settings.network, settings.memory_mb) == (True, 200)
        assert {k: v.policy for k, v in settings.members.items()} == {"a": "read-only", "b": "full"}
        assert {k: (v.policy, v.network) for k, v in settings.roles.items()} == {
            "r1": ("read-only", None), "r2": (None, True)}
        (tmp_path / "bad.toml").write_text('extends = "headless"\n[sandbox]\npolicy = "none"\n')
        with pytest.raises(ConfigError, match=r"bad.toml: expected one of .* @ sandbox.policy"):
            load_profile(tmp_path / "bad.toml")

    def test_the_store_paths_hidden(self, tmp_path: Path) -> None:
        def hidden(location: object) -> tuple[Path, ...]:
            return Sandbox.for_run(load_settings(None), location).hidden  # type: ignore[arg-type]

        assert hidden(tmp_path / "data") == ((tmp_path / "data").resolve(),)
        assert hidden("postgresql://u:pw@db.example/x") == ()  # TCP: the network namespace keeps it out
        assert hidden(f"postgresql:///x?host={tmp_path}") == (tmp_path.resolve(),)
        assert hidden(None) == ()


class TestFileTools:
    async def test_protected_paths_and_read_only_refuse_writes(self, tmp_path: Path) -> None:
        ws = tmp_path / "ws"
        (ws / ".git").mkdir(parents=True)
        (ws / "keys").mkdir()
        (ws / "a.txt").write_text("a\n")
        host = await open_host(ws, {"protected": ["keys"], "members": {"reader": {"policy": "read-only"},
                                                                        "root": {"policy": "full"}}})
        try:
            lead = await lead_in(host, ws)
            reader = await lead_in(host, ws, "reader")
            root = await lead_in(host, ws, "root")
            hook = await call(host, lead, "write_file", path=".git/hooks/post-merge", content="x")
            key = await call(host, lead, "write_file", path="keys/k", content="x")
            dsh = await call(host, lead, "write_file", path=".dsh/roles/evil.toml", content="x")
            fine = await call(host, lead, "write_file", path="src/ok.py", content="x")
            seen = await call(host, reader, "read_file", path="a.txt")
            refused = await call(host, reader, "edit_file", path="a.txt", old_string="a", new_string="b")
            unsandboxed = await call(host, root, "write_file", path="keys/k", content="x")
        finally:
            await host.close()
        assert hook.code == key.code == dsh.code == refused.code == "PATH_PROTECTED"
        assert "read-only sandbox policy" in refused.message
        assert fine.code is None and seen.code is None and (ws / "a.txt").read_text() == "a\n"
        assert unsandboxed.code is None and (ws / "keys" / "k").read_text() == "x"
        assert not (ws / ".git" / "hooks").exists() and not (ws / ".dsh").exists()


def test_no_bubblewrap_fails_the_run_at_start_with_the_fix(tmp_path: Path) -> None:
    """``PATH`` without ``bwrap``: the run never starts, nothing is written, the message says what to install."""
    (tmp_path / "script.json").write_text('{"lead": [{"text": "hi"}]}')
    env = {k: v for k, v in os.environ.items() if k != "DSH_DATA_DIR"} | {"PATH": str(tmp_path / "empty-bin")}
    command = [sys.executable, "-m", "host_spec.host.cli.main", "run", "--model",
               f"scripted:{tmp_path / 'script.json'}", "--data-dir", str(tmp_path / "data"), "--workspace",
               str(tmp_path), "hi"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "SANDBOX_UNAVAILABLE" in done.stderr and "apt-get install bubblewrap" in done.stderr
    assert 'policy = "full"' in done.stderr
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").rglob("*.jsonl"))
    profile = tmp_path / "full.toml"
    profile.write_text('extends = "headless"\n[sandbox]\npolicy = "full"\n')
    unsandboxed = subprocess.run([*command[:4], "--profile", str(profile), *command[4:]], env=env,
                                 capture_output=True, text=True, timeout=120)
    assert unsandboxed.returncode == 0, unsandboxed.stderr  # the explicit choice runs, and says so
    assert "sandbox: full; UNSANDBOXED: every member" in unsandboxed.stderr


def test_limits_never_ask_above_the_hosts_own_hard_limits() -> None:
    """An ordinary user cannot raise a hard limit: asking for more would fail every command (exit 125)."""
    code = ("import resource; resource.setrlimit(resource.RLIMIT_NPROC, (100, 100)); "
            "from host_spec.host.sandbox.limits import ulimit_prefix; print(ulimit_prefix(1, 512))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "ulimit -S -H -u 100 -d 1024 || exit 125;"


def test_toolchains_in_the_home_are_shown_but_never_a_credentials_directory(tmp_path: Path) -> None:
    from host_spec.host.sandbox.service import toolchains

    home = tmp_path.resolve()
    path = os.pathsep.join([f"{home}/.pyenv/shims", f"{home}/.local/bin", "/usr/bin", f"{home}/bin",
                            f"{home}/.config/tool/bin", "relative/bin"])
    assert toolchains((home,), path) == (home / ".pyenv", home / ".local" / "bin", home / "bin",
                                         home / ".config" / "tool" / "bin")


async def test_a_python_under_home_still_runs_sandboxed(tmp_path: Path, monkeypatch) -> None:
    """The host's interpreter (often ``~/.pyenv``) is shown read-only; the rest of that home stays empty."""
    ws = tmp_path / "ws"
    ws.mkdir()
    host = await open_host(ws)
    try:
        agent = await lead_in(host, ws)
        ran = await call(host, agent, "bash", command=f"{sys.executable} -c 'print(40 + 2)'")
    finally:
        await host.close()
    assert ran.value["output"] == "42\n", ran


def test_the_hosts_interpreter_under_tmp_is_shown_in_the_private_tmp(tmp_path: Path) -> None:
    # A venv made under /tmp (CI's, a packaging test's) holds the interpreter a member's `python`
    # and a stdio MCP server need; the sandbox's private /tmp must not hide it.
    from host_spec.host.sandbox.bwrap import Layout, bwrap_argv
    from host_spec.host.sandbox.policy import load_settings

    venv = Path("/tmp/some-venv")
    policy = load_settings({}).policy_for("lead")
    argv = bwrap_argv("bwrap", policy, Layout(root=tmp_path, temp_tools=(venv,)), ["true"])
    private = argv.index("/tmp", argv.index("--tmpfs"))
    shown = argv.index(str(venv))
    assert argv[shown - 1] == "--ro-bind-try" and argv[shown + 1] == str(venv) and shown > private
    assert str(venv) not in bwrap_argv("bwrap", policy, Layout(root=tmp_path), ["true"])


def test_a_file_the_configuration_names_is_shown_read_only_wherever_it_is(tmp_path: Path) -> None:
    """An MCP server's script in a checkout under /tmp (emptied for the command) is shown, and only it."""
    root, data = tmp_path / "ws", tmp_path / "data"
    root.mkdir()
    data.mkdir()
    script, sibling, secret = tmp_path / "server.py", tmp_path / "other.txt", data / "log.jsonl"
    script.write_text("print('served')\n")
    sibling.write_text("not named\n")
    secret.write_text("the run's own data\n")
    sandbox = Sandbox.for_run(load_settings({}), data)
    policy = sandbox.policy_for(None)
    command = f"cat {script}; cat {sibling} || echo hidden; cat {secret} || echo kept; echo x >> {script} || echo ro"
    shown = [str(script), str(sibling.parent), str(secret), str(tmp_path / "missing.py")]  # a dir and a missing file: no
    prepared = sandbox.prepare(policy, str(root), ["/bin/bash", "-c", command], shown=shown)
    done = subprocess.run(prepared.argv, cwd=root, env=prepared.env, capture_output=True, text=True, timeout=60)
    lines = done.stdout.splitlines()
    assert lines[0] == "print('served')" and "hidden" in lines and "kept" in lines and "ro" in lines, done.stdout + done.stderr
    assert "not named" not in done.stdout and "the run's own data" not in done.stdout
    assert script.read_text() == "print('served')\n"
    unshown = sandbox.prepare(policy, str(root), ["/bin/bash", "-c", f"cat {script} || echo gone"])
    assert subprocess.run(unshown.argv, cwd=root, env=unshown.env, capture_output=True, text=True,
                          timeout=60).stdout.strip() == "gone"
