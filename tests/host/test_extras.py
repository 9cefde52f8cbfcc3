"""A missing extra is one typed error naming the command to install it; the CLI starts without any extra.

The commands run in a child interpreter whose ``sys.modules`` marks the extra's
modules as absent (``None``: what an environment without the extra looks like to
``import``). ``tests/packaging`` runs the same commands from a wheel installed with
no extras at all.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from host_spec.extras import ExtraNotInstalledError, install_command, require
from host_spec.host.demo import SCRIPT

pytestmark = pytest.mark.slow

#: Import names of every optional part, by extra (what the CLI must not import when it starts).
MODULES = {
    "postgres": ["psycopg"],
    "web": ["starlette", "sse_starlette", "uvicorn"],
    "mcp": ["mcp"],
    "dev": ["watchfiles"],
    "openai": ["openai"],
    "llm": ["llm"],
}

#: ``sys.modules`` blocked as given, then ``dsh`` with the given arguments.
RUNNER = """
import json, sys
for name in json.loads(sys.argv[1]):
    sys.modules[name] = None
from host_spec.host.cli.main import main
sys.exit(main(json.loads(sys.argv[2])))
"""


def dsh_without(extra: str, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    blocked = MODULES[extra] + (["psycopg"] if extra != "postgres" else [])
    return subprocess.run([sys.executable, "-c", RUNNER, json.dumps(blocked), json.dumps(argv)], cwd=cwd,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


class TestRequire:
    def test_an_installed_module_is_returned(self) -> None:
        assert require("json", extra="web", feature="x") is json

    def test_a_missing_module_names_the_feature_the_extra_and_the_command(self) -> None:
        with pytest.raises(ExtraNotInstalledError) as info:
            require("dsh_no_such_module", extra="postgres", feature="dsh worker")
        error = info.value
        assert error.code == "EXTRA_NOT_INSTALLED"
        assert error.message == ("dsh worker needs the postgres extra (ModuleNotFoundError: No module named "
                                 "'dsh_no_such_module'): pip install 'dsh-team[postgres]'")
        assert (error.extra, error.feature, error.module) == ("postgres", "dsh worker", "dsh_no_such_module")

    def test_an_unknown_extra_is_a_caller_bug_even_when_the_module_imports(self) -> None:
        with pytest.raises(ValueError, match="unknown extra 'webb'"):
            require("json", extra="webb", feature="x")


def test_the_cli_starts_without_importing_any_extra() -> None:
    probe = ("import sys\nfrom host_spec.host.cli.main import build_parser\nbuild_parser()\n"
             f"print(sorted(m for m in {sorted(m for ms in MODULES.values() for m in ms)!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


CASES = [
    ("postgres", ["worker"], "dsh worker"),
    ("postgres", ["team", "show", "--store", "postgresql://u@127.0.0.1:1/db"], "--store postgresql://"),
    ("postgres", ["run", "--store", "postgresql://u@127.0.0.1:1/db", "--model", f"scripted:{SCRIPT}", "hi"],
     "--store postgresql://"),
    ("web", ["team", "serve", "--data-dir", "data"], "dsh team serve"),
    ("web", ["run", "--web", "--model", f"scripted:{SCRIPT}", "--data-dir", "data", "hi"], "dsh run --web"),
    ("dev", ["run", "--watch", "--model", f"scripted:{SCRIPT}", "--data-dir", "data", "hi"], "--watch"),
    ("openai", ["run", "--model", "openai:gpt-4o-mini", "--data-dir", "data", "hi"], "--model openai:"),
    ("llm", ["run", "--model", "llm:gpt-4o-mini", "--data-dir", "data", "hi"], "--model llm:"),
    ("mcp", ["run", "--profile", "mcp.toml", "--model", f"scripted:{SCRIPT}", "--data-dir", "data", "hi"],
     "[mcp.servers]"),
]


@pytest.mark.parametrize(("extra", "argv", "feature"), CASES, ids=[" ".join(c[1][:2]) + f" [{c[0]}]" for c in CASES])
def test_each_feature_without_its_extra_names_it(tmp_path: Path, extra: str, argv: list[str], feature: str) -> None:
    (tmp_path / "mcp.toml").write_text('extends = "agent-teams"\n\n[mcp.servers.a]\ncommand = "true"\n')
    if argv[:2] == ["team", "serve"]:  # a stored Team to serve
        done = subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", "run", "--model", f"scripted:{SCRIPT}",
                               "--data-dir", "data", "hi"], cwd=tmp_path, capture_output=True, timeout=60)
        assert done.returncode in (0, 1), done.stderr
    result = dsh_without(extra, argv, tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("dsh: EXTRA_NOT_INSTALLED: "), result.stderr
    assert f"needs the {extra} extra" in result.stderr and feature in result.stderr
    assert result.stderr.rstrip().endswith(install_command(extra)), result.stderr
    assert "Traceback" not in result.stderr
