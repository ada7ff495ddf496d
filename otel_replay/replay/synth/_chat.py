"""OpenAI Chat Completions from a span: a ``chat.completion`` body or its chunk stream."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from otel_replay.replay.synth._common import SpanView, dumps, openai_usage, sse, tool_arguments_text

__all__ = ["chat_body", "chat_events"]

# Finish reasons of the output-messages schema (and Anthropic's) in Chat's wire vocabulary.
_WIRE_REASONS = {
    "tool_call": "tool_calls",
    "tool_use": "tool_calls",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
}


def chat_body(view: SpanView) -> bytes:
    """The non-streamed ``chat.completion`` JSON."""
    choices = [
        {
            "index": index,
            "message": _message(view, message, index),
            "logprobs": None,
            "finish_reason": _finish_reason(view, index),
        }
        for index, message in enumerate(view.messages)
    ]
    body = {**_envelope(view, "chat.completion"), "choices": choices}
    usage = _usage(view)
    if usage is not None:
        body["usage"] = usage
    return dumps(body)


def chat_events(view: SpanView) -> list[bytes]:
    """The ``chat.completion.chunk`` stream, one SSE event per chunk, ending ``[DONE]``."""
    envelope = _envelope(view, "chat.completion.chunk")

    def chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
        return sse(dumps({**envelope, "choices": choices, **extra}))

    events: list[bytes] = []
    for index, message in enumerate(view.messages):
        for delta in _deltas(_message(view, message, index)):
            events.append(chunk([_choice(index, delta, None)]))
        events.append(chunk([_choice(index, {}, _finish_reason(view, index))]))
    # Only a request with include_usage gets token counts streamed: a span that has them
    # was such a request, so its usage chunk (empty choices) follows.
    usage = _usage(view)
    if usage is not None:
        events.append(chunk([], usage=usage))
    events.append(sse(b"[DONE]"))
    return events


def _envelope(view: SpanView, kind: str) -> dict[str, Any]:
    envelope: dict[str, Any] = {
        "id": view.response_id or view.make_id("chatcmpl-"),
        "object": kind,
        "created": 0,
        "model": view.model,
    }
    for field in ("service_tier", "system_fingerprint"):
        value = view.text(f"openai.response.{field}")
        if value is not None:
            envelope[field] = value
    return envelope


def _usage(view: SpanView) -> dict[str, Any] | None:
    return openai_usage(view, "prompt_tokens", "completion_tokens", always=False)


def _finish_reason(view: SpanView, index: int) -> str:
    reason = view.finish_reasons[index]
    return _WIRE_REASONS.get(reason, reason)


def _choice(index: int, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}


def _message(view: SpanView, message: Mapping[str, Any], index: int) -> dict[str, Any]:
    texts: list[str] = []
    reasoning: list[str] = []
    refusals: list[str] = []
    calls: list[dict[str, Any]] = []
    audio: dict[str, Any] | None = None
    for part in message["parts"]:
        kind = part.get("type")
        content = part.get("content")
        if kind == "text":
            texts.append(content if isinstance(content, str) else "")
        elif kind == "reasoning" and isinstance(content, str):
            reasoning.append(content)
        elif kind == "refusal":
            refusals.append(content if isinstance(content, str) else "")
        elif kind == "tool_call":
            calls.append(_tool_call(view, part, index, len(calls)))
        elif kind == "blob" and part.get("modality") == "audio" and audio is None:
            transcript = part.get("transcript")
            audio = {
                "id": view.make_id("audio_", index),
                "data": content if isinstance(content, str) else "",
                "transcript": transcript if isinstance(transcript, str) else "",
                "expires_at": 0,
            }
    wire: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(texts) if texts else None,
        "refusal": "".join(refusals) if refusals else None,
        "annotations": [],
    }
    if reasoning:  # the field OpenAI-compatible servers use for reasoning
        wire["reasoning_content"] = "".join(reasoning)
    if audio is not None:
        wire["audio"] = audio
    if calls:
        wire["tool_calls"] = calls
    return wire


def _tool_call(view: SpanView, part: Mapping[str, Any], choice: int, index: int) -> dict[str, Any]:
    call_id = part.get("id")
    name = part.get("name")
    return {
        "id": call_id
        if isinstance(call_id, str) and call_id
        else view.make_id("call_", choice, index),
        "type": "function",
        "function": {
            "name": name if isinstance(name, str) else "",
            "arguments": tool_arguments_text(part.get("arguments")),
        },
    }


def _deltas(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A message as stream deltas; an empty ``content`` still opens the role delta, so a
    recorded empty text part comes back as one."""
    content = message["content"]
    deltas: list[dict[str, Any]] = [
        {"role": "assistant", "content": "" if content is not None else None}
    ]
    if "reasoning_content" in message:
        deltas.append({"reasoning_content": message["reasoning_content"]})
    if content:
        deltas.append({"content": content})
    if message["refusal"] is not None:
        deltas.append({"refusal": message["refusal"]})
    if "audio" in message:
        deltas.append({"audio": message["audio"]})
    for index, call in enumerate(message.get("tool_calls", ())):
        deltas.append({"tool_calls": [{"index": index, **call}]})
    return deltas
