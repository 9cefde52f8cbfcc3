"""The ``[mcp.servers.NAME]`` tables: validation, ``${VAR}`` expansion, secrets, names, profile layering."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from host_spec.errors import ConfigError
from host_spec.host.mcp.config import MASK, effective_config, expand, load_config, secrets_of
from host_spec.host.mcp.errors import Scrubber, describe
from host_spec.host.mcp.names import MAX_NAME, tool_name
from host_spec.host.plugins.profiles import load_profile

KNOWN = frozenset({"mcp", "workspace", "subagent", "subagent-fork", "subagent-control", "dsh-team", "dsh-team-tools",
                   "dsh-team-invariant"})


class TestValidation:
    def test_transport_is_implied_by_command_or_url(self) -> None:
        config = load_config({"servers": {"a": {"command": "x"}, "b": {"url": "http://127.0.0.1:1/mcp"}}})
        assert [s.transport for s in config.servers.values()] == ["stdio", "http"]
        assert config.servers["a"].startup_timeout_ms == 30_000

    @pytest.mark.parametrize(("table", "message", "path"), [
        ({"a": {}}, "an http server needs url", "mcp.servers.a.url"),
        ({"a": {"type": "stdio"}}, "a stdio server needs command", "mcp.servers.a.command"),
        ({"a": {"type": "sse"}}, "an sse server needs url", "mcp.servers.a.url"),
        ({"a": {"command": "x", "url": "http://h"}}, "not both", "mcp.servers.a"),
        ({"a": {"command": "x", "headers": {"K": "v"}}}, "headers apply to http and sse", "mcp.servers.a.headers"),
        ({"a": {"url": "http://h", "args": ["-v"]}}, "stdio servers only", "mcp.servers.a"),
        ({"a__b": {"command": "x"}}, 'MCP server name "a__b"', "mcp.servers.a__b"),
        ({"a.b": {"command": "x"}}, 'MCP server name "a.b"', "mcp.servers.a.b"),
    ])
    def test_a_bad_server_fails_naming_its_field(self, table: dict, message: str, path: str) -> None:
        with pytest.raises(ConfigError) as caught:
            load_config({"servers": table})
        assert message in caught.value.message and caught.value.path == path

    def test_unknown_keys_and_wrong_types_name_the_field(self) -> None:
        with pytest.raises(ConfigError, match="commnd"):
            load_config({"servers": {"a": {"commnd": "x"}}})
        with pytest.raises(ConfigError, match="tool_timeout_ms must be at least 1"):
            load_config({"servers": {"a": {"command": "x", "tool_timeout_ms": 0}}})
        with pytest.raises(ConfigError, match="expected a string"):
            load_config({"servers": {"a": {"command": "x", "args": [1]}}})


class TestExpansion:
    def test_variables_and_defaults_are_expanded_everywhere(self) -> None:
        server = load_config({"servers": {"a": {"command": "${BIN}", "args": ["--k=${KEY}", "${MISSING:-dflt}"],
                                                "env": {"TOKEN": "${KEY}"}, "cwd": "${HOME_DIR:-/tmp}"}}}).servers["a"]
        done = expand("a", server, {"BIN": "/bin/srv", "KEY": "k-1234"})
        assert (done.command, done.args, done.env, done.cwd) == ("/bin/srv", ["--k=k-1234", "dflt"],
                                                                 {"TOKEN": "k-1234"}, "/tmp")
        headers = load_config({"servers": {"h": {"url": "http://${HOST}/mcp", "headers": {"A": "Bearer ${T}"}}}})
        done = expand("h", headers.servers["h"], {"HOST": "127.0.0.1:9", "T": "tok-5678"})
        assert (done.url, done.headers) == ("http://127.0.0.1:9/mcp", {"A": "Bearer tok-5678"})

    def test_an_unset_variable_names_the_field_and_the_variable_never_a_value(self) -> None:
        server = load_config({"servers": {"a": {"command": "x", "env": {"TOKEN": "${NOPE}"}}}}).servers["a"]
        with pytest.raises(ConfigError) as caught:
            expand("a", server, {"OTHER": "secret-value"})
        assert caught.value.code == "MCP_ENV_MISSING" and caught.value.path == "mcp.servers.a.env.TOKEN"
        assert "NOPE" in caught.value.message and "secret-value" not in caught.value.message


class TestSecrets:
    def test_env_header_and_url_credentials_are_secrets_scrubbed_longest_first(self) -> None:
        stdio = expand("a", load_config({"servers": {"a": {"command": "x", "env": {"A": "abcd", "B": "abcdef",
                                                                                  "C": "no"}}}}).servers["a"], {})
        assert secrets_of(stdio) == ("abcdef", "abcd")  # too-short values would scrub noise
        assert Scrubber(secrets_of(stdio))("x abcdef y abcd z no") == "x [redacted] y [redacted] z no"
        http = load_config({"servers": {"h": {"url": "https://user:pass@h/mcp", "headers": {"K": "Bearer zz"}}}})
        assert set(secrets_of(http.servers["h"])) == {"user:pass", "pass", "Bearer zz"}
        assert Scrubber(("tok-1",)).deep({"a": ["tok-1", 3, {"b": "x tok-1"}]}) == {
            "a": ["[redacted]", 3, {"b": "x [redacted]"}]}
        assert Scrubber(()).deep({"a": "tok-1"}) == {"a": "tok-1"}

    def test_dsh_plugins_shows_the_config_with_secrets_masked(self) -> None:
        shown = effective_config({"servers": {"a": {"command": "x", "env": {"TOKEN": "literal-secret"}}}})
        assert shown["servers"]["a"]["env"] == {"TOKEN": MASK} and shown["servers"]["a"]["tool_timeout_ms"] == 300_000
        assert "literal-secret" not in repr(shown)

    def test_describe_flattens_exception_groups(self) -> None:
        group = ExceptionGroup("g", [OSError(2, "No such file or directory", "srv"), ValueError("v"), ValueError("v")])
        assert describe(group) == "FileNotFoundError: No such file or directory: srv; ValueError: v"
        assert describe(TimeoutError()) == "TimeoutError: TimeoutError"


class TestNames:
    def test_names_are_prefixed_sanitised_and_bounded(self) -> None:
        assert tool_name("docs", "search") == "mcp__docs__search"
        assert tool_name("docs", "weird.name/tool é") == "mcp__docs__weird_name_tool__"
        assert tool_name("docs", "") == "mcp__docs___"
        long_a, long_b = tool_name("docs", "x" * 80 + "a"), tool_name("docs", "x" * 80 + "b")
        assert len(long_a) == MAX_NAME == len(long_b) and long_a != long_b
        assert long_a == tool_name("docs", "x" * 80 + "a") and long_a.startswith("mcp__docs__xxx")


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


class TestProfiles:
    def test_servers_load_the_mcp_plugin_first_and_later_layers_replace_a_server(self, tmp_path: Path) -> None:
        write(tmp_path / "base.toml", """
            extends = "headless"
            [mcp.servers.a]
            command = "one"
            [mcp.servers.b]
            url = "http://127.0.0.1:1/mcp"
            """)
        top = write(tmp_path / "top.toml", """
            extends = "base.toml"
            [mcp.servers.a]
            command = "two"
            args = ["-v"]
            """)
        profile = load_profile(top, known=KNOWN)
        assert profile.names()[0] == "mcp" and profile.names()[1:] == load_profile("headless", known=KNOWN).names()
        assert dict(profile.config("mcp") or {}) == {"servers": {"a": {"command": "two", "args": ["-v"]},
                                                                  "b": {"url": "http://127.0.0.1:1/mcp"}}}

    def test_a_profile_without_servers_is_unchanged_and_disable_switches_them_off(self, tmp_path: Path) -> None:
        assert "mcp" not in load_profile("agent-teams", known=KNOWN).names()
        off = write(tmp_path / "off.toml", """
            extends = "headless"
            disable = ["mcp"]
            [mcp.servers.a]
            command = "one"
            """)
        assert "mcp" not in load_profile(off, known=KNOWN).names()

    def test_a_bad_server_table_fails_the_profile_naming_file_and_field(self, tmp_path: Path) -> None:
        bad = write(tmp_path / "bad.toml", """
            [mcp.servers.a]
            commnd = "x"
            """)
        with pytest.raises(ConfigError) as caught:
            load_profile(bad, known=KNOWN)
        assert str(bad) in caught.value.message and "commnd" in caught.value.message


class TestLightCore:
    def test_a_profile_without_servers_never_imports_the_sdk(self, tmp_path: Path) -> None:
        (tmp_path / "script.json").write_text("{}")
        code = ("import asyncio, sys\n"
                "from host_spec.host.app import Host\n"
                "async def main():\n"
                f"    host = await Host.open({str(tmp_path / 'data')!r}, 'agent-teams', "
                f"'scripted:{tmp_path / 'script.json'}')\n"
                "    await host.close()\n"
                "asyncio.run(main())\n"
                "print('mcp' in sys.modules, 'mcp_types' in sys.modules)\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert out.stdout.strip().splitlines()[-1] == "False False", out.stderr

    async def test_servers_without_the_sdk_fail_naming_the_extra(self, tmp_path: Path, monkeypatch) -> None:
        from host_spec.host.app import Host
        from host_spec.host.models.scripted import ScriptedModel

        monkeypatch.setitem(sys.modules, "mcp", None)  # what an environment without the extra looks like
        prof = write(tmp_path / "p.toml", """
            [mcp.servers.a]
            command = "x"
            """)
        with pytest.raises(Exception) as caught:
            await Host.open(None, prof, ScriptedModel.from_mapping({}))
        error = caught.value
        assert getattr(error, "code", None) == "EXTRA_NOT_INSTALLED", error
        assert "pip install 'dsh-team[mcp]'" in str(error)


class TestMcpJson:
    def test_a_profile_reads_mcp_json_files_and_its_own_tables_win(self, tmp_path: Path) -> None:
        (tmp_path / "proj").mkdir()
        (tmp_path / "proj" / ".mcp.json").write_text(
            '{"mcpServers": {"a": {"type": "stdio", "command": "from-file", "env": {"K": "${K:-v}"}},'
            ' "b": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"X": "y"}}}}')
        prof = write(tmp_path / "proj" / "p.toml", """
            [mcp]
            files = [".mcp.json"]
            [mcp.servers.a]
            command = "from-profile"
            """)
        config = dict(load_profile(prof, known=KNOWN).config("mcp") or {})
        assert config == {"servers": {"a": {"command": "from-profile"},
                                      "b": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"X": "y"}}}}

    @pytest.mark.parametrize(("content", "message"), [
        (None, "cannot read"),
        ("{not json", "is not valid JSON"),
        ('{"servers": {}}', 'has no "mcpServers" object'),
        ('{"mcpServers": {"a": {"commnd": "x"}}}', "commnd"),
    ])
    def test_a_bad_file_fails_the_profile_naming_it(self, tmp_path: Path, content: str | None, message: str) -> None:
        if content is not None:
            (tmp_path / "servers.json").write_text(content)
        prof = write(tmp_path / "p.toml", """
            [mcp]
            files = ["servers.json"]
            """)
        with pytest.raises(ConfigError) as caught:
            load_profile(prof, known=KNOWN)
        assert message in caught.value.message and caught.value.path.startswith("mcp.files[0]")
