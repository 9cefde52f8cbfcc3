"""M1: the size of the model-facing Team surface, paid on every model step.

The nine Team tools as a model receives them (``{name, description, parameters}``
serialized compactly) plus the ``team:policy`` section text, in UTF-8 bytes.
Goal: at most 6500 bytes (peers spend 7,000-19,000 characters on theirs).

W1: the seven workspace tools (``read_file`` ... ``bash``) measured the same way,
separately, so M1 keeps measuring the Team surface alone. Goal: at most 2600 bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import report  # noqa: E402
from dsh_team_tools.catalog import SURFACE_BUDGET, model_tools, surface_size  # noqa: E402
from dsh_team_tools.policy import POLICY_TEXT  # noqa: E402
from host_spec.host.workspace.config import WorkspaceConfig  # noqa: E402
from host_spec.host.workspace.plugin import Tools  # noqa: E402
from host_spec.schema import compact_json, tool_json_schema  # noqa: E402

WORKSPACE_BUDGET = 2600


def workspace_tools() -> list[dict[str, object]]:
    """The workspace tools as a model receives them (the host is only needed to run them)."""
    specs = Tools(None, WorkspaceConfig()).specs()  # type: ignore[arg-type]
    return [{"name": s.name, "description": s.description, "parameters": tool_json_schema(s.args_type)} for s in specs]


def run() -> list[tuple[str, float, float]]:
    tools = len(compact_json(model_tools()).encode())
    policy = len(POLICY_TEXT.encode())
    size = surface_size()
    print(f"surface: nine tool schemas {tools} B + policy {policy} B = {size} B (budget {SURFACE_BUDGET} B)")
    workspace = len(compact_json(workspace_tools()).encode())
    print(f"surface: seven workspace tool schemas {workspace} B (budget {WORKSPACE_BUDGET} B)")
    return [("M1", size, SURFACE_BUDGET), ("W1", workspace, WORKSPACE_BUDGET)]


if __name__ == "__main__":
    for bench_id, value, goal in run():
        report(bench_id, value, goal)
