"""A hypothesis state machine for the Team mailbox against a plain model of exactly-once delivery.

The system is real: a reference host on a JSONL data dir with the ``agent-teams``
plugins, a Lead and two teammates (whose scripted model answers every message
with plain text). Rules send messages between members, let the Team settle,
interrupt a teammate, let teammates go to sleep on disk, and crash: the data
dir is copied as it is on disk at that instant (a delivery may be half done; a
torn tail is possible) and a new host resumes the Lead from the copy.

The model is a set: every message whose ``send_message`` returned is accepted,
and after the Team settles each accepted message must be in its target's history
exactly once and nowhere else (plus the other checks of :mod:`exactly_once`).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from exactly_once import violations

from dsh_team.api import TeamServiceAPI
from dsh_team.errors import TeamError
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.host.store.jsonl import JsonlStore
from host_spec.messages import text_block

__all__ = ["MailboxMachine"]

MEMBERS = ("lead", "alpha", "beta")


class MailboxMachine(RuleBasedStateMachine):
    """See the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.scratch = Path(tempfile.mkdtemp(prefix="dsh-mailbox-"))
        self.generation = 0
        self.accepted: dict[str, str] = {}  # message id -> target name (the model)
        self.ids: dict[str, str] = {}  # member name -> session id
        self.host: Host | None = None
        self.settled = True
        self.do(self._open(fresh=True))

    # ------------------------------------------------------------ plumbing

    def do(self, work: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(work, 60))

    @property
    def data(self) -> Path:
        return self.scratch / f"data-{self.generation}"

    @property
    def team(self) -> Any:
        assert self.host is not None
        return self.host.service(TeamServiceAPI)

    async def _open(self, *, fresh: bool) -> None:
        self.host = await Host.open(self.data, "agent-teams", ScriptedModel.from_mapping({}))
        if fresh:
            lead = self.host.start_agent(await self.host.create_session("lead"), name="lead")
            self.ids["lead"] = lead.id
            for name in MEMBERS[1:]:
                view = await self.team.spawn_teammate(lead, name=name, description=name, prompt=[text_block("hi")],
                                                      context="fresh", provider="spawn")  # fmt: skip
                self.ids[name] = view.id
        else:
            session = await self.host.resume_session("lead")
            self.host.start_agent(session, name="lead", source="resume")
        await self.host.quiesce()

    def agent(self, name: str) -> Any:
        assert self.host is not None
        return self.host.agents.get(self.ids[name])

    # ------------------------------------------------------------ rules

    @rule(sender=st.sampled_from(MEMBERS), to=st.sampled_from(MEMBERS), text=st.text("abc \n", min_size=1, max_size=8))
    def send(self, sender: str, to: str, text: str) -> None:
        agent = self.agent(sender)
        if sender == to or agent is None or not text.strip():
            return  # only a live member sends, to someone else, something the validators accept
        try:
            result = self.do(self.team.send_message(agent, target=to, content=[text_block(text)]))
        except TeamError as error:
            # The handle went stale (the host put an idle teammate to sleep first): refused,
            # so not accepted; anything queued regardless must still be delivered (checked).
            assert error.code == "TEAM_NOT_MEMBER" and self.agent(sender) is not agent, error
            return
        self.accepted[result.message_id] = to
        self.settled = False

    @rule()
    def settle(self) -> None:
        assert self.host is not None
        self.do(self.host.quiesce())
        self.settled = True

    @rule(member=st.sampled_from(MEMBERS[1:]))
    def interrupt(self, member: str) -> None:
        self.team.interrupt(self.agent("lead"), member)

    @rule(name=st.sampled_from(MEMBERS[1:]))
    def release(self, name: str) -> None:
        """Let an idle teammate go to sleep on disk (the host releases idle children on its own)."""
        assert self.host is not None
        agent = self.agent(name)
        if agent is not None and agent.status != "running":
            self.do(self.host.dispose_agent(agent))

    @rule()
    def crash(self) -> None:
        """Copy the disk as it is now, drop the process's state, and restart from the copy."""
        assert self.host is not None
        old, source = self.host, self.data
        self.generation += 1
        shutil.copytree(source, self.data)  # what a crash at this instant leaves
        self.do(old.close())  # writes only to the old dir
        self.do(self._open(fresh=False))
        self.settled = True

    # ------------------------------------------------------------ the model

    @invariant()
    def exactly_once_when_settled(self) -> None:
        if not self.settled:
            return
        assert self.host is not None
        self.do(self.host.quiesce())
        problems = violations(self.data)
        assert not problems, problems
        _, events = JsonlStore(self.data).read(self.ids["lead"])
        queued = {e.value()["message"]["id"] for e in events if e.type == "team/message/queued"}
        assert set(self.accepted) <= queued, set(self.accepted) - queued

    def teardown(self) -> None:
        try:
            if self.host is not None:
                self.do(self.host.close())
        finally:
            self.loop.close()
            shutil.rmtree(self.scratch, ignore_errors=True)
