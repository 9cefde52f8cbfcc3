"""The run's progress items (``dsh.progress`` contributors) as the editor's plan, sent only when changed.

The contributors (the Team's board) are asked after the root's log changes, on
the update sender's task, so the Team's own fold of that event has already run;
an unchanged answer sends nothing. A contributor that fails is logged and
skipped: a broken plan view must not end the editor's session.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import acp
import structlog

from host_spec.progress import PROGRESS_ENTRY_POINT_GROUP

from host_spec.host.cli.extensions import Extension, discover_extensions

__all__ = ["Progress", "progress_sources"]

log = structlog.get_logger(__name__)


def progress_sources() -> list[Extension]:
    """The installed ``dsh.progress`` contributors, by entry-point name."""
    return discover_extensions(PROGRESS_ENTRY_POINT_GROUP, what="progress contributor")


class Progress:
    """The plan of one run: what the contributors say now, and what was last sent."""

    def __init__(self, host: Any, root: Any, sources: Sequence[Extension]) -> None:
        self.host, self.root, self.sources = host, root, list(sources)
        self._sent: list[tuple[str, str]] | None = None

    def _items(self) -> list[tuple[str, str]] | None:
        for name, source in self.sources:
            try:
                items = source(self.host, self.root)
            except Exception as exc:
                log.warning("acp.progress_failed", contributor=name, error=f"{type(exc).__name__}: {exc}")
                continue
            if items is not None:
                return [(item.content, item.status) for item in items]
        return None

    def update(self) -> Any | None:
        """The plan update when the items changed since the last one sent, else ``None``."""
        items = self._items()
        if items is None or items == self._sent:
            return None
        self._sent = items
        return acp.update_plan(acp.plan_entry(content, status=status) for content, status in items)  # type: ignore[arg-type]
