"""Crash driver: ``dsh run`` with the Agent Teams profile, SIGKILLed at a chosen durable point.

Usage: ``python crash_driver.py DATA_DIR SCRIPT POINT PROMPT [PROFILE]``

It does what ``dsh run --profile agent-teams --model scripted:SCRIPT`` does, plus one
observer plugin that kills this very process with SIGKILL right after the first
group commit that makes the chosen fact durable -- no cleanup, no final flush, no
lock release beyond what the kernel does. Points:

``provisioning-before-child``  the Lead durably holds a ``provisioning`` record (no child yet)
``provisioning-after-child``   a child's first commit (its prompt accepted), before ``active``
``after-queued``               the Lead durably holds ``team/message/queued``, nothing delivered
``after-accepted``             a teammate's inbox durably holds Team mail, no ``delivered`` yet
``after-accepted-lead``        the Lead's inbox durably holds Team mail, no ``delivered`` yet
``after-recorded``             a teammate's history durably holds Team mail (no reply to it yet)
``after-reply``                a teammate's reply to Team mail in its history is durable
``before-quiescent``           the Team is quiet and its ``team/quiescent`` record is about to be appended
``after-quiescent``            the Lead durably holds its first ``team/quiescent`` record
``after-budget``               the Lead durably holds a ``team/budget`` record (a limit was reached)
``after-user-recorded``        a teammate's history durably holds the user's Team mail (``dsh team send``)
``after-shutdown-requested``   the Lead durably holds a ``team/shutdown`` request (its mail not queued yet)

``PROMPT`` ``RESUME:<session id>`` resumes that stored root instead of starting a run (``dsh resume``).

``PROFILE`` (default ``agent-teams``) is a profile name or file, e.g. one that sets a budget.

Any other point never kills. Exit status 3 means the run finished without being killed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from host_spec import hookimpl
from host_spec.events import EventType
from host_spec.host.app import Host


def _team_mail(event: Any) -> bool:
    if event.type != EventType.INBOX_SPLICED:
        return False
    return any(item.get("source", {}).get("kind") == "team-message" for item in event.value().get("inserted", []))


def _provisioning(event: Any) -> bool:
    return event.type == "team/member" and event.value()["member"]["phase"] == "provisioning"


class _AfterMail:
    """Matches a history event of a child that follows a Team ``user/message`` (``reply``: only a reply)."""

    def __init__(self, reply: bool) -> None:
        self.reply = reply
        self.recorded = False

    def __call__(self, event: Any) -> bool:
        if event.type == EventType.USER_MESSAGE and event.value().get("source", {}).get("kind") == "team-message":
            self.recorded = True
            return not self.reply
        return self.reply and self.recorded and event.type == EventType.ASSISTANT_MESSAGE


def _user_mail(event: Any) -> bool:
    if event.type != EventType.USER_MESSAGE:
        return False
    source = event.value().get("source", {})
    return source.get("kind") == "user" and "team_id" in source


POINTS = {
    "after-user-recorded": (True, _user_mail),
    "after-shutdown-requested": (False, lambda event: event.type == "team/shutdown"),
    "provisioning-before-child": (False, _provisioning),
    "provisioning-after-child": (True, lambda event: event.type == EventType.INBOX_SPLICED),
    "after-queued": (False, lambda event: event.type == "team/message/queued"),
    "after-accepted": (True, _team_mail),
    "after-accepted-lead": (False, _team_mail),
    "after-recorded": (True, _AfterMail(reply=False)),
    "after-reply": (True, _AfterMail(reply=True)),
    "after-budget": (False, lambda event: event.type == "team/budget"),
    "after-quiescent": (False, lambda event: event.type == "team/quiescent"),
}


class Killer:
    """Kills the process after the first commit whose newly durable events match the point."""

    def __init__(self, point: str) -> None:
        self.child, self.matches = POINTS.get(point, (None, lambda event: False))
        self.before_quiescent = point == "before-quiescent"
        self.seen: dict[str, int] = {}

    @hookimpl
    def dsh_pre_append(self, host: Any, session: Any, event: Any) -> None:
        if self.before_quiescent and event.type == "team/quiescent":
            os.kill(os.getpid(), signal.SIGKILL)  # the Team was quiet; nothing of the record is written

    @hookimpl
    def dsh_session_flushed(self, host: Any, session: Any, durable_seq: int) -> None:
        start = self.seen.get(session.id, 0)
        self.seen[session.id] = durable_seq
        if (session.header.parent_session is not None) != self.child:
            return
        if any(self.matches(event) for event in session.events[start:durable_seq]):
            os.kill(os.getpid(), signal.SIGKILL)


async def main(data_dir: str, script: str, point: str, prompt: str, profile: str = "agent-teams") -> int:
    host = await Host.open(data_dir, profile, f"scripted:{script}", extra_plugins=[("crash-killer", Killer(point))])
    try:
        if prompt.startswith("RESUME:"):
            await host.resume(prompt.removeprefix("RESUME:"))
        else:
            await host.run(prompt)
    finally:
        await host.close()
    return 3


if __name__ == "__main__":
    sys.exit(asyncio.run(main(*sys.argv[1:6])))
