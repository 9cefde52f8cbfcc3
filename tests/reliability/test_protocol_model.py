"""The lease, epoch and work-desk protocol, checked exhaustively (:mod:`protocol_model`).

A plain breadth-first exploration of every interleaving within small bounds (two
workers, the Lead's process, one member, a takeover, an outage, a freeze): it needs
no dependency, and unlike a property-based search it is exhaustive within those
bounds, so "no violation" means none exists there. With the guards of #38 removed
the search finds a violation, and the very schedule of the defect #38 reported (a
worker keeping the member's lease across a takeover, two calls of the member
refreshing its cached log at once, the next tool call issued twice) is a path of
the unguarded model that the guarded one does not allow.
"""

from __future__ import annotations

import pytest
from protocol_model import Bounds, Model, explore, replay, violations

pytestmark = pytest.mark.slow

#: The defect of #38 as a schedule of the model: a takeover after an outage while w1 keeps the member's lease.
DEFECT = [
    'lead: post model row 1',
    'w1: acquire the member lease (epoch 1), recover',
    'w1: take rows 1',
    'w1: row 1 finds its cached log long enough',
    'w1: row 1 answers tool call 1',
    'w1: finish row 1 (stored)',
    'lead: settle 1, record reply and tool/call 1',
    'lead: post tool row 2 (tool call 1)',
    'w1: take rows 2',
    "w1: row 2 reads the member's log into its cache",
    'w1: row 2 runs command 1',
    'w1: finish row 2 (stored)',
    'lead: settle 2, record tool/result 1',
    'lead: post model row 3',
    'outage: the database stops; every lease lapses',
    'w2: claim the Team (epoch 2), take over, cold-resume',
    'w2: post model row 4',
    'w1: renew the member lease',
    'w1: take rows 3, 4',
    "w1: row 3 reads the member's log",
    "w1: row 4 reads the member's log",
    'w1: row 3 extends its cached log',
    'w1: row 4 extends its cached log',
    'w1: row 4 answers tool call 2',
    'w1: finish row 4 (stored)',
    'w2: settle 4, record reply and tool/call 2',
    'w2: post tool row 5 (tool call 2)',
    'w1: row 3 answers tool call 2',
    'w1: finish row 3 (stored)',
    'w1: take rows 5',
    "w1: row 5 reads the member's log into its cache",
    'w1: row 5 runs command 2',
    'w1: finish row 5 (stored)',
    'w2: settle 5, record tool/result 2',
    'w2: post model row 6',
    'w1: take rows 6',
    "w1: row 6 reads the member's log into its cache",
    'w1: row 6 answers tool call 2',
    'w1: finish row 6 (stored)',
    'w2: settle 6, record reply and tool/call 2',
    'w2: post tool row 7 (tool call 2)',
    'w1: take rows 7',
    "w1: row 7 reads the member's log into its cache",
    'w1: row 7 runs command 2',
]


def test_no_interleaving_records_a_call_twice_or_accepts_an_answer_from_a_stale_holder() -> None:
    result = explore(Model(bounds=Bounds(outages=1, freezes=1, takeovers=1, claims=2)))
    assert result.violation is None, "\n".join(result.trace)
    assert result.states > 100_000  # the bounds really were explored (the outage, the freeze, the takeover)


def test_without_the_epoch_rule_the_search_finds_an_answer_accepted_from_a_stale_holder() -> None:
    result = explore(Model(epoch=False))
    assert result.violation is not None and result.violation.startswith("stale answer")
    assert any("claim the Team" in step for step in result.trace)  # it takes a takeover


def test_the_defect_of_38_is_a_path_of_the_unguarded_model() -> None:
    state, taken = replay(Model(epoch=False, dedupe=False), DEFECT)
    assert taken == DEFECT
    found = violations(state)
    assert "recorded twice: tool/call 2" in found and "effect twice: command 2 ran 2 times" in found


def test_the_guarded_model_does_not_allow_that_schedule() -> None:
    state, taken = replay(Model(), DEFECT)
    assert len(taken) < len(DEFECT) and violations(state) == []
    assert DEFECT[len(taken)] == "w1: renew the member lease"  # the takeover fenced w1's lease of the member
    state, taken = replay(Model(epoch=True, dedupe=False), DEFECT)
    assert len(taken) < len(DEFECT) and violations(state) == []
