"""Anthropic Messages (`POST …/v1/messages`), as the `anthropic` SDK expects it.

Requires `model`, `max_tokens` and `messages` (400 `invalid_request_error` otherwise). Before
tool calls it usually says a sentence, as Claude does. Prompt caching follows Anthropic's rules
loosely: cache counts are non-zero only when the request carries a `cache_control` marker, and
`input_tokens` excludes the cached and cache-written parts. Streaming sends `message_start`,
`ping`, content blocks (`text_delta`, `input_json_delta` pieces), `message_delta`, `message_stop`.
"""

from __future__ import annotations

import json
import random
from typing import Any

from . import _brain
from ._wire import (
    JsonReply,
    Reply,
    SseReply,
    json_bytes,
    json_deltas,
    json_reply,
    new_id,
    obj_get,
    sse_event,
    text_deltas,
)

_STOP = {"end": "end_turn", "tool_calls": "tool_use", "max_tokens": "max_tokens"}
_AFTER_BREAKPOINT = 20  # prompt tokens assumed to follow the last cache_control breakpoint


def error(status: int, kind: str, message: str) -> JsonReply:
    request_id = new_id("req_011C")
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id}
    return json_reply(status, body, headers=(("request-id", request_id),))


def rate_limited(model: str) -> JsonReply:
    message = (
        f"This request would exceed the rate limit for your organization of 5 requests per "
        f"minute for {model}. Please retry after a short wait."
    )
    reply = error(429, "rate_limit_error", message)
    return JsonReply(reply.status, reply.body, (*reply.headers, ("retry-after-ms", "20")))


def handle(request: dict[str, Any], rng: random.Random, cache: _brain.PromptCache) -> Reply:
    for name in ("model", "max_tokens", "messages"):
        if name not in request:
            return error(400, "invalid_request_error", f"{name}: Field required")
    if not isinstance(request["messages"], list):
        return error(400, "invalid_request_error", "messages: Input should be a valid list")
    answer = _brain.think(_prompt(request, rng), rng, cache)
    message = _message(request, answer)
    headers = (("request-id", new_id("req_011C")),)
    if request.get("stream") is True:
        return SseReply(_events(message, rng), headers)
    return JsonReply(200, json_bytes(message), headers)


def _prompt(request: dict[str, Any], rng: random.Random) -> _brain.Prompt:
    turns: list[_brain.Message] = []
    names: dict[str, str] = {}  # tool_use id -> tool name, to label tool results
    for m in request["messages"]:
        role, content = obj_get(m, "role"), obj_get(m, "content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        text, calls = [], []
        for block in blocks if isinstance(blocks, list) else []:
            kind = obj_get(block, "type")
            if kind == "text":
                text.append(str(obj_get(block, "text", "")))
            elif kind == "tool_use":
                call = _brain.ToolCall(str(obj_get(block, "name")), obj_get(block, "input", {}))
                names[str(obj_get(block, "id"))] = call.name
                calls.append(call)
            elif kind == "tool_result":
                name = names.get(str(obj_get(block, "tool_use_id")))
                turns.append(
                    _brain.Message("tool", _text(obj_get(block, "content")), tool_name=name)
                )
        if role == "assistant":
            turns.append(_brain.Message("assistant", "".join(text), tuple(calls)))
        elif role == "user" and text:
            turns.append(_brain.Message("user", "".join(text)))
    tools = tuple(
        _brain.Tool(str(obj_get(t, "name")), json.dumps(t))
        for t in request.get("tools") or []
        if obj_get(t, "input_schema") is not None
    )
    return _brain.Prompt(
        system=_text(request.get("system")),
        messages=tuple(turns),
        tools=tools,
        tool_choice=_tool_choice(request.get("tool_choice")),
        max_tokens=request["max_tokens"] if isinstance(request["max_tokens"], int) else None,
        narrate_tool_calls=rng.random() < 0.8,
        model=str(request.get("model")),
    )


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(obj_get(b, "text", "")) for b in content if obj_get(b, "type") == "text")
    return ""


def _tool_choice(choice: object) -> str:
    kind = obj_get(choice, "type", "auto")
    if kind == "any":
        return "required"
    if kind == "tool":
        return str(obj_get(choice, "name"))
    return str(kind)


def _message(request: dict[str, Any], answer: _brain.Answer) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if answer.text:
        content.append({"type": "text", "text": answer.text})
    content += [
        {"type": "tool_use", "id": new_id("toolu_01", 22), "name": c.name, "input": c.arguments}
        for c in answer.tool_calls
    ]
    marked = "cache_control" in json.dumps(request)  # any block, tool or system prompt
    read = answer.cached_tokens if marked else 0
    written = max(0, answer.input_tokens - read - _AFTER_BREAKPOINT) if marked else 0
    return {
        "id": new_id("msg_01", 22),
        "type": "message",
        "role": "assistant",
        "model": request["model"],
        "content": content,
        "stop_reason": _STOP[answer.stop],
        "stop_sequence": None,
        "usage": {
            "input_tokens": answer.input_tokens - read - written,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
            "output_tokens": answer.output_tokens,
            "service_tier": "standard",
        },
    }


def _events(message: dict[str, Any], rng: random.Random) -> tuple[bytes, ...]:
    events: list[bytes] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append(sse_event({"type": kind, **fields}, kind))

    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    emit("message_start", message=start)
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            emit("content_block_start", index=index, content_block={"type": "text", "text": ""})
            if index == 0:
                emit("ping")
            for piece in text_deltas(block["text"], rng):
                emit(
                    "content_block_delta", index=index, delta={"type": "text_delta", "text": piece}
                )
        else:
            emit("content_block_start", index=index, content_block={**block, "input": {}})
            if index == 0:
                emit("ping")
            for piece in ["", *json_deltas(json.dumps(block["input"]), rng)]:
                delta = {"type": "input_json_delta", "partial_json": piece}
                emit("content_block_delta", index=index, delta=delta)
        emit("content_block_stop", index=index)
    emit(
        "message_delta",
        delta={"stop_reason": message["stop_reason"], "stop_sequence": None},
        usage={"output_tokens": usage["output_tokens"]},
    )
    emit("message_stop")
    return tuple(events)
