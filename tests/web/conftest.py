"""The web panel tests' shared fixture: a scripted Team run behind Starlette's test client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from web_kit import Dispatch, Team, open_team


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[TestClient, Team]]:
    """The kit's run opened on the test client's own loop, so requests and the Team share it."""
    dispatch = Dispatch()
    with TestClient(dispatch) as client:
        team = client.portal.call(open_team, tmp_path / "data")
        dispatch.app = team.panel.app
        try:
            yield client, team
        finally:
            client.portal.call(team.host.close)
