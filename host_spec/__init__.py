"""The dsh host contract: hook markers, hookspecs, protocols, event envelope and errors.

Plugins import from here (and from :mod:`host_spec.events`, :mod:`host_spec.messages`,
:mod:`host_spec.records`, :mod:`host_spec.protocols`, :mod:`host_spec.errors`), never
from :mod:`host_spec.host`, which is the reference host.
"""

from __future__ import annotations

from typing import Final

import pluggy

PROJECT: Final = "dsh"
ENTRY_POINT_GROUP: Final = "dsh"

hookimpl = pluggy.HookimplMarker(PROJECT)

__all__ = ["PROJECT", "ENTRY_POINT_GROUP", "hookimpl"]
