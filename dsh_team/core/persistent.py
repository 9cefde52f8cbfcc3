"""The shared pieces of the folded state's persistent collections: one empty map, one memo.

Every collection of the state is an :class:`immutables.Map` (a HAMT), so a new
state shares all it does not change with the old one. Two small things make that
cheap: one shared empty map every fresh collection starts from (no allocation
per absent key), and a per-object memo for listings derived from an immutable
collection, which never makes two equal collections compare unequal. They sit
apart from the state types so the change index and the mailbox use them without
importing the whole state.
"""

from __future__ import annotations

from typing import Any, Final

import immutables

__all__ = ["EMPTY", "Memo"]

#: The shared empty map every fresh collection starts from.
EMPTY: Final[immutables.Map[Any, Any]] = immutables.Map()


class Memo(dict[str, Any]):
    """A per-object cache that never takes part in equality.

    Collections are immutable, so anything derived from one (a sorted listing) is
    valid for its whole life; storing it here keeps repeated reads O(k) without
    making two equal collections compare unequal.
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Memo)

    # typeshed declares ``dict.__hash__`` as ``None``; a Memo must hash so the Structs holding it do.
    def __hash__(self) -> int:  # type: ignore[override]
        return 0

    def __repr__(self) -> str:
        return "Memo()"
