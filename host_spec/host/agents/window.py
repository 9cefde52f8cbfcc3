"""When a model's context is compacted: its context window and the threshold share.

Kept apart from the compaction step itself because every agent's runtime carries
these settings and the profile loader builds them, while the step needs the agents.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

import attrs

from host_spec.host.models.adapter import positive_tokens

__all__ = ["CompactionSettings"]


def _share(instance: Any, attribute: Any, value: float) -> None:
    if not 0.0 < value <= 1.0:
        raise ValueError(f"{attribute.name} must be a share in (0, 1], got {value}")


def _recent(instance: Any, attribute: Any, value: float) -> None:
    if not 0.0 < value < instance.threshold:
        raise ValueError(f"recent_share must be above 0 and below threshold ({instance.threshold}), got {value}")


def _windows(instance: Any, attribute: Any, value: Mapping[str, int]) -> None:
    for pattern, tokens in value.items():
        if tokens <= 0:
            raise ValueError(f"windows.{pattern} must be a positive number of tokens, got {tokens}")


@attrs.frozen
class CompactionSettings:
    """When and how much to compact (the profile's ``[compaction]`` table).

    Attributes:
        threshold: Share of the context window that triggers a compaction.
        recent_share: Share of the window kept verbatim as recent turns (at least the
            newest step is always kept).
        windows: Model-spec pattern (``fnmatch``) -> context window in tokens; the first
            match wins over what the adapter reports (``context_window``). A model with
            no known window is never compacted.
    """

    threshold: float = attrs.field(default=0.8, validator=_share)
    recent_share: float = attrs.field(default=0.25, validator=_recent)
    windows: Mapping[str, int] = attrs.field(factory=dict, validator=_windows)

    def window(self, spec: str | None, model: Any) -> int | None:
        """The context window (tokens) of an agent running on ``spec`` through ``model``."""
        for pattern, tokens in self.windows.items():
            if spec is not None and fnmatch.fnmatchcase(spec, pattern):
                return tokens
        lookup = getattr(model, "window_for", None)
        return positive_tokens(lookup(spec) if callable(lookup) else getattr(model, "context_window", None))
