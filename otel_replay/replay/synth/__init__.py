"""Semantic fidelity: provider-format responses synthesised from a span's GenAI attributes.

The same attributes always give the same bytes; this module dispatches to one module per
provider and times the chunks."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from otel_replay.errors import SourceError
from otel_replay.replay.synth._anthropic import messages_body, messages_events
from otel_replay.replay.synth._chat import chat_body, chat_events
from otel_replay.replay.synth._common import SpanView, label_of, read_span
from otel_replay.replay.synth._responses import responses_body, responses_events

__all__ = ["ENDPOINTS", "Synthesized", "synthesize"]


@dataclass(frozen=True, slots=True)
class Synthesized:
    """A response to serve: status, headers (at least ``content-type``) and body.

    ``chunks`` are ``(size, ns after the request)`` pairs adding up to ``len(body)``, one per
    SSE event for a stream; empty means the body is one chunk at an unknown time.
    """

    status_code: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    chunks: tuple[tuple[int, int], ...]


# endpoint (codec name) -> (JSON body, SSE events) builders
_FORMATS: Mapping[str, tuple[Callable[[SpanView], bytes], Callable[[SpanView], list[bytes]]]] = {
    "openai.chat_completions": (chat_body, chat_events),
    "openai.responses": (responses_body, responses_events),
    "anthropic.messages": (messages_body, messages_events),
}
ENDPOINTS: frozenset[str] = frozenset(_FORMATS)
"""The codec names :func:`synthesize` knows."""

_JSON = "application/json"
_SSE = "text/event-stream; charset=utf-8"
_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"


def synthesize(
    endpoint: str,
    attributes: Mapping[str, Any],
    stream: bool,
    *,
    duration_ns: int | None = None,
) -> Synthesized:
    """The provider response a span's attributes describe, as JSON or as an SSE stream.

    ``endpoint`` is a codec name (``openai.chat_completions``, ``openai.responses``,
    ``anthropic.messages``). ``attributes`` are the span's; content attributes may be JSON
    strings or already decoded. Stream chunks start at ``gen_ai.response.time_to_first_chunk``
    (else 0) and are spread evenly up to ``duration_ns`` (the span's duration) when given; a
    JSON body is one chunk, at ``duration_ns`` when given.

    Raises :class:`SourceError` (one line, naming the span by its conventional name) when the
    endpoint is unknown or ``gen_ai.output.messages`` is absent or malformed.
    """
    builders = _FORMATS.get(endpoint)
    if builders is None:
        label = label_of(attributes)
        raise SourceError(f"span {label!r}: no semantic replay for endpoint {endpoint!r}")
    view = read_span(attributes)
    body_of, events_of = builders
    if not stream:
        body = body_of(view)
        chunks = () if duration_ns is None else ((len(body), max(duration_ns, 0)),)
        return Synthesized(200, (("content-type", _JSON),), body, chunks)
    events = events_of(view)
    times = _times(len(events), _first_chunk_ns(attributes), duration_ns)
    return Synthesized(
        200,
        (("content-type", _SSE),),
        b"".join(events),
        tuple(zip((len(event) for event in events), times, strict=True)),
    )


def _first_chunk_ns(attributes: Mapping[str, Any]) -> int:
    seconds = attributes.get(_FIRST_CHUNK)
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds > 0:
        return round(seconds * 1e9)
    return 0


def _times(count: int, first: int, duration_ns: int | None) -> list[int]:
    last = max(first, duration_ns or 0)
    if count < 2:
        return [first] * count
    return [first + (last - first) * i // (count - 1) for i in range(count)]
