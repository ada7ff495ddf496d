"""The JSON Schema of a bundle's ``bundle.json`` (see :mod:`._bundle`), checked with
``otel_replay._schema`` (Draft 2020-12) before anything in a bundle is read."""

from __future__ import annotations

from typing import Any

__all__ = ["FORMAT", "SCHEMA"]

FORMAT = "otel-replay bundle"

# Bounds of the manifest's numbers: what a step index can name (a body file's name has at most
# nine digits) and what a span's nanoseconds (int64 everywhere OTLP and SQLite keep them) hold.
_INDEX: dict[str, Any] = {"type": "integer", "minimum": 0, "maximum": 999_999_999}
_NS: dict[str, Any] = {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}

_ATTRIBUTE = {
    "anyOf": [
        {"type": ["string", "number", "boolean"]},
        {"type": "array", "items": {"type": ["string", "number", "boolean"]}},
    ]
}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["format", "version", "run", "steps"],
    "properties": {
        "format": {"const": FORMAT},
        "version": {"type": "integer"},
        "run": {
            "type": "object",
            "required": ["id"],
            "properties": {
                "id": {"type": "string", "minLength": 1, "maxLength": 256},
                "commit": {"type": ["string", "null"]},
                "seed": {"type": ["integer", "null"], "minimum": -(2**63), "maximum": 2**63 - 1},
                "code_dirty": {"type": ["boolean", "null"]},
                "start_ns": {"anyOf": [_NS, {"type": "null"}]},
                "resource": {"type": "object", "additionalProperties": _ATTRIBUTE},
                "status": {"enum": ["ok", "error", "incomplete"]},
                "error_type": {"type": ["string", "null"], "maxLength": 1000},
            },
            "additionalProperties": False,
        },
        "steps": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["index", "kind", "endpoint", "method", "response", "fidelity"],
                "properties": {
                    "index": _INDEX,
                    "kind": {"type": "string"},
                    "endpoint": {"type": "string"},
                    "method": {"type": "string"},
                    "url": {"type": ["string", "null"]},
                    "request": {"type": ["string", "null"]},
                    "request_hash": {"type": ["string", "null"]},
                    "status_code": {"type": ["integer", "null"], "minimum": 100, "maximum": 999},
                    "response_headers": {
                        "type": "array",
                        "items": {
                            "type": "array",
                            "prefixItems": [{"type": "string"}, {"type": "string"}],
                            "minItems": 2,
                            "maxItems": 2,
                        },
                    },
                    "response": {"type": "string"},
                    "fidelity": {"enum": ["exact", "semantic"]},
                    "chunks": {
                        "type": "array",
                        "items": {
                            "type": "array",
                            "prefixItems": [_NS, _NS],
                            "minItems": 2,
                            "maxItems": 2,
                        },
                    },
                    "complete": {"type": "boolean"},
                    "error_type": {"type": ["string", "null"]},
                    "provider": {"type": ["string", "null"]},
                    "model": {"type": ["string", "null"]},
                    "prompt_hash": {"type": ["string", "null"]},
                    "tool_schema_version": {"type": ["string", "null"]},
                    "duration_ns": _NS,
                    "attributes": {"type": "object", "additionalProperties": _ATTRIBUTE},
                    "within": {"anyOf": [_INDEX, {"type": "null"}]},
                    "start_ns": {"anyOf": [_NS, {"type": "null"}]},
                },
                "additionalProperties": False,
            },
        },
    },
}
