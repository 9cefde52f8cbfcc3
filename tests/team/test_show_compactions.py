"""Compactions per member in ``dsh team show``: counted from each member's own log, summary calls priced."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import structlog

from dsh_team.views.usage import MemberUsage, added, fold_usage
from host_spec.events import ContextCompaction, json_decode
from host_spec.host.cli.main import main
from host_spec.host.store.jsonl import JsonlStore
from host_spec.host.store.session import NullObserver
from host_spec.host.store.sessions import SessionStore
from host_spec.messages import Usage

from team_builders import member

LEAD = "lead-1"


@pytest.fixture(autouse=True)
def _logging() -> Any:
    """``main()`` configures structlog for the process; undo it for the tests that follow."""
    yield
    structlog.reset_defaults()


def compaction(usage: Usage | None) -> ContextCompaction:
    return ContextCompaction(version=1, summary="s", first_seq=1, kept_from_seq=2, summarised=1,
                             estimated_tokens=900, window=1000, usage=usage, model="openai:m" if usage else None)


def write(data: Path) -> None:
    """A Lead whose teammate compacted twice (one summary call reported usage) and one that never did."""

    async def body() -> None:
        store = SessionStore(JsonlStore(data), NullObserver(), clock=lambda: 1000)
        lead = store.create(LEAD)
        for state in ("provisioning", "active"):
            lead.append("team/member", member("c-a", "alpha", state, team_id=LEAD))
            lead.append("team/member", member("c-b", "beta", state, team_id=LEAD))
        alpha = store.create("c-a", parent_session=LEAD)
        alpha.append("assistant/message", {"turn": 1, "step": 1, "content": [{"type": "text", "text": "x"}],
                                           "usage": {"input_tokens": 10, "output_tokens": 2}, "model": "openai:m"})
        alpha.append("context/compacted", compaction(Usage(input_tokens=30, output_tokens=4)))
        alpha.append("context/compacted", compaction(None))
        beta = store.create("c-b", parent_session=LEAD)
        beta.append("context/compacted", compaction(None))
        for session in (lead, alpha, beta):
            await store.dispose(session)

    asyncio.run(body())


def test_fold_counts_compactions_and_prices_their_summaries(tmp_path: Path) -> None:
    """Each ``context/compacted`` counts once; a summary call's reported usage joins the sums."""
    write(tmp_path)
    _, events = JsonlStore(tmp_path).read("c-a")
    assert fold_usage(events) == MemberUsage(calls=2, input_tokens=40, output_tokens=6, model="openai:m", compactions=2)
    assert added(fold_usage(events), MemberUsage(compactions=1)).compactions == 3


def test_team_show_prints_and_exports_compactions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The TOKENS column says how often a member was compacted; ``--json`` has ``usage.compactions``."""
    write(tmp_path)
    assert main(["team", "show", "--data-dir", str(tmp_path), LEAD]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")}
    assert "40/6 (2 compacted)" in rows["alpha"]
    assert "- (1 compacted)" in rows["beta"] and "compacted" not in rows["lead"]
    assert main(["team", "show", "--json", "--data-dir", str(tmp_path), LEAD]) == 0
    shown = {m["name"]: m["usage"] for m in json_decode(capsys.readouterr().out)["members"]}
    assert (shown["alpha"]["compactions"], shown["beta"]["compactions"], shown["lead"]["compactions"]) == (2, 1, 0)
