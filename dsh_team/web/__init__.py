"""The Team web panel: watch and steer a live Team in a browser, or replay a stored one.

Rooms: :mod:`.timeline` and :mod:`.document` fold a Lead log into the page's JSON
document (the ``dsh team show --json`` shapes plus live status, DAG layers and a
timeline); :mod:`.sources` say where the log comes from (a live run or a data
directory); :mod:`.stream` publishes changes as server-sent events;
:mod:`.steering` turns page requests into Team service calls; :mod:`.app` is the
Starlette application with its security checks; :mod:`.plugin` runs it on the
host's event loop (``dsh run --web``) and :mod:`.serve` from stored logs
(``dsh team serve``). The JSON API is documented in ``docs/web-panel.md``.

Starlette, sse-starlette and uvicorn come with the ``web`` extra; nothing here is
imported by the rest of the package, and the two entrances (:mod:`.plugin`,
``dsh team serve``) call :func:`require_web` first, so a missing extra is the typed
``EXTRA_NOT_INSTALLED`` naming the command to install it.
"""

from __future__ import annotations

from typing import Final

from host_spec.extras import require

__all__ = ["WEB_MODULES", "require_web"]

#: What the ``web`` extra installs (import names), each checked before any module here imports it.
WEB_MODULES: Final = ("starlette", "sse_starlette", "uvicorn")


def require_web(feature: str) -> None:
    """Fail naming the ``web`` extra when any of its parts is missing, before they are imported.

    Raises:
        ExtraNotInstalledError: ``EXTRA_NOT_INSTALLED``.
    """
    for module in WEB_MODULES:
        require(module, extra="web", feature=feature)
