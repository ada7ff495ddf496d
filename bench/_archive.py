"""The Collector file exporter's archive of spans, for the store benchmarks (imported, not run).

The Collector's ``file`` exporter writes each batch it receives as one line of OTLP JSON
(``{"resourceSpans": ...}``: camelCase keys, hex ids, 64-bit integers as strings) and
compresses the file with zstd. :func:`otlp_json` writes the spans the same way, in the order
they ended, 512 to a line (the SDK batch processor's batch); :func:`archive_sizes` compresses
it as ``zstd -3`` and ``zstd -19 --long`` do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import zstandard

BATCH = 512
_KINDS = {"INTERNAL": 1, "SERVER": 2, "CLIENT": 3, "PRODUCER": 4, "CONSUMER": 5}
_STATUS = {"UNSET": 0, "OK": 1, "ERROR": 2}


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": str(value)}


def _attributes(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _value(value)} for key, value in attrs.items()]


def _span(span: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"traceId": span["trace_id"], "spanId": span["span_id"]}
    if span.get("parent_span_id"):
        out["parentSpanId"] = span["parent_span_id"]
    out["flags"] = 256
    out["name"] = span["name"]
    out["kind"] = _KINDS.get(span.get("kind") or "INTERNAL", 1)
    out["startTimeUnixNano"] = str(span["start_ns"])
    out["endTimeUnixNano"] = str(span["end_ns"])
    if span.get("attributes"):
        out["attributes"] = _attributes(span["attributes"])
    if span.get("events"):
        out["events"] = [
            {
                "timeUnixNano": str(e["time_ns"]),
                "name": e["name"],
                **({"attributes": _attributes(e["attributes"])} if e.get("attributes") else {}),
            }
            for e in span["events"]
        ]
    status = span.get("status") or {}
    code = _STATUS.get(status.get("code") or "UNSET", 0)
    out["status"] = {
        "code": code,
        **({"message": status["message"]} if status.get("message") else {}),
    }
    return out


def otlp_json(spans: list[Mapping[str, Any]]) -> bytes:
    """The spans (the store's dicts, ``export._encode.span_to_dict``) as the Collector's file
    exporter writes them: one ``resourceSpans`` line per batch of :data:`BATCH`."""
    lines = []
    for start in range(0, len(spans), BATCH):
        groups: dict[str, dict[str, list[dict[str, Any]]]] = {}
        resources: dict[str, Mapping[str, Any]] = {}
        for span in spans[start : start + BATCH]:
            resource = span.get("resource") or {}
            key = json.dumps(resource, sort_keys=True)
            resources[key] = resource
            scope = span.get("scope")
            name = scope.get("name") if isinstance(scope, Mapping) else scope
            groups.setdefault(key, {}).setdefault(str(name or ""), []).append(_span(span))
        batch = {
            "resourceSpans": [
                {
                    "resource": {"attributes": _attributes(resources[key])},
                    "scopeSpans": [
                        {"scope": {"name": name}, "spans": items} for name, items in scopes.items()
                    ],
                }
                for key, scopes in groups.items()
            ]
        }
        lines.append(json.dumps(batch, ensure_ascii=False, separators=(",", ":")).encode())
    return b"\n".join(lines) + b"\n"


def archive_sizes(data: bytes) -> dict[str, int]:
    """Bytes of ``data`` raw, ``zstd -3`` and ``zstd -19 --long`` (a 128 MiB window)."""
    long = zstandard.ZstdCompressionParameters.from_level(19, window_log=27, enable_ldm=True)
    return {
        "raw": len(data),
        "zstd -3": len(zstandard.ZstdCompressor(level=3).compress(data)),
        "zstd -19 --long": len(zstandard.ZstdCompressor(compression_params=long).compress(data)),
    }
