"""The package as its users get it: built with ``build``, checked with ``twine``, installed without extras.

A user runs ``pip install dsh-team`` and then ``dsh demo``; nothing of this
checkout is on their path. So the sdist and the wheel are built here exactly as a
release builds them (``python -m build``: the wheel from the sdist), their metadata
is checked with ``twine check --strict``, and the wheel is installed into a fresh
virtual environment with only the required dependencies. There every command that
needs no extra must run, and every one that needs an extra must fail with
``EXTRA_NOT_INSTALLED`` (exit 2, the ``pip install`` line to run, no traceback).
Then the extras are installed one at a time, each checked missing before and
working after, by the command it enables.

The virtual environments get their packages through this interpreter's ``pip``
(``pip --python``), from the index it is set up with (its cache makes a second run
quick); the wheel under test is a local file.
"""

from __future__ import annotations

import email
import email.message
import json
import os
import signal
import subprocess
import sys
import tarfile
import tomllib
import urllib.request
import zipfile
from pathlib import Path

import attrs
import pytest
from kit_model_server import ModelServer, text
from kit_postgres import running_database, shared_server

from host_spec.extras import EXTRAS, install_command

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]
PACKAGES = PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
#: A whole install (resolving, downloading or reusing cached wheels) or build.
INSTALL_TIMEOUT_S = 300
#: One command of the installed ``dsh``.
COMMAND_TIMEOUT_S = 120
#: A one-step Lead: a model script with no tool calls.
HELLO = {"lead": [{"text": "hello from the scripted lead"}]}


@attrs.frozen
class Dist:
    sdist: Path
    wheel: Path


@attrs.frozen
class Venv:
    """A fresh virtual environment (no pip of its own: this interpreter's pip installs into it)."""

    root: Path
    work: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    def env(self) -> dict[str, str]:
        """The caller's environment without anything that points at this checkout or its settings."""
        drop = ("DSH_", "PYTHON", "VIRTUAL_ENV", "LLM_", "OPENAI_", "COV_", "COVERAGE_")
        env = {key: value for key, value in os.environ.items() if not key.startswith(drop)}
        env["PATH"] = os.pathsep.join([str(self.bin), env.get("PATH", "")])
        env["LLM_USER_PATH"] = str(self.work / "llm-user")
        return env

    def install(self, *specs: str) -> None:
        # --no-compile: byte-compiling every file of openai and llm costs more than the install itself
        done = subprocess.run([sys.executable, "-m", "pip", "--python", str(self.bin / "python"), "install", "-q",
                               "--no-compile", *specs], capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
        assert done.returncode == 0, done.stderr[-3000:]

    def dsh(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.bin / "dsh"), *args], cwd=self.work, env=env or self.env(),
                              capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL)

    def popen(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen([str(self.bin / "dsh"), *args], cwd=self.work, env=env or self.env(), text=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def python(self, code: str) -> str:
        done = subprocess.run([str(self.bin / "python"), "-c", code], cwd=self.work, env=self.env(),
                              capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
        assert done.returncode == 0, done.stderr
        return done.stdout


def new_venv(where: Path, dist: Dist) -> Venv:
    where.mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where / "venv")], check=True, timeout=120)
    (where / "work").mkdir()
    venv = Venv(where / "venv", where / "work")
    venv.install(str(dist.wheel))
    return venv


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO)], capture_output=True,
                          text=True, timeout=INSTALL_TIMEOUT_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [sdist] = out.glob("*.tar.gz")
    [wheel] = out.glob("*.whl")
    return Dist(sdist, wheel)


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory, dist: Dist) -> Venv:
    return new_venv(tmp_path_factory.mktemp("core") / "env", dist)


