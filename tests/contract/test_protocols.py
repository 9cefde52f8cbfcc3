"""The reference host implements every protocol the plugins rely on, member by member.

The plugins are written against :mod:`host_spec.protocols` only; a protocol member
the reference host lacks would surface as an ``AttributeError`` deep inside a Team
operation. This pins the whole surface at once, on live objects of a real host.
"""

from __future__ import annotations

import asyncio
import inspect
import tempfile
from typing import Any, Protocol

import pytest

import tempfile

from host_spec import protocols
from host_spec.host.app import Host
from host_spec.host.models.scripted import ScriptedModel
from host_spec.messages import user_message


def members(protocol: type) -> set[str]:
    """Public methods, properties and annotated attributes a protocol declares."""
    names = {name for name in vars(protocol) if not name.startswith("_")}
    names |= {name for name in getattr(protocol, "__annotations__", {}) if not name.startswith("_")}
    return names


def live_objects() -> dict[str, Any]:
    async def build(data_dir: str) -> dict[str, Any]:
        host = await Host.open(data_dir, "agent-teams", ScriptedModel.from_mapping({}))
        session = await host.create_session()
        agent = host.start_agent(session, name="lead")
        agent.followup(user_message("hello"))
        await host.quiesce()
        persisted = await host.sessions.inspect(session.id)
        loaded = host.plugins.get("dsh-team")
        assert loaded is not None
        objects = {
            "Session": session,
            "PersistedSession": persisted,
            "SessionStore": host.sessions,
            "Scope": agent.scope,
            "Inbox": agent.inbox,
            "Agent": agent,
            "AgentRegistry": host.agents,
            "ToolRegistry": host.tools,
            "PromptRegistry": host.prompts,
            "Continuations": host.continuations,
            "PluginContext": loaded.ctx,
            "Host": host,
        }
        await host.close()
        return objects

    with tempfile.TemporaryDirectory(prefix="dsh-protocols-") as data_dir:  # the Team needs durable storage
        return asyncio.run(build(data_dir))


OBJECTS = live_objects()
PROTOCOLS = list(OBJECTS)


class TestReferenceHostConformance:
    @pytest.mark.parametrize("name", PROTOCOLS)
    def test_every_protocol_member_exists(self, name: str) -> None:
        """Each protocol member is present on the reference host's live object."""
        protocol = getattr(protocols, name)
        missing = sorted(member for member in members(protocol) if not hasattr(OBJECTS[name], member))
        assert missing == [], f"{type(OBJECTS[name]).__name__} lacks {missing} of protocols.{name}"

    @pytest.mark.parametrize("name", PROTOCOLS)
    def test_async_members_stay_async(self, name: str) -> None:
        """A member the protocol declares ``async`` is awaitable on the host too (and vice versa)."""
        protocol = getattr(protocols, name)
        for member in members(protocol):
            declared = inspect.getattr_static(protocol, member, None)
            if not inspect.isfunction(declared):
                continue
            actual = getattr(OBJECTS[name], member)
            assert inspect.iscoroutinefunction(declared) == inspect.iscoroutinefunction(actual), member

    def test_session_is_runtime_checkable(self) -> None:
        """``Session`` is a runtime-checkable protocol the reference session satisfies."""
        assert isinstance(OBJECTS["Session"], protocols.Session)

    def test_every_protocol_is_covered(self) -> None:
        """A new protocol in the contract gets a live counterpart here."""
        declared = {
            name
            for name, value in vars(protocols).items()
            if inspect.isclass(value) and Protocol in value.__bases__ and value.__module__ == protocols.__name__
        }
        assert declared - set(PROTOCOLS) == {"ModelAdapter", "ModelRequest", "ContinuableProvider"}
