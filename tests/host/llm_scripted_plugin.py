"""An ``llm`` plugin for the tests: scripted models, no network (stands alone: no dsh import).

Registered the way a real plugin is (``@llm.hookimpl register_models``): in a
child process through a temp ``dist-info`` named by ``LLM_LOAD_PLUGINS`` (see
``kit_llm.py``); in-process the model classes are built directly.

Script (JSON file named by ``$DSH_TEST_LLM_SCRIPT``, or ``script=`` in-process)::

    {"[lead]": [step, ...], "[alice]": [step, ...]}

The conversation's *first* user message picks the list (the first key it
contains); the step is the number of assistant messages already in the history,
so the position survives a restart exactly like the conversation does. A step::

    {"text": "...", "chunks": 3, "tool_calls": [{"name", "arguments": {...} or "raw"}],
     "usage": {"input": 9, "output": 2, "details": {...}}, "sleep": 30,
     "error": {"status": 429, "message": "...", "retry_after": "0"} | {"kind": "timeout"} | {"kind": "model"},
     "error_times": 2}

``error_times`` fails only the first N requests of that step (counted per model object).

A key ``"@TEXT": [step]`` answers a request whose newest user message since the
last assistant message containing any such ``TEXT`` (a chat line) contains this one. An exhausted list answers ``done``. Every request is appended to
``$DSH_TEST_LLM_LOG`` (one JSON line: model, tag, step, message roles, tool names,
options, a digest of the key) so a test can see what ``llm`` was given, and a step cut short by a
cancel logs ``{"closed": step}``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from typing import Any

import llm
from llm.parts import StreamEvent

REQUESTS: list[dict[str, Any]] = []


class ProviderStatusError(Exception):
    """What provider SDKs raise: an HTTP status and a response with headers."""

    def __init__(self, status_code: int, message: str, retry_after: str | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.response = type("Response", (), {"headers": {"retry-after": retry_after} if retry_after else {},
                                               "status_code": status_code})()


class APITimeoutError(Exception):
    """Named like the SDKs' timeout errors (matched by class name)."""


def _text(message: Any) -> str:
    return "".join(getattr(part, "text", "") or "" for part in message.parts)


def _log(entry: dict[str, Any]) -> None:
    REQUESTS.append(entry)
    path = os.environ.get("DSH_TEST_LLM_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")


