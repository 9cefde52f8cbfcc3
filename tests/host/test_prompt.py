"""PromptRegistry: ordered, layered system-prompt sections."""

from __future__ import annotations

import pytest

from _agent_kit import make_kit, memory_session
from host_spec.errors import RegistrationError
from host_spec.host.agents.prompt import PromptRegistry
from host_spec.host.agents.scope import Scope, ScopeDisposedError
from host_spec.records import PromptSection


def _agents():
    kit = make_kit()
    return kit.registry.create(memory_session("a"), name="a"), kit.registry.create(memory_session("b"), name="b")


class TestRender:
    def test_sections_join_in_ascending_order(self) -> None:
        """Order slots decide placement, not registration order."""
        prompts = PromptRegistry()
        prompts.register(PromptSection("policy", 60, "Team policy."))
        prompts.register(PromptSection("identity", -100, "You are an agent."))
        prompts.register(PromptSection("tools", 150, "Tool guidance."))
        assert prompts.render(None) == "You are an agent.\n\nTeam policy.\n\nTool guidance."

    def test_ties_keep_registration_order(self) -> None:
        """Equal orders render in the order they were registered."""
        prompts = PromptRegistry()
        for name in ("z", "a", "m"):
            prompts.register(PromptSection(name, 0, name.upper()))
        assert prompts.render(None) == "Z\n\nA\n\nM"

    def test_empty_sections_are_dropped(self) -> None:
        """Empty or whitespace-only text leaves no blank gap."""
        prompts = PromptRegistry()
        prompts.register(PromptSection("a", 0, "A"))
        prompts.register(PromptSection("empty", 1, ""))
        prompts.register(PromptSection("blank", 2, lambda agent: "  \n"))
        prompts.register(PromptSection("b", 3, "B"))
        assert prompts.render(None) == "A\n\nB"

    def test_callable_text_receives_the_agent(self) -> None:
        """A dynamic section renders per agent."""
        a, b = _agents()
        prompts = PromptRegistry()
        prompts.register(PromptSection("who", 0, lambda agent: f"You are {agent.name}."))
        assert prompts.render(a) == "You are a."
        assert prompts.render(b) == "You are b."

    def test_failing_callable_is_dropped(self) -> None:
        """A broken section does not stop the prompt from rendering."""
        prompts = PromptRegistry()

        def boom(agent: object) -> str:
            raise RuntimeError("broken plugin")

        prompts.register(PromptSection("bad", 0, boom))
        prompts.register(PromptSection("good", 1, "ok"))
        assert prompts.render(None) == "ok"


class TestLayers:
    def test_scope_section_shadows_global_for_that_agent_only(self) -> None:
        """An agent-scope section replaces the same-named global one, for that agent."""
        a, b = _agents()
        prompts = PromptRegistry()
        prompts.register(PromptSection("persona", 0, "global persona"))
        prompts.register(PromptSection("persona", 0, "scoped persona"), scope=a.scope)
        assert prompts.render(a) == "scoped persona"
        assert prompts.render(b) == "global persona"

    def test_duplicate_in_one_layer_raises(self) -> None:
        """Same name, same layer: a registration error, nothing replaced."""
        prompts = PromptRegistry()
        scope = Scope(label="agent:x")
        prompts.register(PromptSection("p", 0, "one"))
        prompts.register(PromptSection("p", 0, "scoped"), scope=scope)
        with pytest.raises(RegistrationError) as info:
            prompts.register(PromptSection("p", 1, "two"))
        assert info.value.code == "ALREADY_REGISTERED"
        with pytest.raises(RegistrationError):
            prompts.register(PromptSection("p", 1, "two"), scope=scope)
        assert prompts.render(None) == "one"

    def test_handle_dispose_removes_the_section(self) -> None:
        """Disposing the handle unregisters; a new registration under the name is then allowed."""
        prompts = PromptRegistry()
        handle = prompts.register(PromptSection("p", 0, "one"))
        handle.dispose()
        assert prompts.render(None) == ""
        prompts.register(PromptSection("p", 0, "two"))
        handle.dispose()  # idempotent: must not remove the newer section
        assert prompts.render(None) == "two"

    def test_scope_disposal_removes_scoped_sections(self) -> None:
        """Scoped sections die with their scope and the empty layer is reclaimed."""
        a, _ = _agents()
        prompts = PromptRegistry()
        prompts.register(PromptSection("s", 0, "scoped"), scope=a.scope)
        assert prompts.render(a) == "scoped"
        a.scope.dispose()
        assert prompts.render(a) == ""
        assert prompts.scoped_count() == 0
        with pytest.raises(ScopeDisposedError):
            prompts.register(PromptSection("s2", 0, "late"), scope=a.scope)

    def test_sections_lists_render_order(self) -> None:
        """``sections`` exposes the merged, ordered sections without rendering."""
        prompts = PromptRegistry()
        prompts.register(PromptSection("b", 2, "B"))
        prompts.register(PromptSection("a", 1, "A"))
        assert [s.name for s in prompts.sections(None)] == ["a", "b"]
