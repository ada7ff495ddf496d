"""Pure readers of GenAI structured messages (``gen_ai.input.messages`` and friends), for
previews: a part of another shape is skipped, never an error."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from otel_replay._bodies import shown_text
from otel_replay.cli._format import one_line

__all__ = [
    "ToolCall",
    "body_preview",
    "parse_json_list",
    "prompt_preview",
    "response_preview",
    "tool_calls",
]

_MEDIA = ("blob", "uri", "file")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call the model asked for; ``arguments`` as the model gave them."""

    id: str | None
    name: str
    arguments: Any

    def __str__(self) -> str:
        return f"{self.name}({_compact(self.arguments)})"


def parse_json_list(value: Any) -> list[Any]:
    """A span attribute holding a JSON array (a string, or already decoded) as a list;
    ``[]`` when absent or not an array."""
    if isinstance(value, (str, bytes)):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):  # nested deeper than json reads
            return []
    return list(value) if isinstance(value, (list, tuple)) else []


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _parts(message: Any) -> list[Mapping[str, Any]]:
    parts = message.get("parts") if isinstance(message, Mapping) else None
    return [p for p in parts if isinstance(p, Mapping)] if isinstance(parts, list) else []


def _part_text(part: Mapping[str, Any]) -> str | None:
    kind = part.get("type")
    if kind in ("text", "refusal") and isinstance(part.get("content"), str):
        return str(part["content"])
    if kind in _MEDIA:
        return f"[{part.get('modality') or kind}]"
    return None


def _text(message: Any) -> str:
    return " ".join(t for p in _parts(message) if (t := _part_text(p)))


def prompt_preview(messages: list[Any], width: int | None = None) -> str:
    """The last user message's text, and ``[+N tool results]`` when tool results follow it
    (the model's input in a tool loop); ``""`` when there is no user message. With ``width``,
    one line of at most ``width`` characters: the text is cut, never the marker, which is
    what tells a tool loop's steps from the first call on the same message."""
    text = ""
    results = 0
    for message in reversed(messages):
        role = message.get("role") if isinstance(message, Mapping) else None
        if role == "user" and (text := _text(message)):
            break
        results += sum(p.get("type") == "tool_call_response" for p in _parts(message))
    if not results:
        return text if width is None else one_line(text, width)
    suffix = f"[+{results} tool result{'s' if results != 1 else ''}]"
    if text and width is not None:
        text = one_line(text, max(width - len(suffix) - 1, 1))
    return f"{text} {suffix}" if text else suffix


def tool_calls(messages: list[Any]) -> list[ToolCall]:
    """The tool calls in ``messages`` (the model's output), in order."""
    return [
        ToolCall(
            id=str(p["id"]) if p.get("id") is not None else None,
            name=str(p.get("name") or "?"),
            arguments=p.get("arguments"),
        )
        for message in messages
        for p in _parts(message)
        if p.get("type") == "tool_call"
    ]


def response_preview(messages: list[Any]) -> str:
    """The model's answer: its tool calls as ``name(arguments)`` (first: in a one-line
    preview they matter more than the narration around them), then its text."""
    pieces = [str(call) for call in tool_calls(messages)]
    pieces += [t for m in messages if (t := _text(m))]
    return " · ".join(pieces)


def body_preview(body: bytes) -> str:
    """A plain HTTP body for a preview: its text (JSON compacted; see ``shown_text``), or
    ``<N bytes>`` when it is binary; ``""`` when empty."""
    if not body:
        return ""
    text = shown_text(body)
    if text is None:
        return f"<{len(body)} bytes>"
    try:
        return _compact(json.loads(text))
    except (ValueError, RecursionError):  # not JSON, or nested deeper than json reads: text
        return text
