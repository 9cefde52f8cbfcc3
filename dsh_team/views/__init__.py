"""Read models of a Team: the browser projection and remote operations, and the offline ``dsh team show``.

Modules: :mod:`.projection` (the memoised browser view, :mod:`dsh_team.core.team_view`, and its publication),
:mod:`.remote` (browser operations with rejections inside the result),
:mod:`.show`, :mod:`.show_messages` and :mod:`.show_text` (the offline view, its mail
part, JSON and text),
:mod:`.cli` (``dsh team show``; :mod:`dsh_team.cli` assembles the ``dsh team`` group), :mod:`.trace` (the Team's span events and
receipt links in ``dsh trace export``).
"""

from dsh_team.core.team_view import BrowserMember, TeamView, build_view
from dsh_team.views.projection import Publisher, ViewListener
from dsh_team.views.remote import CONFLICT, REJECTED, UNCONFIRMED, RemoteTeam
from dsh_team.views.show import SHOW_VERSION, OfflineStatus, TeamShow, build_show, render_json
from dsh_team.views.show_text import render_text

__all__ = [
    "BrowserMember",
    "Publisher",
    "TeamView",
    "ViewListener",
    "build_view",
    "CONFLICT",
    "REJECTED",
    "UNCONFIRMED",
    "RemoteTeam",
    "SHOW_VERSION",
    "OfflineStatus",
    "TeamShow",
    "build_show",
    "render_json",
    "render_text",
]
