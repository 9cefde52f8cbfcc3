"""The scripted ``llm`` plugin, wired for the tests: in-process models and a child process's environment.

A child ``dsh`` finds the plugin the way ``llm`` finds any plugin named in
``LLM_LOAD_PLUGINS``: a distribution with an ``llm`` entry point. Here that
distribution is a ``dist-info`` folder written into a temp directory put on
``PYTHONPATH``, so nothing is installed into the environment. ``LLM_USER_PATH``
points at a temp directory too: a test never reads or writes the user's own
``llm`` keys, aliases or logs.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import llm_scripted_plugin
from llm_scripted_plugin import ScriptedAsync

from host_spec.host.models.llm_adapter import LlmModel
from host_spec.host.models.llm_wire import parse_settings

DIST = "dsh-llm-scripted"
MODULE = "llm_scripted_plugin"
KEY = "sk-llm-test-4f1c9e2a-SECRET"


def write_site(root: Path, *, broken: bool = False) -> Path:
    """A directory holding the plugin module and the ``dist-info`` that names it (``broken``: it fails to import)."""
    site = root / "site"
    site.mkdir(parents=True, exist_ok=True)
    module = MODULE
    if broken:
        module = "llm_broken_plugin"
        (site / f"{module}.py").write_text("import dsh_no_such_dependency  # what a plugin without its deps does\n")
    else:
        shutil.copy(llm_scripted_plugin.__file__, site / f"{module}.py")
    info = site / f"{DIST.replace('-', '_')}-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[llm]\n{DIST} = {module}\n")
    return site


def child_env(root: Path, script: dict[str, Any], *, broken: bool = False, **extra: str) -> dict[str, str]:
    """Environment of a child ``dsh`` whose ``llm`` loads only the scripted plugin."""
    site = write_site(root, broken=broken)
    (root / "script.json").write_text(json.dumps(script))
    env = dict(os.environ)
    for name in ("DSH_DATA_DIR", "OPENAI_BASE_URL", "OPENAI_API_KEY", "DSH_TEST_LLM_KEY"):
        env.pop(name, None)
    env.update({
        "PYTHONPATH": os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "LLM_LOAD_PLUGINS": DIST,
        "LLM_USER_PATH": str(root / "llm-user"),
        "DSH_TEST_LLM_SCRIPT": str(root / "script.json"),
        "DSH_TEST_LLM_LOG": str(root / "llm-requests.jsonl"),
        **extra,
    })
    return env


def logged(root: Path) -> list[dict[str, Any]]:
    """What the plugin was asked (one entry per request, plus ``closed`` markers)."""
    path = root / "llm-requests.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def adapter(script: dict[str, Any], options: str = "", model: Any = None) -> LlmModel:
    """An in-process ``llm:`` adapter around a scripted model (no plugin discovery involved)."""
    settings = parse_settings(f"dsh-scripted{'?' + options if options else ''}")
    return LlmModel(settings, model if model is not None else ScriptedAsync(script))


def step(text: str = "", *calls: tuple[str, Any], usage: tuple[int, int] | None = None,
         details: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """One script step: text, tool calls ``(name, arguments)``, usage ``(input, output)`` and its details."""
    out: dict[str, Any] = {"text": text, "tool_calls": [{"name": n, "arguments": a} for n, a in calls], **extra}
    if usage is not None:
        out["usage"] = {"input": usage[0], "output": usage[1], "details": details}
    return out