def metadata_of(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        return email.message_from_bytes(archive.read(f"dsh_team-{VERSION}.dist-info/METADATA"))


def assert_extra_missing(result: subprocess.CompletedProcess[str], extra: str) -> None:
    """``EXTRA_NOT_INSTALLED`` naming ``extra`` and its install command: exit 2, the last line, no traceback.

    A run may announce its sandbox policy on stderr before it stops; nothing else comes.
    """
    assert result.returncode == 2, (result.returncode, result.stderr)
    *before, last = result.stderr.splitlines()
    assert last.startswith("dsh: EXTRA_NOT_INSTALLED: "), result.stderr
    assert f"needs the {extra} extra" in last and last.endswith(install_command(extra)), result.stderr
    assert all(line.startswith("dsh: sandbox: ") for line in before), result.stderr


class TestBuilt:
    def test_twine_accepts_both(self, dist: Dist) -> None:
        done = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(dist.sdist), str(dist.wheel)],
                              capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.count("PASSED") == 2, done.stdout

    def test_the_wheel_holds_every_file_of_the_packages_and_nothing_else(self, dist: Dist) -> None:
        tracked = subprocess.run(["git", "ls-files", "-z", "--", *PACKAGES], cwd=REPO, capture_output=True,
                                 timeout=60, check=True).stdout.decode().split("\0")
        expected = {name for name in tracked if name and (REPO / name).is_file()}
        with zipfile.ZipFile(dist.wheel) as archive:
            names = set(archive.namelist())
        info = f"dsh_team-{VERSION}.dist-info/"
        assert {n for n in names if not n.startswith(info)} == expected
        # what users need at run time that is not Python: the panel, the profiles, the demo, the type markers
        for needed in ("dsh_team/web/static/index.html", "dsh_team/web/static/panel.js",
                       "dsh_team/web/static/panel.css", "host_spec/host/plugins/profiles/agent-teams.toml",
                       "host_spec/host/plugins/profiles/headless.toml", "host_spec/host/demo/team_demo.json",
                       "host_spec/py.typed", "dsh_team/py.typed"):
            assert needed in names, needed
        assert {n.removeprefix(info) for n in names if n.startswith(info)} == {
            "METADATA", "WHEEL", "RECORD", "entry_points.txt", "licenses/LICENSE"}

    def test_the_metadata_says_what_a_user_needs(self, dist: Dist) -> None:
        meta = metadata_of(dist.wheel)
        assert (meta["Name"], meta["Version"], meta["Requires-Python"]) == ("dsh-team", VERSION, ">=3.11")
        assert (meta["License-Expression"], meta.get_all("License-File")) == ("MIT", ["LICENSE"])
        assert meta["Description-Content-Type"] == "text/markdown"
        assert meta.get_payload().startswith("# dsh-team\n")  # the README is the long description
        assert meta["Summary"] and len(meta["Keywords"].split(",")) >= 5
        classifiers = meta.get_all("Classifier") or []
        assert "Programming Language :: Python :: 3.11" in classifiers and "Typing :: Typed" in classifiers
        assert set(meta.get_all("Provides-Extra") or []) == {*EXTRAS, "all", "test", "bench"}  # bench: make bench's peers
        requires = meta.get_all("Requires-Dist") or []
        core = sorted(r for r in requires if "extra ==" not in r)
        assert core == sorted(PYPROJECT["project"]["dependencies"])
        by_extra: dict[str, set[str]] = {}
        for requirement in requires:
            if "; extra == " in requirement:
                needed, extra = requirement.split("; extra == ")
                by_extra.setdefault(extra.strip("'\""), set()).add(needed)
        assert by_extra["all"] == set().union(*(by_extra[extra] for extra in EXTRAS))  # every user-facing extra
        assert not by_extra["all"] & {"pytest>=8", "mypy>=1.10", "build>=1.2", "twine>=6.1"}  # no test tool

    def test_the_sdist_is_the_project_without_local_state(self, dist: Dist) -> None:
        with tarfile.open(dist.sdist) as archive:
            names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
        for needed in ("LICENSE", "README.md", "CHANGELOG.md", "pyproject.toml", "host_spec/host/demo/team_demo.json",
                       "tests/packaging/test_wheel.py", "docs/error-codes.md"):
            assert needed in names, needed
        assert not any(name.startswith((".venv/", ".dsh-", "build/", "dist/")) or "__pycache__" in name
                       for name in names)