class _Scripted:
    """The script runner both async model kinds share."""

    model_id = "dsh-scripted"
    can_stream = True
    supports_tools = True

    class Options(llm.Options):
        temperature: float | None = None

    def __init__(self, script: dict[str, list[dict[str, Any]]] | None = None) -> None:
        self._script = script
        self.attempts: dict[tuple[str, int], int] = {}

    def script(self) -> dict[str, list[dict[str, Any]]]:
        if self._script is not None:
            return self._script
        with open(os.environ["DSH_TEST_LLM_SCRIPT"], encoding="utf-8") as handle:
            return json.load(handle)

    def pick(self, prompt: Any) -> tuple[str, int, dict[str, Any] | None]:
        messages = prompt.messages
        first = next((_text(m) for m in messages if m.role == "user"), "")
        script = self.script()
        tag = next((key for key in script if not key.startswith("@") and key in first), "")
        index = sum(1 for m in messages if m.role == "assistant")
        answered = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
        # "@TEXT": the answer to the newest unanswered user line containing TEXT (a Team brief may follow it).
        for message in reversed(messages[answered + 1:]):
            for key, steps in script.items():
                if message.role == "user" and key.startswith("@") and key[1:] in _text(message):
                    return tag, index, steps[0]
        steps = script.get(tag, [])
        return tag, index, steps[index] if index < len(steps) else None

    async def run(self, prompt: Any, stream: bool, response: Any, key: str | None) -> Any:
        tag, index, step = self.pick(prompt)
        _log({"model": self.model_id, "tag": tag, "step": index, "stream": stream,
              "roles": [m.role for m in prompt.messages], "tools": [t.name for t in prompt.tools],
              "options": prompt.options.model_dump(exclude_none=True),
              "key_sha": hashlib.sha256(key.encode()).hexdigest()[:12] if key else None,
              "parts": [[type(p).__name__ for p in m.parts] for m in prompt.messages]})
        step = step or {"text": "done"}
        error = step.get("error")
        tries = self.attempts[(tag, index)] = self.attempts.get((tag, index), 0) + 1
        if error is not None and tries <= int(step.get("error_times", 1_000_000)):
            if error.get("kind") == "timeout":
                raise APITimeoutError("the request timed out")
            if error.get("kind") == "model":
                raise llm.ModelError(error.get("message", "the model refused"))
            raise ProviderStatusError(error["status"], error.get("message", "failed"), error.get("retry_after"))
        text = step.get("text", "")
        pieces = max(1, int(step.get("chunks", 1)))
        size = max(1, -(-len(text) // pieces)) if text else 1
        try:
            for start in range(0, len(text), size):
                yield StreamEvent(type="text", chunk=text[start:start + size])
                await asyncio.sleep(0)
                if step.get("sleep"):
                    await asyncio.sleep(float(step["sleep"]))
            for number, call in enumerate(step.get("tool_calls") or []):
                call_id = f"tc-{tag.strip('[]')}-{index}-{number}"
                arguments = call.get("arguments", {})
                yield StreamEvent(type="tool_call_name", chunk=call["name"], tool_call_id=call_id)
                yield StreamEvent(type="tool_call_args", chunk=json.dumps(arguments), tool_call_id=call_id)
                response.add_tool_call(llm.ToolCall(name=call["name"], arguments=arguments, tool_call_id=call_id))
        except BaseException:
            _log({"closed": index, "tag": tag})
            raise
        usage = step.get("usage")
        if usage is not None:
            response.set_usage(input=usage.get("input"), output=usage.get("output"), details=usage.get("details"))


class ScriptedAsync(_Scripted, llm.AsyncModel):
    async def execute(self, prompt: Any, stream: bool, response: Any, conversation: Any) -> Any:
        async for event in self.run(prompt, stream, response, None):
            yield event


class KeyedAsync(_Scripted, llm.AsyncKeyModel):
    """Needs a key, like a hosted model: ``llm keys set dshtest`` or ``$DSH_TEST_LLM_KEY``."""

    model_id = "dsh-keyed"
    needs_key = "dshtest"
    key_env_var = "DSH_TEST_LLM_KEY"

    async def execute(self, prompt: Any, stream: bool, response: Any, conversation: Any, key: str | None) -> Any:
        async for event in self.run(prompt, stream, response, key):
            yield event


class NoToolsAsync(ScriptedAsync):
    model_id = "dsh-notools"
    supports_tools = False


class SyncOnly(llm.Model):
    """A sync twin (every registration needs a sync model); never asked for anything."""

    can_stream = False

    def __init__(self, model_id: str) -> None:
        self.model_id = model_id

    def execute(self, prompt: Any, stream: bool, response: Any, conversation: Any) -> Any:
        yield "sync"


class SyncScripted(_Scripted, llm.Model):
    """A sync-only model (``dsh-synconly``), like many local-model plugins: runs the script in its thread."""

    model_id = "dsh-synconly"

    def execute(self, prompt: Any, stream: bool, response: Any, conversation: Any) -> Any:
        tag, index, step = self.pick(prompt)
        _log({"model": self.model_id, "tag": tag, "step": index, "stream": stream, "thread": True,
              "roles": [m.role for m in prompt.messages], "tools": [t.name for t in prompt.tools]})
        step = step or {"text": "done"}
        error = step.get("error")
        if error is not None:
            raise ProviderStatusError(error["status"], error.get("message", "failed"))
        try:
            for number, piece in enumerate((step.get("text") or "").split(" ")):
                if step.get("sleep"):
                    time.sleep(float(step["sleep"]))
                yield piece if number == 0 else " " + piece
        except GeneratorExit:
            _log({"closed": index, "tag": tag, "thread": True})
            raise
        for number, call in enumerate(step.get("tool_calls") or []):
            response.add_tool_call(llm.ToolCall(name=call["name"], arguments=call.get("arguments", {}),
                                                tool_call_id=f"tc-sync-{index}-{number}"))
        usage = step.get("usage")
        if usage is not None:
            response.set_usage(input=usage.get("input"), output=usage.get("output"))


@llm.hookimpl
def register_models(register: Any) -> None:
    register(SyncOnly("dsh-scripted"), ScriptedAsync(), aliases=("dshs",))
    register(SyncOnly("dsh-keyed"), KeyedAsync())
    register(SyncOnly("dsh-notools"), NoToolsAsync())
    register(SyncScripted())
