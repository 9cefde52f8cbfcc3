"""Tokens per member in ``dsh team show``: folded from each member's own log (a fork's inherited prefix excluded)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import structlog

from dsh_team.views.usage import MemberUsage, fold_usage
from host_spec.host.cli.main import main
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.store.session import NullObserver
from host_spec.host.store.sessions import SessionStore

from team_builders import member

LEAD = "lead-1"


@pytest.fixture(autouse=True)
def _logging() -> Any:
    """``main()`` configures structlog for the process; undo it for the tests that follow."""
    yield
    structlog.reset_defaults()


def step(input_tokens: int, output_tokens: int, *, cached: int | None = None, model: str | None = "openai:m") -> dict[str, Any]:
    usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    if cached is not None:
        usage["cached_tokens"] = cached
    value: dict[str, Any] = {"turn": 1, "step": 1, "content": [{"type": "text", "text": "x"}], "usage": usage}
    if model is not None:
        value["model"] = model
    return value


def write(data: Path) -> None:
    """A Lead with two steps, a fresh teammate, and a fork whose seed repeats the Lead's steps."""

    async def body() -> None:
        store = SessionStore(JsonlStore(data), NullObserver(), clock=lambda: 1000)
        lead = store.create(LEAD)
        lead.append("assistant/message", step(100, 10, cached=40, model="openai:big"))
        lead.append("assistant/message", step(50, 5, model=None))
        lead.append("assistant/message", {"turn": 1, "step": 3, "content": [{"type": "text", "text": "scripted"}]})
        for state in ("provisioning", "active"):
            lead.append("team/member", member("c-a", "alpha", state, team_id=LEAD))
            lead.append("team/member", member("c-f", "forky", state, provider="fork", context="fork", team_id=LEAD))
        fresh = store.create("c-a", parent_session=LEAD)
        fresh.append("assistant/message", step(7, 3, model="openai:small"))
        fork = store.create("c-f", parent_session=LEAD, seed=list(lead.events)[:2])
        fork.append("assistant/message", step(9, 1, cached=8, model="openai:small"))
        for session in (lead, fresh, fork):
            await store.dispose(session)

    asyncio.run(body())


def test_fold_counts_only_reported_steps_and_keeps_the_latest_model(tmp_path: Path) -> None:
    write(tmp_path)
    _, events = JsonlStore(tmp_path).read(LEAD)
    assert fold_usage(events) == MemberUsage(calls=2, input_tokens=150, output_tokens=15, cached_tokens=40, model="openai:big")
    assert fold_usage([]) == MemberUsage()


def test_team_show_prints_tokens_per_member(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path)
    assert main(["team", "show", "--data-dir", str(tmp_path), LEAD]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")}
    assert "openai:big" in rows["lead"] and "150/15 +40 cached" in rows["lead"]
    assert "openai:small" in rows["alpha"] and "7/3" in rows["alpha"] and "cached" not in rows["alpha"]
    # The fork's inherited prefix (the Lead's 150/15) is the Lead's cost, not the fork's.
    assert "9/1 +8 cached" in rows["forky"]
    assert "TOKENS IN/OUT" in rows["NAME"]


def test_json_usage_and_a_member_without_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    write(tmp_path)
    assert main(["team", "show", "--data-dir", str(tmp_path), "--json", LEAD]) == 0
    members = {m["name"]: m for m in json.loads(capsys.readouterr().out)["members"]}
    assert members["forky"]["usage"] == {"calls": 1, "input_tokens": 9, "output_tokens": 1, "cached_tokens": 8,
                                         "model": "openai:small", "compactions": 0}
