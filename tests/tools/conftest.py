"""Fixtures for tests/tools (fakes live in ``team_tools_fakes``)."""

from __future__ import annotations

import pytest
from team_tools_fakes import FakeService, StubAgent


@pytest.fixture
def service() -> FakeService:
    return FakeService()


@pytest.fixture
def lead() -> StubAgent:
    return StubAgent()
