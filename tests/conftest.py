"""Suite-wide setup: async tests with a bound, golden files, and the shared kits on ``sys.path``.

This directory is on ``sys.path`` (pytest's prepend import mode), which lets
every test directory share the kits at this level (``kit_gates``) without
making ``tests`` a package.

An ``async def test_*`` runs here in a fresh event loop of its own, bounded by
``DEFAULT_TIMEOUT_S`` seconds so that a hang fails with a clear message instead
of stalling the whole run. A test that legitimately needs longer says so with
``@pytest.mark.timeout_s(N)``. No plugin (pytest-asyncio and the like) is
needed: the hook below is all there is.

Golden files are checked through the ``golden`` fixture (``kit_golden``);
``pytest --update-golden`` rewrites the ones that differ and fails those tests.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Awaitable
from typing import Any

import pytest
from kit_golden import Golden

DEFAULT_TIMEOUT_S = 60.0
"""Bound for one async test; generous because the machine running the suite may be loaded."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite golden files that differ (each rewrite fails its test: review, then rerun); "
        "DSH_UPDATE_GOLDEN=1 does the same",
    )


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Golden:
    """Golden-file checks for this run (updating with ``--update-golden`` or ``DSH_UPDATE_GOLDEN=1``)."""
    update = bool(request.config.getoption("--update-golden")) or os.environ.get("DSH_UPDATE_GOLDEN") == "1"
    return Golden(update=update)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"timeout_s(seconds): bound for one async test instead of the default {DEFAULT_TIMEOUT_S:g}s",
    )


def timeout_of(item: pytest.Function) -> float:
    """The bound of one async test: its ``timeout_s`` marker, else the default."""
    marker = item.get_closest_marker("timeout_s")
    if marker is None:
        return DEFAULT_TIMEOUT_S
    if len(marker.args) != 1 or marker.kwargs or not isinstance(marker.args[0], (int, float)) or marker.args[0] <= 0:
        raise pytest.UsageError(f"{item.nodeid}: timeout_s takes one positive number of seconds, got {marker.args}")
    return float(marker.args[0])


async def bounded(body: Awaitable[Any], seconds: float, nodeid: str) -> None:
    """Await one test body; past its bound it is cancelled and the test fails, naming the bound."""
    bound = asyncio.timeout(seconds)
    try:
        async with bound:
            await body
    except TimeoutError:
        if not bound.expired():
            raise  # the body's own TimeoutError, not the bound
        pytest.fail(f"{nodeid} did not finish within {seconds:g}s (a hang? raise it with @pytest.mark.timeout_s(N))")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run ``async def`` tests in a fresh event loop, bounded; leave plain tests to pytest."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    seconds = timeout_of(pyfuncitem)
    wanted = inspect.signature(pyfuncitem.obj).parameters
    kwargs = {name: pyfuncitem.funcargs[name] for name in wanted}
    asyncio.run(bounded(pyfuncitem.obj(**kwargs), seconds, pyfuncitem.nodeid))
    return True
