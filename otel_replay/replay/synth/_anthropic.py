"""Anthropic Messages from a span: a ``message`` body or its event stream."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from otel_replay.replay.synth._common import (
    CACHE_CREATION,
    CACHE_READ,
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    REASONING_TOKENS,
    SpanView,
    dumps,
    sse,
)

__all__ = ["messages_body", "messages_events"]

# Finish reasons of the output-messages schema (and OpenAI's) as Anthropic stop reasons.
_STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_call": "tool_use",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}
# GenAI part types: anything else came from a provider block kept whole by a codec.
_GENAI_PARTS = frozenset(
    {
        "text",
        "tool_call",
        "tool_call_response",
        "reasoning",
        "refusal",
        "blob",
        "uri",
        "file",
        "server_tool_call",
        "server_tool_call_response",
        "compaction",
        "unknown",
    }
)
_TOOL_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


def messages_body(view: SpanView) -> bytes:
    """The non-streamed ``message`` JSON."""
    return dumps(_message(view))


def messages_events(view: SpanView) -> list[bytes]:
    """The event stream: ``message_start``, each block's start/deltas/stop,
    ``message_delta`` with the stop reason and final usage, ``message_stop``."""
    message = _message(view)
    events: list[bytes] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append(sse(dumps({"type": kind, **fields}), kind))

    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 0}}
    emit("message_start", message=start)
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "text":
            emit("content_block_start", index=index, content_block={"type": "text", "text": ""})
            if block["text"]:
                delta = {"type": "text_delta", "text": block["text"]}
                emit("content_block_delta", index=index, delta=delta)
        elif kind == "thinking":
            opening = {"type": "thinking", "thinking": "", "signature": ""}
            emit("content_block_start", index=index, content_block=opening)
            delta = {"type": "thinking_delta", "thinking": block["thinking"]}
            emit("content_block_delta", index=index, delta=delta)
        elif kind in _TOOL_BLOCKS:
            emit("content_block_start", index=index, content_block={**block, "input": {}})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            emit("content_block_delta", index=index, delta=delta)
        else:
            emit("content_block_start", index=index, content_block=block)
        emit("content_block_stop", index=index)
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    emit("message_delta", delta=delta, usage=usage)
    emit("message_stop")
    return events


def _message(view: SpanView) -> dict[str, Any]:
    reason = view.finish_reasons[-1]
    blocks = [
        block for i, part in enumerate(view.parts()) if (block := _block(view, part, i)) is not None
    ]
    return {
        "id": view.response_id or view.make_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": view.model,
        "content": blocks,
        "stop_reason": _STOP_REASONS.get(reason, reason),
        "stop_sequence": None,
        "usage": _usage(view),
    }


def _usage(view: SpanView) -> dict[str, Any]:
    read, written = view.count(CACHE_READ), view.count(CACHE_CREATION)
    # gen_ai.usage.input_tokens counts cache reads and writes too; the wire's does not.
    total = view.count(INPUT_TOKENS) or 0
    usage: dict[str, Any] = {
        "input_tokens": max(total - (read or 0) - (written or 0), 0),
        "output_tokens": view.count(OUTPUT_TOKENS) or 0,
    }
    if written is not None:
        usage["cache_creation_input_tokens"] = written
    if read is not None:
        usage["cache_read_input_tokens"] = read
    thinking = view.count(REASONING_TOKENS)
    if thinking is not None:
        usage["output_tokens_details"] = {"thinking_tokens": thinking}
    return usage


def _block(view: SpanView, part: Mapping[str, Any], index: int) -> dict[str, Any] | None:
    kind = part.get("type")
    content = part.get("content")
    text = content if isinstance(content, str) else ""
    if kind == "text":
        return {"type": "text", "text": text}
    if kind == "tool_call":
        return {
            "type": "tool_use",
            "id": _string(part.get("id")) or view.make_id("toolu_", index),
            "name": _string(part.get("name")),
            "input": _input(part.get("arguments")),
        }
    if kind == "reasoning":
        if part.get("redacted") is True:
            return {"type": "redacted_thinking", "data": ""}
        return {"type": "thinking", "thinking": text, "signature": ""}
    if kind == "server_tool_call":
        return _server_tool_use(view, part, index)
    if kind == "server_tool_call_response":
        details = part.get("server_tool_call_response")
        if isinstance(details, Mapping) and isinstance(details.get("type"), str):
            return {**details, "tool_use_id": part.get("id")}
        return None
    if isinstance(kind, str) and kind not in _GENAI_PARTS:
        return dict(part)
    return None


def _server_tool_use(view: SpanView, part: Mapping[str, Any], index: int) -> dict[str, Any]:
    details = part.get("server_tool_call")
    details = details if isinstance(details, Mapping) else {}
    fields = {key: value for key, value in details.items() if key != "type"}
    return {
        "type": "mcp_tool_use" if "server_name" in fields else "server_tool_use",
        "id": _string(part.get("id")) or view.make_id("srvtoolu_", index),
        "name": _string(part.get("name")) or _string(details.get("type")),
        "input": {},
        **fields,
    }


def _input(arguments: Any) -> Any:
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        try:
            decoded = json.loads(arguments)
        except ValueError:
            return arguments
        return decoded if isinstance(decoded, dict) else arguments
    return arguments


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""
