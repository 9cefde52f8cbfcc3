"""Who is asking: a member's role in its Team and the resolved caller of a board operation.

Membership is resolved once per Team call (:mod:`dsh_team.log.membership`) and
handed to the pure decisions as a value, so the board and its action rules never
look a caller up themselves and a test can state any caller directly.
"""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["Role", "Actor"]

#: A member's place in its Team: the Lead (the root) or a rostered teammate.
Role = Literal["lead", "teammate"]


class Actor(msgspec.Struct, frozen=True, gc=False):
    """The resolved caller of a board operation (a frozen Struct, built in C: one per Team mutation).

    Attributes:
        member_id: The caller's session id (the Team id for the Lead).
        role: ``lead`` or ``teammate``.
    """

    member_id: str
    role: Role

    @property
    def is_lead(self) -> bool:
        return self.role == "lead"
