"""The response side of the OpenAI Responses codec: output items, responses, stream assembly."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from opentelemetry.util.types import AttributeValue

from otel_replay.codecs._openai_common import (
    FINISH_REASONS,
    RESPONSE_ID,
    RESPONSE_MODEL,
    RESPONSE_SERVICE_TIER,
    content_parts,
    error_type_of,
    parse_arguments,
    put_str,
    usage_attributes,
)
from otel_replay.codecs._sse import SseEvent, parse_sse
from otel_replay.codecs._types import LlmResponse, Message, Part

__all__ = ["from_response", "from_stream", "item_parts"]

# Provider-run tools: output item type -> (tool name, fields holding the tool's result).
_SERVER_TOOLS: dict[str, tuple[str, tuple[str, ...]]] = {
    "web_search_call": ("web_search", ()),
    "file_search_call": ("file_search", ("results",)),
    "code_interpreter_call": ("code_interpreter", ("outputs",)),
    "image_generation_call": ("image_generation", ("result",)),
    "mcp_call": ("mcp", ("output", "error")),
}
# Output items that wait for the client to act: a completed response holding one of them
# finished to call a tool.
_CLIENT_CALLS = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "computer_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
        "mcp_approval_request",
    }
)
_INCOMPLETE_REASONS = {"max_output_tokens": "length", "content_filter": "content_filter"}
_TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})
_SNAPSHOT_EVENTS = frozenset({"response.created", "response.in_progress", "response.queued"})
# Stream delta events -> (piece kind, the event field indexing within the item).
_DELTAS: dict[str, tuple[str, str | None]] = {
    "response.output_text.delta": ("text", "content_index"),
    "response.refusal.delta": ("refusal", "content_index"),
    "response.function_call_arguments.delta": ("arguments", None),
    "response.custom_tool_call_input.delta": ("input", None),
    "response.reasoning_summary_text.delta": ("summary", "summary_index"),
    "response.reasoning_text.delta": ("reasoning", "content_index"),
}


# --- items -> parts -----------------------------------------------------------------------


def _reasoning_parts(item: Mapping[str, Any]) -> list[Part]:
    """One reasoning part per reasoning text, or per summary when the text is not given."""
    for field in ("content", "summary"):
        entries = item.get(field)
        if isinstance(entries, list) and entries:
            return [
                {"type": "reasoning", "content": entry.get("text")}
                for entry in entries
                if isinstance(entry, dict)
            ]
    return []  # encrypted reasoning only: nothing readable to record


def _server_tool_parts(
    item: Mapping[str, Any], tool: str, result_fields: tuple[str, ...]
) -> list[Part]:
    call: dict[str, Any] = {"type": tool}
    result: dict[str, Any] = {"type": tool}
    for key, value in item.items():
        if key in result_fields:
            if value is not None:
                result[key] = value
        elif key not in ("id", "type", "status"):
            call[key] = value
    name = item.get("name") if tool == "mcp" else None
    parts: list[Part] = [
        {
            "type": "server_tool_call",
            "id": item.get("id"),
            "name": name if isinstance(name, str) else tool,
            "server_tool_call": call,
        }
    ]
    if len(result) > 1:
        parts.append(
            {
                "type": "server_tool_call_response",
                "id": item.get("id"),
                "server_tool_call_response": result,
            }
        )
    return parts


def item_parts(item: Mapping[str, Any]) -> list[Part]:
    """The GenAI parts of one input or output item."""
    kind = item.get("type")
    if kind == "message" or (kind is None and "role" in item):
        return content_parts(item.get("content"))
    if kind == "function_call":
        arguments = parse_arguments(item.get("arguments"))
    elif kind == "custom_tool_call":
        arguments = item.get("input")  # free text by contract
    elif kind in ("function_call_output", "custom_tool_call_output"):
        output = item.get("output")
        response = output if isinstance(output, str) else content_parts(output)
        return [{"type": "tool_call_response", "id": item.get("call_id"), "response": response}]
    elif kind == "reasoning":
        return _reasoning_parts(item)
    elif kind == "compaction":  # the compacted state is encrypted: only its id is readable
        return [{"type": "compaction", "id": item.get("id")}]
    elif isinstance(kind, str) and kind in _SERVER_TOOLS:
        tool, result_fields = _SERVER_TOOLS[kind]
        return _server_tool_parts(item, tool, result_fields)
    else:
        generic = dict(item)
        if not isinstance(kind, str):
            generic["type"] = "unknown"
        return [generic]
    return [
        {
            "type": "tool_call",
            "id": item.get("call_id"),
            "name": item.get("name"),
            "arguments": arguments,
        }
    ]


# --- responses ----------------------------------------------------------------------------


def _finish_reason(response: Mapping[str, Any], output: list[Any], finished: bool) -> str:
    status = response.get("status")
    if not finished or status in ("in_progress", "queued"):
        return "error"
    if status == "incomplete":
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        if isinstance(reason, str):
            return _INCOMPLETE_REASONS.get(reason, reason)
        return "incomplete"
    if status == "failed":
        return "error"
    if isinstance(status, str) and status != "completed":
        return status  # cancelled, or a status newer than this codec
    kinds = {item.get("type") for item in output if isinstance(item, dict)}
    if not kinds.isdisjoint(_CLIENT_CALLS):
        return "tool_call"
    return "compaction" if "compaction" in kinds else "stop"


def from_response(
    response: Mapping[str, Any], finished: bool, error_type: str | None
) -> LlmResponse:
    """The LlmResponse of a Response object; ``finished`` is false for a cut stream."""
    attrs: dict[str, AttributeValue] = {}
    put_str(attrs, RESPONSE_ID, response.get("id"))
    put_str(attrs, RESPONSE_MODEL, response.get("model"))
    put_str(attrs, RESPONSE_SERVICE_TIER, response.get("service_tier"))
    usage_attributes(
        attrs,
        response.get("usage"),
        input_key="input_tokens",
        output_key="output_tokens",
        input_details_key="input_tokens_details",
        output_details_key="output_tokens_details",
    )
    output = response.get("output")
    output = output if isinstance(output, list) else []
    parts: list[Part] = []
    for item in output:
        if isinstance(item, dict):
            parts.extend(item_parts(item))
    messages: list[Message] = []
    if parts or response.get("status") in ("completed", "incomplete"):
        reason = _finish_reason(response, output, finished)
        attrs[FINISH_REASONS] = [reason]
        messages.append({"role": "assistant", "parts": parts, "finish_reason": reason})
    error = error_type_of(response.get("error")) or error_type
    return LlmResponse(attrs, messages, error, finished=finished)


class _StreamAssembler:
    """Rebuilds a Response from stream events when no terminal event carries its output."""

    def __init__(self) -> None:
        self.snapshot: Mapping[str, Any] | None = None
        self.final: Mapping[str, Any] | None = None
        self.error_type: str | None = None
        self.added: dict[int, dict[str, Any]] = {}
        self.done: dict[int, Any] = {}
        self.content: dict[tuple[int, int], Mapping[str, Any]] = {}
        self.pieces: dict[tuple[int, str, int], list[str]] = {}

    def feed(self, kind: str, event: Mapping[str, Any]) -> None:
        if kind in _DELTAS:
            piece, index_field = _DELTAS[kind]
            index = event.get(index_field) if index_field else 0
            delta = event.get("delta")
            if isinstance(delta, str):
                key = (_int(event.get("output_index")), piece, _int(index))
                self.pieces.setdefault(key, []).append(delta)
        elif kind in _TERMINAL_EVENTS:
            response = event.get("response")
            self.final = response if isinstance(response, dict) else {}
        elif kind in _SNAPSHOT_EVENTS:
            response = event.get("response")
            if isinstance(response, dict):
                self.snapshot = response
        elif kind == "response.output_item.added":
            item = event.get("item")
            if isinstance(item, dict):
                self.added[_int(event.get("output_index"))] = dict(item)
        elif kind == "response.output_item.done":
            self.done[_int(event.get("output_index"))] = event.get("item")
        elif kind == "response.content_part.added":
            part = event.get("part")
            if isinstance(part, dict):
                slot = (_int(event.get("output_index")), _int(event.get("content_index")))
                self.content[slot] = part
        elif kind == "error":
            self.error_type = error_type_of(event.get("error")) or error_type_of(event) or "error"

    def _joined(self, index: int, piece: str) -> dict[int, str]:
        return {
            sub: "".join(chunks)
            for (output_index, kind, sub), chunks in self.pieces.items()
            if output_index == index and kind == piece
        }

    def _message_content(self, index: int) -> list[Any]:
        parts = {sub: dict(part) for (i, sub), part in self.content.items() if i == index}
        for sub, text in self._joined(index, "text").items():
            parts.setdefault(sub, {"type": "output_text"})["text"] = text
        for sub, text in self._joined(index, "refusal").items():
            parts[sub] = {"type": "refusal", "refusal": text}
        return [parts[sub] for sub in sorted(parts)]

    def _item(self, index: int) -> Any:
        if index in self.done:
            return self.done[index]
        item = self.added[index]
        kind = item.get("type")
        if kind == "message":
            item["content"] = self._message_content(index)
        elif kind in ("function_call", "custom_tool_call"):
            field = "arguments" if kind == "function_call" else "input"
            joined = self._joined(index, field)
            if joined:
                item[field] = joined[0]
        elif kind == "reasoning":
            for field, piece in (("summary", "summary"), ("content", "reasoning")):
                texts = self._joined(index, piece)
                if texts:
                    kind_name = "summary_text" if field == "summary" else "reasoning_text"
                    item[field] = [{"type": kind_name, "text": texts[i]} for i in sorted(texts)]
        return item

    def result(self) -> LlmResponse:
        response: Mapping[str, Any] = self.final if self.final is not None else self.snapshot or {}
        output = response.get("output")
        if not (isinstance(output, list) and output) and (self.added or self.done):
            items = [self._item(i) for i in sorted(self.added.keys() | self.done.keys())]
            response = {**response, "output": items}
        return from_response(response, self.final is not None, self.error_type)


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _terminal_fast_path(events: list[SseEvent]) -> LlmResponse | None:
    """Read only the terminal event when the stream names its events and ends normally.

    The terminal event carries the whole Response, so the deltas need not be decoded. Any
    other case (no event names, an error event, a terminal event without output, a cut
    stream) returns None for the full reading.
    """
    terminal: SseEvent | None = None
    for event in events:
        name = event.event
        if name in _TERMINAL_EVENTS:
            terminal = event
        elif name == "error":
            return None
    if terminal is None:
        return None
    try:
        data = json.loads(terminal.data)
    except ValueError:
        return None
    response = data.get("response") if isinstance(data, dict) else None
    if not isinstance(response, dict):
        return None
    output = response.get("output")
    if not (isinstance(output, list) and output):
        return None
    return from_response(response, True, None)


def from_stream(body: bytes) -> LlmResponse:
    events = list(parse_sse(body))
    fast = _terminal_fast_path(events)
    if fast is not None:
        return fast
    assembler = _StreamAssembler()
    for event in events:
        try:
            data = json.loads(event.data)
        except ValueError:
            continue  # "[DONE]" from a compatible server, or an event cut mid-way
        if not isinstance(data, dict):
            continue
        kind = data.get("type")
        assembler.feed(kind if isinstance(kind, str) else event.event, data)
    return assembler.result()
