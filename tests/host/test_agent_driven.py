"""The turn driver's view of an agent (``DrivenAgent``) is one the live agent really offers."""

from __future__ import annotations

import inspect

from host_spec.host.agents.driven import DrivenAgent
from host_spec.protocols import Agent as ContractAgent

from _agent_kit import make_kit, memory_session


def _members(protocol: type) -> set[str]:
    names = {name for name in vars(protocol) if not name.startswith("_")}
    return names | set(getattr(protocol, "__annotations__", {}))


async def test_a_live_agent_has_every_member_the_driver_uses() -> None:
    """Each attribute and method of the driver Protocol, and of the contract's agent, exists on a live agent."""
    kit = make_kit()
    agent = kit.registry.create(memory_session(), name="lead")
    wanted = _members(DrivenAgent) | _members(ContractAgent)
    assert {"runtime", "turn", "inbox", "signal", "cancel_cause", "take_latch", "driver_done", "messages"} <= wanted
    missing = sorted(name for name in wanted if not hasattr(agent, name))
    assert missing == []
    assert agent.runtime is kit.registry.runtime and isinstance(agent.turn, int)
    for name in ("take_latch", "driver_done", "messages"):
        assert inspect.ismethod(getattr(agent, name))
    await agent.dispose()
