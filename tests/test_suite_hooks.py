"""The suite's own machinery: the bounded async-test hook in ``conftest.py``.

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
