"""The ``openai:`` model spec: ``openai:MODEL[?key=value&...]``, parsed and checked.

Options (all optional)::

    tools=native|constrained   how tools reach the model (default native)
    base_url=URL               server root (default $OPENAI_BASE_URL, else the OpenAI API)
    api_key_env=NAME           variable holding the key (default OPENAI_API_KEY;
                               empty: the server needs no key)
    stream=true|false          stream the reply (default true)
    retries=N                  retries on rate limits and transient failures (0..10, default 3)
    backoff=SECONDS            first retry delay, doubled per retry (default 1.0)
    timeout=SECONDS            per-request timeout (default 600)
    max_tokens=N               reply token limit
    temperature=T              sampling temperature
    first_tool=NAME|any        the conversation's first step must call this tool (any: some tool)
    max_tool_steps=N           after N tool-calling steps in a conversation the model may only answer
    max_answer_chars=N         constrained mode: the schema caps a text answer at N characters
    context=N                  the model's context window in tokens (the host compacts near it)

The last three keep a very small model (the bundled 135M one) on rails: it starts
with a real tool call and cannot loop on tools forever.

The key itself can never be part of a spec: specs are written to run records and
descriptors, keys only ever live in the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final
from urllib.parse import parse_qsl, urlsplit

import attrs


from host_spec.host.models.openai_wire import ToolMode
from host_spec.host.redaction import redact_url
from host_spec.host.models.retries import spec_error, spec_number

__all__ = ["OpenAISettings", "parse_settings", "DEFAULT_KEY_ENV", "BASE_URL_ENV"]

DEFAULT_KEY_ENV: Final = "OPENAI_API_KEY"
BASE_URL_ENV: Final = "OPENAI_BASE_URL"
_SECRET_KEYS: Final = frozenset({"api_key", "key", "token", "password", "secret"})
_BOOLS: Final = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


@attrs.frozen
class OpenAISettings:
    """A checked ``openai:`` spec (no secret in it)."""

    model: str
    tools: ToolMode = "native"
    base_url: str | None = None
    api_key_env: str = DEFAULT_KEY_ENV
    stream: bool = True
    retries: int = 3
    backoff: float = 1.0
    timeout: float = 600.0
    max_tokens: int | None = None
    temperature: float | None = None
    first_tool: str | None = None
    max_tool_steps: int | None = None
    max_answer_chars: int | None = None
    context: int | None = None


def _check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise spec_error(f"base URL {redact_url(url)!r} must be an http:// or https:// URL")
    if parts.username or parts.password:
        raise spec_error("base URL must not carry credentials; put the key in the variable named by api_key_env")
    return url


def parse_settings(argument: str, *, environ: Mapping[str, str] | None = None) -> OpenAISettings:
    """Parse the part after ``openai:``; ``$OPENAI_BASE_URL`` fills a missing ``base_url``.

    Raises:
        ModelError: ``MODEL_SPEC_INVALID`` naming the bad option (an unknown key, a
            bad value, a secret in the spec, no model name).
    """
    env = os.environ if environ is None else environ
    model, _, query = argument.partition("?")
    if not model:
        raise spec_error("openai spec needs a model name: openai:MODEL")
    values: dict[str, object] = {}
    for key, text in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if key in _SECRET_KEYS:
            raise spec_error(f"openai spec option {key!r} is refused: keys are read from an environment variable (api_key_env=NAME)")
        if key == "tools":
            if text not in ("native", "constrained"):
                raise spec_error(f"openai spec option tools={text!r} must be native or constrained")
            values[key] = text
        elif key == "base_url":
            values[key] = _check_url(text)
        elif key in ("api_key_env", "first_tool"):
            values[key] = text
        elif key in ("max_answer_chars", "context"):
            values[key] = int(spec_number("openai", key, text, int, 1, 100_000_000))
        elif key == "max_tool_steps":
            values[key] = int(spec_number("openai", key, text, int, 0, 1_000_000))
        elif key == "stream":
            if text.lower() not in _BOOLS:
                raise spec_error(f"openai spec option stream={text!r} must be true or false")
            values[key] = _BOOLS[text.lower()]
        elif key == "retries":
            values[key] = int(spec_number("openai", key, text, int, 0, 10))
        elif key == "max_tokens":
            values[key] = int(spec_number("openai", key, text, int, 1, 10_000_000))
        elif key in ("backoff", "timeout", "temperature"):
            high = {"backoff": 60.0, "timeout": 86_400.0, "temperature": 2.0}[key]
            values[key] = float(spec_number("openai", key, text, float, 0.0, high))
        else:
            raise spec_error(f"unknown openai spec option {key!r} (known: tools, base_url, api_key_env, stream, "
                       "retries, backoff, timeout, max_tokens, temperature, first_tool, max_tool_steps, max_answer_chars, "
                       "context)")
    if "base_url" not in values and env.get(BASE_URL_ENV):
        values["base_url"] = _check_url(env[BASE_URL_ENV])
    return OpenAISettings(model=model, **values)  # type: ignore[arg-type]  # each value was converted for its key above
