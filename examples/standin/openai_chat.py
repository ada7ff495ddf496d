"""OpenAI Chat Completions (`POST …/chat/completions`), as the `openai` SDK expects it.

Non-streaming: a pretty-printed `chat.completion` with `n` choices. Streaming: `data:` lines of
`chat.completion.chunk` (role, content pieces, tool calls whose `arguments` arrive in several
deltas, a finish chunk per choice), the usage chunk (`choices: []`) when
`stream_options.include_usage` is true, then `data: [DONE]`.
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
    hex_id,
    json_bytes,
    json_deltas,
    json_reply,
    new_id,
    noise,
    now,
    obj_get,
    sse_event,
    text_deltas,
)

_FINISH = {"end": "stop", "tool_calls": "tool_calls", "max_tokens": "length"}
_FINGERPRINT = "fp_standin01"


def error(status: int, kind: str, message: str, code: str | None = None) -> JsonReply:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return json_reply(status, body, pretty=True, headers=_headers())


def rate_limited(model: str) -> JsonReply:
    message = (
        f"Rate limit reached for {model} on requests per min (RPM): Limit 3, Used 3, "
        "Requested 1. Please try again in 20ms."
    )
    reply = error(429, "requests", message, "rate_limit_exceeded")
    return JsonReply(reply.status, reply.body, (*reply.headers, ("retry-after-ms", "20")))


def handle(request: dict[str, Any], rng: random.Random, cache: _brain.PromptCache) -> Reply:
    if not isinstance(request.get("model"), str):
        return error(400, "invalid_request_error", "you must provide a model parameter")
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        return error(400, "invalid_request_error", "'messages' must be a non-empty array")
    prompt = _prompt(request, messages)
    n = request.get("n")
    count = n if isinstance(n, int) and n > 0 else 1
    answers = [_brain.think(prompt, rng, cache if i == 0 else None) for i in range(count)]

    completion_id = new_id("chatcmpl-", 29)
    common = {
        "created": now(),
        "model": request["model"],
        "service_tier": _service_tier(request),
        "system_fingerprint": _FINGERPRINT,
    }
    if request.get("stream") is True:
        options = request.get("stream_options")
        return SseReply(_chunks(completion_id, common, answers, options, rng), _headers())
    body = {
        "id": completion_id,
        "object": "chat.completion",
        "created": common["created"],
        "model": common["model"],
        "choices": [_choice(i, a) for i, a in enumerate(answers)],
        "usage": _usage(answers),
        "service_tier": common["service_tier"],
        "system_fingerprint": _FINGERPRINT,
    }
    return JsonReply(200, json_bytes(body, pretty=True), _headers())


def _prompt(request: dict[str, Any], messages: list[Any]) -> _brain.Prompt:
    system: list[str] = []
    turns: list[_brain.Message] = []
    names: dict[str, str] = {}  # tool_call_id -> function name, to label tool results
    for m in messages:
        role, text = obj_get(m, "role"), _text(obj_get(m, "content"))
        if role in ("system", "developer"):
            system.append(text)
        elif role == "user":
            turns.append(_brain.Message("user", text))
        elif role == "assistant":
            calls = []
            for call in obj_get(m, "tool_calls") or []:
                function = obj_get(call, "function", {})
                names[str(obj_get(call, "id"))] = str(obj_get(function, "name"))
                calls.append(_brain.ToolCall(str(obj_get(function, "name")), _args(function)))
            turns.append(_brain.Message("assistant", text, tuple(calls)))
        elif role in ("tool", "function"):
            name = names.get(str(obj_get(m, "tool_call_id")), obj_get(m, "name"))
            turns.append(_brain.Message("tool", text, tool_name=name))
    tools = tuple(
        _brain.Tool(str(obj_get(obj_get(t, "function"), "name")), json.dumps(t))
        for t in request.get("tools") or []
        if obj_get(t, "type") == "function"
    )
    max_tokens = request.get("max_completion_tokens") or request.get("max_tokens")
    return _brain.Prompt(
        system="\n".join(system),
        messages=tuple(turns),
        tools=tools,
        tool_choice=_tool_choice(request.get("tool_choice")),
        max_tokens=max_tokens if isinstance(max_tokens, int) else None,
        model=str(request.get("model")),
    )


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(obj_get(p, "text", "")) for p in content)
    return ""


def _args(function: object) -> dict[str, object]:
    try:
        parsed = json.loads(obj_get(function, "arguments") or "{}")
    except (TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _tool_choice(choice: object) -> str:
    if isinstance(choice, str):
        return choice
    return str(obj_get(obj_get(choice, "function"), "name", "auto"))


def _service_tier(request: dict[str, Any]) -> str:
    tier = request.get("service_tier")
    return tier if tier in ("flex", "priority") else "default"


def _choice(index: int, answer: _brain.Answer) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": answer.text or None,
        "refusal": None,
        "annotations": [],
    }
    if answer.tool_calls:
        message["tool_calls"] = [
            {
                "id": new_id("call_"),
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments_json()},
            }
            for c in answer.tool_calls
        ]
    return {
        "index": index,
        "message": message,
        "logprobs": None,
        "finish_reason": _FINISH[answer.stop],
    }


def _usage(answers: list[_brain.Answer]) -> dict[str, Any]:
    prompt, completion = answers[0].input_tokens, sum(a.output_tokens for a in answers)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": answers[0].cached_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _chunks(
    completion_id: str,
    common: dict[str, Any],
    answers: list[_brain.Answer],
    options: object,
    rng: random.Random,
) -> tuple[bytes, ...]:
    include_usage = obj_get(options, "include_usage") is True
    obfuscate = obj_get(options, "include_obfuscation", True) is not False

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}
        return envelope([choice], None)

    def envelope(choices: list[dict[str, Any]], usage: dict[str, Any] | None) -> bytes:
        body = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            **common,
            "choices": choices,
        }
        if include_usage:
            body["usage"] = usage
        if obfuscate:
            # Real chunks carry random padding so their sizes don't reveal the tokens.
            body["obfuscation"] = noise()
        return sse_event(body)

    events: list[bytes] = []
    for index, answer in enumerate(answers):
        events.append(chunk(index, {"role": "assistant", "content": "", "refusal": None}))
        events += [chunk(index, {"content": piece}) for piece in text_deltas(answer.text, rng)]
        for call_index, call in enumerate(answer.tool_calls):
            head = {
                "index": call_index,
                "id": new_id("call_"),
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            events.append(chunk(index, {"tool_calls": [head]}))
            for piece in json_deltas(call.arguments_json(), rng):
                piece_delta = {"index": call_index, "function": {"arguments": piece}}
                events.append(chunk(index, {"tool_calls": [piece_delta]}))
        events.append(chunk(index, {}, _FINISH[answer.stop]))
    if include_usage:
        events.append(envelope([], _usage(answers)))
    events.append(sse_event("[DONE]"))
    return tuple(events)


def _headers() -> tuple[tuple[str, str], ...]:
    return (("x-request-id", hex_id("req_", 32)), ("openai-processing-ms", "42"))
