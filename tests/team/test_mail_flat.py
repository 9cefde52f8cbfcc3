"""Mail keeps a live host flat: a delivered message leaves no object the collector walks.

Every message a teammate gets is queued in the Lead's log, delivered into the
teammate's session (a user message, then the scripted model's answer) and
acknowledged. What a live host keeps of that (the logs' events, the folds, each
teammate's model context) must not add a GC-tracked object per message: every
full collection walks all of them, so a host that did would pay more for each
message than for the one before (the scale bench's R4 measures that time; this
test pins its cause, the count, on an in-memory host that keeps every event).
"""

from __future__ import annotations

import asyncio
import gc

from dsh_team.api import TeamServiceAPI
from dsh_team.service import TeamService
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.messages import text_block

MEMBERS = 4
#: Tracked objects a host may gain over the measured messages (caches, containers
#: that grow in place): far below one per message (the conversations alone kept
#: three per message each way before they were flat).
SLACK = 100


def tracked() -> int:
    """GC-tracked objects alive after a full collection."""
    gc.collect()
    return len(gc.get_objects())


async def test_delivered_messages_add_no_tracked_objects() -> None:
    """800 messages queued, delivered and answered after a warm-up: the tracked objects stay put."""
    host = await Host.open(None, None, ScriptedModel.from_mapping({}, record=False))
    host.plugins.load("dsh-team", {"allow_volatile_store": True})
    teams = host.service(TeamServiceAPI)
    assert isinstance(teams, TeamService)
    root = host.start_agent(await host.create_session("flat"), name="lead")
    try:
        targets = [f"m{index}" for index in range(MEMBERS)]
        for name in targets:
            await teams.spawn_teammate(
                root, name=name, description="d", prompt=[text_block("wait")], context="fresh", provider="spawn"
            )
        content = [text_block("status: parser done")]

        async def exchange(rounds: int) -> None:
            for _ in range(rounds):
                results = await asyncio.gather(*(teams.send_message(root, target=t, content=content) for t in targets))
                assert all(result.status == "accepted" for result in results)

        await exchange(50)
        before = tracked()
        await exchange(200)
        grown = tracked() - before
        mail = teams.journals.get(root.session).state.mail
        assert mail.next_index == 250 * MEMBERS and not mail.pending  # every message delivered
        assert grown < SLACK, f"{grown} tracked objects for {200 * MEMBERS} messages"
    finally:
        await host.close()
