"""The suite's own machinery in ``conftest.py``: the bounded async-test hook and golden files.

Each check runs a small inner pytest session (pytester) with a copy of this
suite's ``conftest.py``, so what is tested is the real hook, not a model of it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = (Path(__file__).parent / "conftest.py").read_text()


@pytest.fixture
def inner(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    return pytester


def test_an_async_test_runs_in_its_own_loop_with_its_fixtures(inner: pytest.Pytester) -> None:
    """Both async tests really run (a failing assert fails), each in a fresh loop, fixtures passed by name."""
    inner.makepyfile(
        """
        import asyncio
        import pytest

        LOOPS = []

        @pytest.fixture
        def number():
            return 7

        async def test_first(number, tmp_path):
            LOOPS.append(asyncio.get_running_loop())
            await asyncio.sleep(0)
            assert number == 7 and tmp_path.is_dir()

        class TestInClass:
            async def test_second(self, number):
                LOOPS.append(asyncio.get_running_loop())
                assert len(LOOPS) == 2 and LOOPS[0] is not LOOPS[1] and LOOPS[0].is_closed()

        async def test_fails():
            await asyncio.sleep(0)
            assert 1 == 2
        """
    )
    result = inner.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*assert 1 == 2*"])


def test_a_hang_fails_at_the_marked_bound_and_names_it(inner: pytest.Pytester) -> None:
    """A test that never finishes fails with its bound in the message instead of stalling the run."""
    inner.makepyfile(
        """
        import asyncio
        import pytest

        @pytest.mark.timeout_s(0.2)
        async def test_hangs():
            await asyncio.Event().wait()
        """
    )
    result = inner.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_hangs did not finish within 0.2s*timeout_s*"])


def test_the_bodys_own_timeout_error_is_not_taken_for_the_bound(inner: pytest.Pytester) -> None:
    """A ``TimeoutError`` raised by the code under test propagates as itself."""
    inner.makepyfile(
        """
        async def test_raises():
            raise TimeoutError("the code under test timed out")
        """
    )
    result = inner.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*TimeoutError: the code under test timed out*"])
    result.stdout.no_fnmatch_line("*did not finish within*")


@pytest.mark.parametrize("args", ["", "0", "'soon'", "1, 2"])
def test_a_malformed_bound_is_a_usage_error(inner: pytest.Pytester, args: str) -> None:
    """``timeout_s`` takes exactly one positive number of seconds."""
    inner.makepyfile(
        f"""
        import pytest

        @pytest.mark.timeout_s({args})
        async def test_marked():
            pass
        """
    )
    result = inner.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*timeout_s takes one positive number of seconds*"])


def test_plain_tests_are_left_to_pytest(inner: pytest.Pytester) -> None:
    """Synchronous tests run exactly as without the hook."""
    inner.makepyfile(
        """
        def test_plain():
            assert True
        """
    )
    inner.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


# ---------------------------------------------------------------- golden files

GOLDEN_TEST = """
from pathlib import Path

def test_snapshot(golden):
    golden.check(Path(__file__).parent / "golden" / "value.json", {"b": 1, "a": ["x"]})
"""
CURRENT = '{\n  "b": 1,\n  "a": [\n    "x"\n  ]\n}\n'


def test_a_matching_golden_file_passes_and_is_left_alone(inner: pytest.Pytester) -> None:
    """Equal content passes, with or without the update flag, and the file is not rewritten."""
    inner.makepyfile(GOLDEN_TEST)
    path = inner.path / "golden" / "value.json"
    path.parent.mkdir()
    path.write_text(CURRENT)
    before = path.stat().st_mtime_ns
    inner.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    inner.runpytest("-p", "no:cacheprovider", "--update-golden").assert_outcomes(passed=1)
    assert path.read_text() == CURRENT and path.stat().st_mtime_ns == before


def test_a_differing_golden_file_fails_with_the_diff_and_stays(inner: pytest.Pytester) -> None:
    """Without the flag a difference fails, shows the changed lines and says how to update."""
    inner.makepyfile(GOLDEN_TEST)
    path = inner.path / "golden" / "value.json"
    path.parent.mkdir()
    path.write_text(CURRENT.replace('"b": 1', '"b": 2'))
    result = inner.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*value.json differs from the reviewed golden file*--update-golden*",
                                 '*-  "b": 2,*', '*+  "b": 1,*'])  # fmt: skip
    assert '"b": 2' in path.read_text()


def test_a_missing_golden_file_fails_and_says_how_to_create_it(inner: pytest.Pytester) -> None:
    inner.makepyfile(GOLDEN_TEST)
    result = inner.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*missing golden file*value.json*--update-golden*"])
    assert not (inner.path / "golden" / "value.json").exists()


@pytest.mark.parametrize("how", ["option", "environment"])
def test_an_update_rewrites_the_file_and_fails_until_rerun(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """``--update-golden`` / ``DSH_UPDATE_GOLDEN=1`` writes the new content and fails; the rerun passes."""
    inner.makepyfile(GOLDEN_TEST)
    path = inner.path / "golden" / "value.json"
    path.parent.mkdir()
    path.write_text("{}\n")
    args = ["-p", "no:cacheprovider"]
    if how == "option":
        args.append("--update-golden")
    else:
        monkeypatch.setenv("DSH_UPDATE_GOLDEN", "1")
    result = inner.runpytest(*args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*rewrote golden file*value.json*review the diff*"])
    assert path.read_text() == CURRENT
    monkeypatch.delenv("DSH_UPDATE_GOLDEN", raising=False)
    inner.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
