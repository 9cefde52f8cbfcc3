"""Helpers of the trace-export tests: run ``dsh trace export``, read its spans, check it against OTLP itself.

The independent oracle is the OpenTelemetry protobuf schema (``opentelemetry-proto``,
test extra only): :func:`parse_otlp` parses the exported JSON strictly into an
``ExportTraceServiceRequest`` (unknown fields and wrong types fail), after turning
the hex ids into protobuf's base64 bytes -- the one place where OTLP/JSON departs
from protobuf's JSON mapping.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from host_spec.host.cli.main import main
from host_spec.host.demo import PROMPT, SCRIPT

REPO = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "demo_run"
GOLDEN = Path(__file__).resolve().parent / "golden"
#: Generous per-command bound; the demo itself takes about a second.
TIMEOUT_S = 120


def run_demo(data_dir: Path) -> None:
    """The scripted demo through the real ``dsh run`` (as ``make demo`` runs it)."""
    workspace = data_dir / "workspace"
    workspace.mkdir(parents=True)
    argv = [sys.executable, "-m", "host_spec.host.cli.main", "run", "--profile", "agent-teams",
            "--model", f"scripted:{SCRIPT}", "--data-dir", str(data_dir), "--workspace", str(workspace), PROMPT]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=REPO)
    assert result.returncode == 0, result.stderr


def export(data_dir: Path, out: Path, *args: str, **kwargs: Any) -> int:
    """``dsh trace export --data-dir DATA --out OUT ARGS`` in this process; the exit status."""
    return main(["trace", "export", "--data-dir", str(data_dir), "--out", str(out), *args], **kwargs)


def spans(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Every span of an exported document, in its order."""
    return [span for rs in document["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]


def _plain(value: dict[str, Any]) -> Any:
    if "arrayValue" in value:
        return [_plain(item) for item in value["arrayValue"].get("values", [])]
    if "intValue" in value:
        return int(value["intValue"])
    (item,) = value.values()
    return item


def values(item: dict[str, Any]) -> dict[str, Any]:
    """The attributes of a span, event or link as plain Python values."""
    return {pair["key"]: _plain(pair["value"]) for pair in item.get("attributes", [])}


def _hex_to_base64(item: dict[str, Any], *keys: str) -> None:
    for key in keys:
        if key in item:
            item[key] = base64.b64encode(bytes.fromhex(item[key])).decode()


def parse_otlp(data: bytes) -> ExportTraceServiceRequest:
    """The export parsed strictly by protobuf as an ``ExportTraceServiceRequest`` (raises on any mismatch)."""
    document = json.loads(data)
    for span in spans(document):
        _hex_to_base64(span, "traceId", "spanId", "parentSpanId")
        for link in span.get("links", []):
            _hex_to_base64(link, "traceId", "spanId")
    return json_format.ParseDict(document, ExportTraceServiceRequest())
