"""The shipped Collector configuration and compose file as data, and the parts of the
Collector the tests apply to spans.

No container engine or Collector binary runs here: a configuration is read with the
Collector's `${env:NAME:-default}` expansion, and the `redaction` processor's handling of
attributes is applied as its `processor.go` does it (see :func:`redact_request`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "collector-config" / "otelcol.yaml"
COMPOSE = ROOT / "docker-compose.yml"
SCHEMAS = Path(__file__).with_name("schemas")

KINDS = ("receivers", "processors", "exporters", "connectors", "extensions")
MASK = "****"

_REFERENCE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def load_config(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``otelcol.yaml`` with its ``${env:NAME:-default}`` references expanded from
    ``environ`` (none set by default), as the Collector expands them: a scalar that is one
    reference takes the value's YAML type (``10`` is a number), one that embeds it stays text.
    """
    document: dict[str, Any] = yaml.safe_load(CONFIG.read_text())
    return expand(document, environ or {})


def expand(value: Any, environ: Mapping[str, str]) -> Any:
    if isinstance(value, dict):
        return {key: expand(item, environ) for key, item in value.items()}
    if isinstance(value, list):
        return [expand(item, environ) for item in value]
    if not isinstance(value, str):
        return value
    whole = _REFERENCE.fullmatch(value)
    if whole is not None:
        return yaml.safe_load(_resolve(whole, environ))
    return _REFERENCE.sub(lambda match: _resolve(match, environ), value)


def _resolve(match: re.Match[str], environ: Mapping[str, str]) -> str:
    name, default = match.group(1), match.group(2)
    if name in environ:
        return environ[name]
    if default is None:
        raise KeyError(f"{name} is not set and has no default")
    return default


def variables() -> dict[str, str | None]:
    """Each variable ``otelcol.yaml`` reads (its comments aside), and its default (None:
    none)."""
    text = json.dumps(yaml.safe_load(CONFIG.read_text()))
    return {m.group(1): m.group(2) for m in _REFERENCE.finditer(text)}


def load_compose() -> dict[str, Any]:
    compose: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return compose


@dataclass(frozen=True)
class Component:
    """One component of a configuration: its kind (``processors``), its id
    (``otlp_grpc/jaeger``) and its settings."""

    kind: str
    id: str
    settings: dict[str, Any]

    @property
    def type(self) -> str:
        return self.id.partition("/")[0]


def components(config: Mapping[str, Any]) -> Iterator[Component]:
    for kind in KINDS:
        for component_id, settings in (config.get(kind) or {}).items():
            yield Component(kind, component_id, settings or {})


@cache
def schema(name: str) -> dict[str, Any]:
    """The JSON Schema ``schemas/NAME.json``: the keys of a component's configuration."""
    loaded: dict[str, Any] = json.loads((SCHEMAS / f"{name}.json").read_text())
    return loaded


def schema_name(component: Component) -> str:
    return f"{component.kind[:-1]}-{component.type}"


def host_port(endpoint: str) -> tuple[str, int]:
    """``host`` and ``port`` of an endpoint ``host:port`` (a scheme and a path allowed)."""
    address = endpoint.split("://", 1)[-1].split("/", 1)[0]
    host, _, port = address.rpartition(":")
    return host, int(port)


# -- the redaction processor ---------------------------------------------------------------


@dataclass(frozen=True)
class Redaction:
    """The ``redaction`` processor's settings this module applies."""

    allow_all_keys: bool
    allowed_keys: frozenset[str]
    ignored_keys: frozenset[str]
    blocked_keys: tuple[re.Pattern[str], ...]
    blocked_values: tuple[re.Pattern[str], ...]
    allowed_values: tuple[re.Pattern[str], ...]

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> Redaction:
        assert settings.get("summary") == "silent", "summaries add attributes; not applied here"
        assert not settings.get("hash_function"), "a masked value is ****, not a hash, here"

        def patterns(key: str) -> tuple[re.Pattern[str], ...]:
            return tuple(re.compile(p) for p in settings.get(key) or ())

        return cls(
            allow_all_keys=bool(settings.get("allow_all_keys")),
            allowed_keys=frozenset(settings.get("allowed_keys") or ()),
            ignored_keys=frozenset(settings.get("ignored_keys") or ()),
            blocked_keys=patterns("blocked_key_patterns"),
            blocked_values=patterns("blocked_values"),
            allowed_values=patterns("allowed_values"),
        )


def redact_request(request: ExportTraceServiceRequest, redaction: Redaction) -> None:
    """Apply the processor to ``request`` in place: the attributes of each resource, span and
    span event, as ``processTraces`` in processor/redactionprocessor/processor.go visits them.
    """
    for resource_spans in request.resource_spans:
        _redact(resource_spans.resource.attributes, redaction)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                _redact(span.attributes, redaction)
                for event in span.events:
                    _redact(event.attributes, redaction)


def _redact(attributes: Any, redaction: Redaction) -> None:
    """``processAttrs``: an ignored key is left alone; a key not allowed is removed; a value
    an allowed pattern matches is left alone; a blocked key's value becomes ``****`` (of any
    type: pdata's ``Str()`` of a number is empty, and ``.*`` masks it); otherwise each match of
    a blocked value pattern in a string becomes ``****``. Go's ``ReplaceAllString`` and
    Python's ``sub`` agree here: the tests check no pattern matches an empty string."""
    removed: list[KeyValue] = []
    for item in attributes:
        key = item.key
        if key in redaction.ignored_keys:
            continue
        if not redaction.allow_all_keys and key not in redaction.allowed_keys:
            removed.append(item)
            continue
        text = item.value.string_value if item.value.HasField("string_value") else ""
        if any(p.search(text) for p in redaction.allowed_values):
            continue
        if any(p.search(key) for p in redaction.blocked_keys):
            item.value.string_value = MASK
            continue
        masked = text
        for pattern in redaction.blocked_values:
            masked = pattern.sub(MASK, masked)
        if masked != text:
            item.value.string_value = masked
    for item in removed:
        attributes.remove(item)
