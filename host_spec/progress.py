"""The progress contract: how a plugin distribution shows a run's work as a list of items.

An editor that drives a run over the Agent Client Protocol (``dsh acp``) shows the
agent's *plan*: entries, each pending, in progress or completed. What the items of
a run are, only a plugin knows (the Team's task board is the Team plugin's), and
the host must not import a plugin. So a distribution declares entry points in
group :data:`PROGRESS_ENTRY_POINT_GROUP` (``dsh.progress``)::

    [project.entry-points."dsh.progress"]
    team = "dsh_team.views.progress:board_progress"

Each entry point is a callable ``progress(host, root) -> Sequence[ProgressItem] | None``:
the current items of the run whose root agent is ``root``, or ``None`` when the
contributor has nothing to say about this run (its service is not loaded). It is
asked again after the root's log changes, so it must be a cheap, synchronous read
of state the plugin already holds; the host sends the items only when they changed.
The first contributor (by entry-point name) that answers non-``None`` wins.

(Named *progress*, not *plan*, because a Team's "plan" is a teammate's plan
submitted for approval: one name, one meaning.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final, Literal

import attrs

if TYPE_CHECKING:
    from host_spec.protocols import Agent, Host

__all__ = ["PROGRESS_ENTRY_POINT_GROUP", "ProgressItem", "ProgressSource", "ProgressStatus"]

#: Entry-point group of progress contributors.
PROGRESS_ENTRY_POINT_GROUP: Final = "dsh.progress"

#: Where an item stands (the Agent Client Protocol's plan entry statuses).
ProgressStatus = Literal["pending", "in_progress", "completed"]


@attrs.frozen
class ProgressItem:
    """One item of a run's work.

    Attributes:
        content: One line saying what the entry is (e.g. ``task-1 Write the module (alice)``).
        status: ``pending``, ``in_progress`` or ``completed``.
    """

    content: str
    status: ProgressStatus


#: ``progress(host, root)``: the current items of ``root``'s run, or ``None`` (nothing to show).
ProgressSource = Callable[["Host", "Agent"], "Sequence[ProgressItem] | None"]
