"""``dsh demo [DIR]``: the packaged scripted team runs in a new directory and shows what it did.

``tests/e2e/test_demo_snapshot.py`` checks the run itself (as ``make demo`` runs
it); these check the command's own rules: where it runs, what it refuses, what it
prints at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from host_spec.host.cli.demo import MARKER
from host_spec.host.demo import PROFILE, PROMPT, SCRIPT
from host_spec.host.store.jsonl import JsonlStore

pytestmark = pytest.mark.slow

GREET = 'def greet(name: str) -> str:\n    """Return the greeting for name."""\n    return f"Hello, {name}!"\n'


def dsh(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "host_spec.host.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_the_packaged_data_is_the_script_and_a_built_in_profile() -> None:
    assert SCRIPT.is_file() and SCRIPT.parent.name == "demo" and SCRIPT.parent.parent.name == "host"
    assert (Path(__file__).resolve().parents[2] / "host_spec" / "host" / "plugins" / "profiles"
            / f"{PROFILE}.toml").is_file()
    assert "builder" in PROMPT and "reviewer" in PROMPT


def test_a_named_directory_gets_the_team_and_its_files(tmp_path: Path) -> None:
    target = tmp_path / "new" / "demo"
    done = dsh("demo", str(target), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (target / "workspace" / "src" / "greet.py").read_text() == GREET
    assert (target / "workspace" / "docs" / "review.md").read_text().startswith("# Review of src/greet.py")
    assert "session-1" in JsonlStore(target).list_ids()
    lines = done.stdout.splitlines()
    # the run's transcript, then the Team as `dsh team show` prints it, then the files, then where to look
    assert lines[1].startswith(f"dsh run --profile {PROFILE} --model scripted:{SCRIPT} --data-dir {target}")
    assert lines.index("dsh team show  (final roster, board and pending mail)") < lines.index(
        f"files in {target / 'workspace'}") < lines.index("--- src/greet.py")
    assert any(line.startswith("Team session-1  (Lead log: all ") for line in lines)
    assert lines[-2] == f"Logs are in {target}/. Try: dsh team show --data-dir {target} --at 20"
    assert lines[-1].startswith(f"Open this run in the browser: dsh team serve --data-dir {target}")


def test_without_a_directory_it_runs_in_a_new_temporary_one_it_prints(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    done = dsh("demo", cwd=tmp_path, env={**os.environ, "TMPDIR": str(temp)})
    assert done.returncode == 0, done.stderr
    [made] = list(temp.iterdir())
    assert made.name.startswith("dsh-demo-")
    assert done.stdout.splitlines()[0] == f"dsh demo: running in {made} (a new temporary directory)"
    assert (made / "workspace" / "src" / "greet.py").read_text() == GREET
    assert list(tmp_path.iterdir()) == [temp]  # nothing written where it was started


def test_a_directory_an_earlier_demo_made_is_reset(tmp_path: Path) -> None:
    target = tmp_path / "demo"
    assert dsh("demo", str(target), cwd=tmp_path).returncode == 0
    (target / "workspace" / "left-over.txt").write_text("from before")
    again = dsh("demo", str(target), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert not (target / "workspace" / "left-over.txt").exists()
    assert "session-1" in JsonlStore(target).list_ids() and (target / MARKER).is_file()


def test_a_directory_of_someone_else_is_refused_and_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    done = dsh("demo", str(target), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("dsh: DEMO_DIR_NOT_EMPTY: ") and "Traceback" not in done.stderr
    assert sorted(p.name for p in target.iterdir()) == ["notes.txt"]
    (tmp_path / "file").write_text("x")
    assert dsh("demo", str(tmp_path / "file"), cwd=tmp_path).stderr.startswith("dsh: DEMO_DIR_NOT_EMPTY: ")


def test_a_failing_run_stops_the_demo_with_its_status(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    done = dsh("demo", str(tmp_path / "demo"), "--script", str(bad), cwd=tmp_path)
    assert done.returncode == 2
    assert "SCRIPT_INVALID" in done.stderr and "dsh demo: dsh run exited with 2" in done.stderr
    assert "dsh team show" not in done.stdout