class TestCoreInstall:
    """Only the required dependencies: everything but the extras' features works."""

    def test_it_is_the_wheel_alone(self, core: Venv) -> None:
        where = core.python("import host_spec, dsh_team; print(host_spec.__file__); print(dsh_team.__file__)")
        assert all(line.startswith(str(core.root)) for line in where.splitlines()), where
        probe = "import importlib.util as u; print([m for m in %r if u.find_spec(m)])" % (
            ["psycopg", "starlette", "sse_starlette", "uvicorn", "mcp", "watchfiles", "openai", "llm", "acp"],)
        assert core.python(probe).strip() == "[]"

    def test_version_demo_and_the_commands_that_need_no_extra(self, core: Venv) -> None:
        version = core.dsh("--version")
        assert (version.returncode, version.stdout) == (0, f"dsh {VERSION}\n"), version.stderr
        demo = core.dsh("demo", "demo")
        assert demo.returncode == 0, demo.stderr
        data = core.work / "demo"
        assert (data / "workspace" / "src" / "greet.py").read_text().startswith("def greet(name: str) -> str:")
        assert "--- docs/review.md" in demo.stdout and "Team session-1  (Lead log: all " in demo.stdout
        assert demo.stdout.rstrip().endswith(f"the panel needs the web extra: {install_command('web')}")
        show = core.dsh("team", "show", "--data-dir", "demo")
        assert show.returncode == 0 and show.stdout.startswith("Team session-1"), show.stderr
        (core.work / "hello.json").write_text(json.dumps(HELLO))
        hello = core.dsh("run", "--model", "scripted:hello.json", "--data-dir", "data", "hi")
        assert hello.returncode == 0 and "hello from the scripted lead" in hello.stdout, hello.stderr
        for args in (["resume", "--model", "scripted:hello.json", "--data-dir", "data"],
                     ["log", "--data-dir", "demo", "session-1"],
                     ["team", "transcript", "--data-dir", "demo", "builder"],
                     ["team", "send", "--data-dir", "demo", "builder", "one more thing"],
                     ["trace", "export", "--data-dir", "demo", "--out", "trace.json"],
                     ["plugins", "--profile", "agent-teams"]):
            done = core.dsh(*args)
            assert done.returncode == 0, (args, done.stderr)
            assert "Traceback" not in done.stderr
        assert json.loads((core.work / "trace.json").read_text())["resourceSpans"]
        chat = subprocess.Popen([str(core.bin / "dsh"), "chat", "--model", "scripted:hello.json", "--data-dir", "chat"],
                                cwd=core.work, env=core.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        assert chat.stdin is not None
        chat.stdin.write("hi\n")
        chat.stdin.flush()
        assert "[lead] assistant: hello from the scripted lead" in _first_line_with(chat.stdout, "hello from")
        chat.stdin.close()  # Ctrl-D
        assert chat.wait(timeout=COMMAND_TIMEOUT_S) == 0

    def test_every_feature_of_an_extra_names_it(self, core: Venv) -> None:
        (core.work / "hello.json").write_text(json.dumps(HELLO))
        (core.work / "mcp.toml").write_text('extends = "agent-teams"\n\n[mcp.servers.a]\ncommand = "true"\n')
        url = "postgresql://nobody@127.0.0.1:1/none"
        run = ["run", "--model", "scripted:hello.json", "--data-dir", "missing"]
        for extra, args in (("postgres", ["worker"]), ("postgres", ["worker", "--store", url]),
                            ("postgres", [*run, "--store", url, "hi"]), ("postgres", ["team", "show", "--store", url]),
                            ("web", ["team", "serve", "--data-dir", "demo"]), ("web", ["run", "--web", *run[1:], "hi"]),
                            ("dev", [*run, "--watch", "hi"]), ("mcp", [*run, "--profile", "mcp.toml", "hi"]),
                            ("openai", ["run", "--model", "openai:gpt-4o-mini", "--data-dir", "missing", "hi"]),
                            ("llm", ["run", "--model", "llm:gpt-4o-mini", "--data-dir", "missing", "hi"]),
                            ("acp", ["acp", "--model", "scripted:hello.json", "--data-dir", "missing"])):
            assert_extra_missing(core.dsh(*args), extra)
        assert not any((core.work / "missing").glob("sessions/*")), "a refused command wrote a session"


def _first_line_with(stream: object, needle: str) -> str:
    for line in stream:  # type: ignore[attr-defined]
        if needle in line:
            return str(line)
    raise AssertionError(f"no line with {needle!r}")


def test_each_extra_alone_enables_its_command(tmp_path: Path, dist: Dist) -> None:
    """One environment, the extras added one at a time: before, the command names its extra; after, it works.

    The order keeps each extra's modules out of the ones installed before it
    (``mcp`` brings Starlette and uvicorn, so ``web`` goes first).
    """
    venv = new_venv(tmp_path / "env", dist)
    work = venv.work
    (work / "hello.json").write_text(json.dumps(HELLO))
    assert venv.dsh("demo", "demo").returncode == 0

    # postgres: a shared store, and a worker watching it
    url = running_database(shared_server())
    assert_extra_missing(venv.dsh("team", "show", "--store", url), "postgres")
    venv.install(f"{dist.wheel}[postgres]")
    stored = venv.dsh("run", "--store", url, "--model", "scripted:hello.json", "hi")
    assert stored.returncode == 0 and "hello from the scripted lead" in stored.stdout, stored.stderr
    show = venv.dsh("team", "show", "--store", url)
    assert show.returncode == 0 and show.stdout.startswith("Team session-1"), show.stderr
    worker = venv.popen("worker", "--store", url)
    assert "is watching the store" in _first_line_with(worker.stderr, "dsh worker:")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=COMMAND_TIMEOUT_S) == 0

    # dev: --watch keeps the quiescent run up until Ctrl-C
    watch = ["run", "--watch", "--model", "scripted:hello.json", "--data-dir", "watched", "hi"]
    assert_extra_missing(venv.dsh(*watch), "dev")
    venv.install(f"{dist.wheel}[dev]")
    watched = venv.popen(*watch)
    assert "still watching" in _first_line_with(watched.stdout, "[dsh] the team is quiescent")
    watched.send_signal(signal.SIGINT)
    assert watched.wait(timeout=COMMAND_TIMEOUT_S) == 0

    # openai: a chat-completions server on this machine
    with ModelServer(lambda body: text("hello from the model server")) as server:
        env = {**venv.env(), "OPENAI_API_KEY": "sk-test-not-a-key"}
        spec = f"openai:m?base_url={server.base_url}"
        assert_extra_missing(venv.dsh("run", "--model", spec, "--data-dir", "openai", "hi", env=env), "openai")
        venv.install(f"{dist.wheel}[openai]")
        answered = venv.dsh("run", "--model", spec, "--data-dir", "openai", "hi", env=env)
        assert answered.returncode == 0 and "hello from the model server" in answered.stdout, answered.stderr

        # llm: the same server as an llm model (llm's own OpenAI-compatible model configuration)
        user = Path(env["LLM_USER_PATH"])
        user.mkdir()
        (user / "extra-openai-models.yaml").write_text(
            f'- model_id: dsh-local\n  model_name: m\n  api_base: "{server.base_url}"\n  supports_tools: true\n')
        env["LLM_LOAD_PLUGINS"] = ""
        assert_extra_missing(venv.dsh("run", "--model", "llm:dsh-local", "--data-dir", "llm", "hi", env=env), "llm")
        venv.install(f"{dist.wheel}[llm]")
        answered = venv.dsh("run", "--model", "llm:dsh-local", "--data-dir", "llm", "hi", env=env)
        assert answered.returncode == 0 and "hello from the model server" in answered.stdout, answered.stderr

    # web: the panel of the stored demo, over real HTTP
    assert_extra_missing(venv.dsh("team", "serve", "--data-dir", "demo"), "web")
    venv.install(f"{dist.wheel}[web]")
    serve = venv.popen("team", "serve", "--data-dir", "demo")
    try:
        address = _first_line_with(serve.stderr, "(read-only): http://127.0.0.1:").split(": ", 2)[-1].split()[-1]
        with urllib.request.urlopen(address, timeout=COMMAND_TIMEOUT_S) as page:
            assert page.status == 200 and b"panel.js" in page.read()
    finally:
        serve.send_signal(signal.SIGINT)
        serve.wait(timeout=COMMAND_TIMEOUT_S)

    # mcp: the example glossary server, started over stdio by the profile
    profile = work / "glossary.toml"
    profile.write_text('extends = "agent-teams"\n\n[mcp.servers.glossary]\n'
                       f'command = {json.dumps(str(venv.bin / "python"))}\n'
                       f'args = [{json.dumps(str(REPO / "examples" / "mcp_server.py"))}]\n'
                       # sandboxed, though this virtual environment lies under /tmp: the host's own
                       # interpreter is shown inside the sandbox's private /tmp
                       'startup_timeout_ms = 20000\n')
    assert_extra_missing(venv.dsh("run", "--profile", str(profile), "--model", "scripted:hello.json", "--data-dir",
                                  "mcp", "hi"), "mcp")
    venv.install(f"{dist.wheel}[mcp]")
    glossed = venv.dsh("demo", "glossary", "--profile", str(profile), "--script",
                       str(REPO / "examples" / "mcp_demo.json"), "--prompt", "go")
    assert glossed.returncode == 0, glossed.stderr
    assert "(From the glossary MCP server.)" in (work / "glossary" / "workspace" / "docs" / "terms.md").read_text()

    # acp: an editor's first request over stdio, answered with this version
    assert_extra_missing(venv.dsh("acp", "--model", "scripted:hello.json", "--data-dir", "acp"), "acp")
    venv.install(f"{dist.wheel}[acp]")
    agent = subprocess.Popen([str(venv.bin / "dsh"), "acp", "--model", "scripted:hello.json", "--data-dir", "acp"],
                             cwd=work, env=venv.env(), text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    assert agent.stdin is not None and agent.stdout is not None
    agent.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                  "params": {"protocolVersion": 1, "clientCapabilities": {}}}) + "\n")
    agent.stdin.flush()
    answer = json.loads(agent.stdout.readline())
    assert answer["id"] == 1 and answer["result"]["agentInfo"]["version"] == VERSION, answer
    agent.stdin.close()  # the editor leaves
    assert agent.wait(timeout=COMMAND_TIMEOUT_S) == 0

    # all: every user-facing extra, each installed above, so nothing is missing and nothing else is asked for
    venv.install(f"{dist.wheel}[all]")
    assert venv.python("import acp, llm, mcp, openai, psycopg, uvicorn, watchfiles; print('ok')").strip() == "ok"
