"""OpenAI Responses (`POST …/responses`), as the `openai` SDK expects it.

Accepts `input` as a string or a list of items (messages with string or part-list content,
`function_call`, `function_call_output`), `instructions`, flat function `tools`
(`{"type": "function", "name": ..., "parameters": ...}`), `tool_choice`, `max_output_tokens`.
Streaming sends named events (`event: response.created` …) whose data carry `type` and an
increasing `sequence_number`, ending with `response.completed`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from . import _brain
from ._wire import (
    JsonReply,
    Reply,
    SseReply,
    hex_id,
    json_bytes,
    json_deltas,
    json_reply,
    new_id,
    now,
    obj_get,
    sse_event,
    text_deltas,
)


def error(status: int, kind: str, message: str, code: str | None = None) -> JsonReply:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return json_reply(status, body, pretty=True, headers=_headers())


def rate_limited(model: str) -> JsonReply:
    message = f"Rate limit reached for {model} on tokens per min (TPM). Please try again in 20ms."
    reply = error(429, "tokens", message, "rate_limit_exceeded")
    return JsonReply(reply.status, reply.body, (*reply.headers, ("retry-after-ms", "20")))


def handle(request: dict[str, Any], rng: random.Random, cache: _brain.PromptCache) -> Reply:
    if not isinstance(request.get("model"), str):
        return error(400, "invalid_request_error", "Missing required parameter: 'model'.")
    if not isinstance(request.get("input"), (str, list)):
        return error(400, "invalid_request_error", "Missing required parameter: 'input'.")
    answer = _brain.think(_prompt(request), rng, cache)
    items = _output_items(answer)
    response = _response(request, answer, items)
    if request.get("stream") is True:
        return SseReply(_events(response, answer, items, rng), _headers())
    return JsonReply(200, json_bytes(response, pretty=True), _headers())


def _prompt(request: dict[str, Any]) -> _brain.Prompt:
    system = [request["instructions"]] if isinstance(request.get("instructions"), str) else []
    turns: list[_brain.Message] = []
    raw = request["input"]
    names: dict[str, str] = {}  # call_id -> function name, to label tool results
    for item in [{"role": "user", "content": raw}] if isinstance(raw, str) else raw:
        kind, role = obj_get(item, "type", "message"), obj_get(item, "role")
        if kind == "message" and role in ("system", "developer"):
            system.append(_text(obj_get(item, "content")))
        elif kind == "message" and role in ("user", "assistant"):
            turns.append(_brain.Message(role, _text(obj_get(item, "content"))))
        elif kind == "function_call":
            call = _brain.ToolCall(str(obj_get(item, "name")), _args(obj_get(item, "arguments")))
            names[str(obj_get(item, "call_id"))] = call.name
            turns.append(_brain.Message("assistant", "", (call,)))
        elif kind == "function_call_output":
            output = obj_get(item, "output")
            name = names.get(str(obj_get(item, "call_id")))
            turns.append(_brain.Message("tool", _text(output), tool_name=name))
    tools = tuple(
        _brain.Tool(str(obj_get(t, "name")), json.dumps(t))
        for t in request.get("tools") or []
        if obj_get(t, "type") == "function"
    )
    choice = request.get("tool_choice", "auto")
    max_tokens = request.get("max_output_tokens")
    return _brain.Prompt(
        system="\n".join(system),
        messages=tuple(turns),
        tools=tools,
        tool_choice=choice if isinstance(choice, str) else str(obj_get(choice, "name", "auto")),
        max_tokens=max_tokens if isinstance(max_tokens, int) else None,
        model=str(request.get("model")),
    )


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(obj_get(p, "text", "")) for p in content)
    return ""


def _args(arguments: object) -> dict[str, object]:
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _output_items(answer: _brain.Answer) -> list[dict[str, Any]]:
    status = "incomplete" if answer.stop == "max_tokens" else "completed"
    items: list[dict[str, Any]] = []
    if answer.text:
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": answer.text}
        items.append(
            {
                "id": hex_id("msg_"),
                "type": "message",
                "status": status,
                "content": [part],
                "role": "assistant",
            }
        )
    for call in answer.tool_calls:
        items.append(
            {
                "id": hex_id("fc_"),
                "type": "function_call",
                "status": "completed",
                "arguments": call.arguments_json(),
                "call_id": new_id("call_"),
                "name": call.name,
            }
        )
    return items


def _response(
    request: dict[str, Any], answer: _brain.Answer, items: list[dict[str, Any]]
) -> dict[str, Any]:
    incomplete = answer.stop == "max_tokens"
    return {
        "id": hex_id("resp_"),
        "object": "response",
        "created_at": now(),
        "status": "incomplete" if incomplete else "completed",
        "background": False,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "max_tool_calls": None,
        "model": request["model"],
        "output": items,
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "previous_response_id": request.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": request.get("store", True),
        "temperature": request.get("temperature", 1.0),
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools") or [],
        "top_logprobs": 0,
        "top_p": request.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": {
            "input_tokens": answer.input_tokens,
            "input_tokens_details": {
                "cached_tokens": answer.cached_tokens,
                "cache_write_tokens": 0,
            },
            "output_tokens": answer.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": answer.input_tokens + answer.output_tokens,
        },
        "user": None,
        "metadata": request.get("metadata") or {},
    }


def _events(
    response: dict[str, Any],
    answer: _brain.Answer,
    items: list[dict[str, Any]],
    rng: random.Random,
) -> tuple[bytes, ...]:
    events: list[bytes] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append(sse_event({"type": kind, **fields, "sequence_number": len(events)}, kind))

    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    pending["incomplete_details"] = None
    emit("response.created", response=pending)
    emit("response.in_progress", response=pending)
    for index, item in enumerate(items):
        in_progress = {**item, "status": "in_progress"}
        if item["type"] == "message":
            _stream_message(emit, index, item, in_progress, rng)
        else:
            emit(
                "response.output_item.added",
                output_index=index,
                item={**in_progress, "arguments": ""},
            )
            for piece in json_deltas(item["arguments"], rng):
                emit(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=index,
                    delta=piece,
                )
            emit(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
            )
            emit("response.output_item.done", output_index=index, item=item)
    final = "response.incomplete" if answer.stop == "max_tokens" else "response.completed"
    emit(final, response=response)
    return tuple(events)


def _stream_message(
    emit: Callable[..., None],
    index: int,
    item: dict[str, Any],
    in_progress: dict[str, Any],
    rng: random.Random,
) -> None:
    part = item["content"][0]
    where = {"item_id": item["id"], "output_index": index, "content_index": 0}
    emit("response.output_item.added", output_index=index, item={**in_progress, "content": []})
    emit("response.content_part.added", **where, part={**part, "text": ""})
    for piece in text_deltas(part["text"], rng):
        emit("response.output_text.delta", **where, delta=piece, logprobs=[])
    emit("response.output_text.done", **where, text=part["text"], logprobs=[])
    emit("response.content_part.done", **where, part=part)
    emit("response.output_item.done", output_index=index, item=item)


def _headers() -> tuple[tuple[str, str], ...]:
    return (("x-request-id", hex_id("req_", 32)), ("openai-processing-ms", "57"))
