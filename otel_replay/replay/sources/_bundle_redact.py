"""What ``otel-replay export`` passes through the redaction rules again before a bundle is
written: a run's step facts, span attributes and chunk boundaries."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from otel_replay.redact import REDACTED, Redactor
from otel_replay.replay._model import Run

__all__ = ["attributes", "endpoint", "learn", "rechunked", "text"]

_URL_STARTS = ("http://", "https://", "/")


def learn(run: Run, redactor: Redactor) -> None:
    """Teach ``redactor`` every credential ``run`` holds in a header, an attribute named for
    one (or holding an auth scheme's value), a URL's query or user-info."""
    for attrs in (run.resource, *(recorded.attributes for recorded in run.steps)):
        redactor.learn(_pairs(attrs), "")
        for value in _strings(attrs):
            if value.startswith(_URL_STARTS):
                redactor.learn((), value)
    for recorded in run.steps:
        pairs = [(_bytes(k), _bytes(v)) for k, v in recorded.step.response_headers]
        redactor.learn(pairs, recorded.step.url or "")
        redactor.learn((), recorded.endpoint.partition(" ")[2])


def attributes(values: Mapping[str, Any], redactor: Redactor) -> dict[str, Any]:
    """Span attributes as JSON: a credential's (by its name or value) redacted whole, URLs as
    URLs, other strings as bodies are."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, str):
            out[key] = _attribute(key, value, redactor)
        elif isinstance(value, list | tuple):
            out[key] = [_attribute(key, v, redactor) if isinstance(v, str) else v for v in value]
        elif isinstance(value, bool | int | float):
            out[key] = value
    return out


def endpoint(value: str, redactor: Redactor) -> str:
    """A step's endpoint (an HTTP call's ``METHOD /path?query``) redacted, its query too."""
    method, space, path = value.partition(" ")
    if space and path.startswith("/") and "?" in path:
        value = f"{method} {redactor.url(path)}"
    return text(value, redactor)


def text(value: str, redactor: Redactor) -> str:
    """``value`` redacted as a body is (the same object when nothing changed)."""
    data = value.encode("utf-8", "surrogatepass")
    redacted = redactor.body(data)
    return value if redacted is data else redacted.decode("utf-8", "replace")


def rechunked(
    body: bytes,
    chunks: Sequence[tuple[int, int]],
    redacted: bytes,
    redactor: Redactor,
    stream: bool,
) -> list[tuple[int, int]]:
    """``chunks`` of ``body`` as pieces of ``redacted``: each boundary moves to where the
    redacted prefix before it ends; a boundary inside something redacted (the prefix does not
    redact to a prefix of the whole) goes, its piece joining the next."""
    out: list[tuple[int, int]] = []
    end = start = 0
    for size, at in chunks:
        end += size
        prefix = redactor.body(body[:end], stream=stream)
        if end < len(body) and not redacted.startswith(prefix):
            continue
        stop = len(redacted) if end >= len(body) else len(prefix)
        out.append((stop - start, at))
        start = stop
    if start < len(redacted):  # nothing recorded the rest's time: it came with the last
        size, at = out.pop() if out else (0, 0)
        out.append((size + len(redacted) - start, at))
    return out


def _attribute(key: str, value: str, redactor: Redactor) -> str:
    # Named like a credential header (api_key, …authorization) or holding "Bearer …".
    if redactor.headers([(_bytes(key), _bytes(value))])[0][1] == REDACTED:
        return REDACTED
    if value.startswith(_URL_STARTS):
        value = redactor.url(value)
    elif key.endswith(".query") and value:  # url.query holds a query without its "?"
        value = redactor.url(f"?{value}")[1:]
    return text(value, redactor)


def _pairs(values: Mapping[str, Any]) -> Iterator[tuple[bytes, bytes]]:
    for key, value in values.items():
        for item in value if isinstance(value, list | tuple) else (value,):
            if isinstance(item, str):
                yield _bytes(key), _bytes(item)


def _strings(values: Mapping[str, Any]) -> Iterator[str]:
    for value in values.values():
        for item in value if isinstance(value, list | tuple) else (value,):
            if isinstance(item, str):
                yield item


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")
