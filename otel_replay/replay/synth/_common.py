"""What every provider synthesiser reads from a span (:func:`read_span`): its output, ids,
model and token counts, validated once."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from otel_replay.errors import SourceError

__all__ = [
    "SpanView",
    "dumps",
    "label_of",
    "openai_usage",
    "read_span",
    "sse",
    "tool_arguments_text",
]

OUTPUT_MESSAGES = "gen_ai.output.messages"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION = "gen_ai.usage.cache_creation.input_tokens"
REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"


@dataclass(frozen=True, slots=True)
class SpanView:
    """A span's answer, checked: ``messages`` hold ``parts`` lists of dicts.

    ``finish_reasons`` has one entry per message: the wire value from
    ``gen_ai.response.finish_reasons`` when it names one per message, else the message's own
    ``finish_reason``, else ``tool_call`` or ``stop`` from its parts. Providers map either
    vocabulary to theirs. ``digest`` seeds the ids the span does not give, so they are stable.
    """

    label: str
    attributes: Mapping[str, Any]
    messages: tuple[Mapping[str, Any], ...]
    finish_reasons: tuple[str, ...]
    response_id: str | None
    model: str
    digest: str

    def count(self, key: str) -> int | None:
        """An integer attribute (token count), None when absent or not an integer."""
        value = self.attributes.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def text(self, key: str) -> str | None:
        """A non-empty string attribute, else None."""
        value = self.attributes.get(key)
        return value if isinstance(value, str) and value else None

    def parts(self) -> list[Mapping[str, Any]]:
        """The parts of every message in order, for APIs whose response is one message."""
        return [part for message in self.messages for part in message["parts"]]

    def make_id(self, prefix: str, *n: int) -> str:
        """A stable id for something the span does not name: ``prefix``, digest, ``n``."""
        return prefix + self.digest + "".join(f"_{i}" for i in n)


def read_span(attributes: Mapping[str, Any]) -> SpanView:
    """Check a span's output messages and gather what every provider format needs.

    Raises :class:`SourceError` when ``gen_ai.output.messages`` is absent, not JSON, or not
    a non-empty list of messages with ``parts`` lists of objects.
    """
    label = label_of(attributes)
    raw = attributes.get(OUTPUT_MESSAGES)
    if raw is None:
        raise SourceError(
            f"span {label!r} has no {OUTPUT_MESSAGES}: it cannot be replayed semantically"
        )
    messages = _messages(raw, label)
    declared = _string_list(attributes.get("gen_ai.response.finish_reasons"))
    if len(declared) != len(messages):
        declared = [_own_finish_reason(message) for message in messages]
    canonical = json.dumps(messages, sort_keys=True, separators=(",", ":"), default=str)
    response_id = attributes.get("gen_ai.response.id")
    model = attributes.get("gen_ai.response.model") or attributes.get("gen_ai.request.model")
    return SpanView(
        label=label,
        attributes=attributes,
        messages=tuple(messages),
        finish_reasons=tuple(declared),
        response_id=response_id if isinstance(response_id, str) and response_id else None,
        model=model if isinstance(model, str) else "unknown",
        digest=hashlib.sha256(canonical.encode()).hexdigest()[:24],
    )


def label_of(attributes: Mapping[str, Any]) -> str:
    """The span's name as the conventions build it (``chat gpt-4o``), for messages."""
    # The span name the conventions prescribe; the span's own name is not among its attributes.
    operation = attributes.get("gen_ai.operation.name") or "chat"
    model = attributes.get("gen_ai.request.model") or attributes.get("gen_ai.response.model")
    return f"{operation} {model}" if model else str(operation)


def _messages(raw: Any, label: str) -> list[Mapping[str, Any]]:
    def malformed(why: str) -> SourceError:
        return SourceError(f"span {label!r} has a malformed {OUTPUT_MESSAGES}: {why}")

    if isinstance(raw, (str, bytes)):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise malformed("not JSON") from None
    if not isinstance(raw, (list, tuple)):
        raise malformed(f"a JSON {type(raw).__name__}, not a list of messages")
    if not raw:
        raise malformed("an empty list")
    for i, message in enumerate(raw):
        if not isinstance(message, Mapping):
            raise malformed(f"message {i} is not an object")
        parts = message.get("parts")
        if not isinstance(parts, (list, tuple)):
            raise malformed(f"message {i} has no parts list")
        if not all(isinstance(part, Mapping) for part in parts):
            raise malformed(f"message {i} has a part that is not an object")
    return list(raw)


def _string_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    return []


def _own_finish_reason(message: Mapping[str, Any]) -> str:
    reason = message.get("finish_reason")
    if isinstance(reason, str) and reason:
        return reason
    calls = any(part.get("type") == "tool_call" for part in message["parts"])
    return "tool_call" if calls else "stop"


def dumps(value: Any) -> bytes:
    """Compact JSON bytes; ASCII-only, so any text (even lone surrogates) encodes."""
    return json.dumps(value, separators=(",", ":")).encode()


def sse(data: bytes, event: str | None = None) -> bytes:
    """One Server-Sent Event carrying ``data`` (one line of JSON), named when ``event`` is."""
    head = b"event: " + event.encode() + b"\n" if event else b""
    return head + b"data: " + data + b"\n\n"


def tool_arguments_text(arguments: Any) -> str:
    """Tool-call arguments as the JSON text OpenAI sends: a string stays as recorded."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)


# Token-detail fields of OpenAI's usage objects (Chat and Responses name them alike), by the
# attribute each comes from.
_INPUT_DETAILS: tuple[tuple[str, str], ...] = (
    ("cached_tokens", CACHE_READ),
    ("cache_write_tokens", CACHE_CREATION),
    ("text_tokens", "gen_ai.usage.text.input_tokens"),
    ("audio_tokens", "gen_ai.usage.audio.input_tokens"),
    ("image_tokens", "gen_ai.usage.image.input_tokens"),
)
_OUTPUT_DETAILS: tuple[tuple[str, str], ...] = (
    ("reasoning_tokens", REASONING_TOKENS),
    ("text_tokens", "gen_ai.usage.text.output_tokens"),
    ("audio_tokens", "gen_ai.usage.audio.output_tokens"),
)


def openai_usage(
    view: SpanView, input_key: str, output_key: str, *, always: bool
) -> dict[str, Any] | None:
    """An OpenAI ``usage`` object from the token attributes, None when the span has none.

    Detail fields appear only when their attribute does, except that ``always`` (the
    Responses API, whose SDK types require them) fills ``cached_tokens`` and
    ``reasoning_tokens`` with 0.
    """
    prompt, completion = view.count(INPUT_TOKENS), view.count(OUTPUT_TOKENS)
    if prompt is None and completion is None:
        return None
    usage: dict[str, Any] = {input_key: prompt or 0, output_key: completion or 0}
    usage["total_tokens"] = (prompt or 0) + (completion or 0)
    for details_key, fields, required in (
        (input_key + "_details", _INPUT_DETAILS, "cached_tokens"),
        (output_key + "_details", _OUTPUT_DETAILS, "reasoning_tokens"),
    ):
        details: dict[str, int] = {}
        for name, key in fields:
            value = view.count(key)
            if value is not None:
                details[name] = value
        if always:
            details.setdefault(required, 0)
        if details:
            usage[details_key] = details
    return usage
