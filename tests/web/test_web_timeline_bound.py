"""The panel's timeline is bounded: a long Lead log keeps only its newest entries, never its whole history.

A fold keeps between TIMELINE_KEPT and twice as many entries; a watcher whose
position is older than an entry let go gets a snapshot, which it would get anyway
(it missed more than a document's TIMELINE_WINDOW).
"""

from __future__ import annotations

import msgspec

from dsh_team.web.document import TIMELINE_KEPT, TIMELINE_WINDOW, PanelFold, document
from host_spec.events import Event, json_encode

LEAD = "lead"


def mode_events(count: int, start: int = 1) -> list[Event]:
    """``count`` Team-mode records (each is a timeline entry), alternating on and off."""
    return [
        Event(seq=seq, time=1_000 + seq, type="team/mode",
              data=msgspec.Raw(json_encode({"version": 2, "team_id": LEAD, "enabled": bool(seq % 2)})))
        for seq in range(start, start + count)
    ]  # fmt: skip


class TestPanelFold:
    def test_a_long_log_keeps_only_the_newest_entries(self) -> None:
        """Past twice TIMELINE_KEPT entries the oldest are let go in one batch; the document's window stays whole."""
        events = mode_events(2 * TIMELINE_KEPT + 1)
        fold = PanelFold(LEAD)
        fold.advance(events, 2 * TIMELINE_KEPT)
        assert len(fold.timeline) == 2 * TIMELINE_KEPT and fold.dropped == 0
        assert fold.entries_after(0) == fold.timeline
        fold.advance(events, len(events))
        assert len(fold.timeline) == TIMELINE_KEPT
        assert [e.seq for e in fold.timeline] == [e.seq for e in events[-TIMELINE_KEPT:]]
        assert fold.dropped == events[-TIMELINE_KEPT - 1].seq
        assert fold.entries_after(fold.dropped - 1) is None  # it missed an entry that is gone
        assert [e.seq for e in fold.entries_after(fold.dropped) or []] == [e.seq for e in events[-TIMELINE_KEPT:]]
        doc = document(fold, log_length=len(events))
        assert [e["seq"] for e in doc["timeline"]] == [e.seq for e in events[-TIMELINE_WINDOW:]]

    def test_the_kept_entries_do_not_grow_with_the_history(self) -> None:
        """Ten times the history, the same bound."""
        events = mode_events(20 * TIMELINE_KEPT)
        fold = PanelFold(LEAD)
        for upto in range(0, len(events) + 1, 97):
            fold.advance(events, upto)
            assert len(fold.timeline) <= 2 * TIMELINE_KEPT
        fold.advance(events, len(events))
        assert fold.timeline[-1].seq == len(events) and TIMELINE_KEPT <= len(fold.timeline) <= 2 * TIMELINE_KEPT
