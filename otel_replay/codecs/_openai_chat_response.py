"""The response side of the OpenAI Chat Completions codec: completions and stream assembly."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.util.types import AttributeValue

from otel_replay.codecs._openai_common import (
    FINISH_REASONS,
    RESPONSE_ID,
    RESPONSE_MODEL,
    RESPONSE_SERVICE_TIER,
    SYSTEM_FINGERPRINT,
    content_parts,
    decode_str,
    error_type_of,
    normalise_finish_reason,
    parse_arguments,
    put_str,
    usage_attributes,
)
from otel_replay.codecs._sse import parse_sse
from otel_replay.codecs._types import LlmResponse, Message, Part

__all__ = ["assistant_parts", "from_completion", "from_stream"]


# --- assistant messages -------------------------------------------------------------------


def _tool_call_part(call: Any) -> Part:
    if not isinstance(call, dict):
        return {"type": "tool_call", "id": None, "name": None, "arguments": call}
    if call.get("type") == "custom":
        custom = call.get("custom")
        custom = custom if isinstance(custom, dict) else {}
        # A custom tool's input is free text by contract: kept as the string it is.
        return {
            "type": "tool_call",
            "id": call.get("id"),
            "name": custom.get("name"),
            "arguments": custom.get("input"),
        }
    function = call.get("function")
    function = function if isinstance(function, dict) else {}
    return {
        "type": "tool_call",
        "id": call.get("id"),
        "name": function.get("name"),
        "arguments": parse_arguments(function.get("arguments")),
    }


def _audio_parts(audio: dict[str, Any]) -> list[Part]:
    if "data" not in audio:  # a reference to earlier audio output: {"id": ...}
        return [{"type": "audio", **audio}]
    part: Part = {"type": "blob", "modality": "audio", "content": audio.get("data")}
    transcript = audio.get("transcript")
    if isinstance(transcript, str) and transcript:
        part["transcript"] = transcript  # the BlobPart field of the current schema
    return [part]


def assistant_parts(message: Mapping[str, Any]) -> list[Part]:
    """Parts of an assistant message, in request history or in a response choice."""
    parts: list[Part] = []
    # Not OpenAI's own field: compatible servers (vLLM, DeepSeek, Ollama) return reasoning here.
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        parts.append({"type": "reasoning", "content": reasoning})
    parts.extend(content_parts(message.get("content")))
    refusal = message.get("refusal")
    if isinstance(refusal, str):
        parts.append({"type": "refusal", "content": refusal})
    audio = message.get("audio")
    if isinstance(audio, dict):
        parts.extend(_audio_parts(audio))
    tool_calls = message.get("tool_calls")
    if isinstance(tool_calls, list):
        parts.extend(_tool_call_part(call) for call in tool_calls)
    function_call = message.get("function_call")
    if isinstance(function_call, dict):  # the deprecated single-function form
        parts.append(
            {
                "type": "tool_call",
                "id": None,
                "name": function_call.get("name"),
                "arguments": parse_arguments(function_call.get("arguments")),
            }
        )
    return parts


# --- responses ----------------------------------------------------------------------------


def _common_response_attributes(data: Mapping[str, Any], attrs: dict[str, AttributeValue]) -> None:
    put_str(attrs, RESPONSE_ID, data.get("id"))
    put_str(attrs, RESPONSE_MODEL, data.get("model"))
    put_str(attrs, RESPONSE_SERVICE_TIER, data.get("service_tier"))
    put_str(attrs, SYSTEM_FINGERPRINT, data.get("system_fingerprint"))


def _usage(attrs: dict[str, AttributeValue], usage: Any) -> None:
    usage_attributes(
        attrs,
        usage,
        input_key="prompt_tokens",
        output_key="completion_tokens",
        input_details_key="prompt_tokens_details",
        output_details_key="completion_tokens_details",
    )


def _choice_index(choice: Any) -> int:
    index = choice.get("index") if isinstance(choice, dict) else None
    return index if isinstance(index, int) else 0


def from_completion(data: Mapping[str, Any]) -> LlmResponse:
    attrs: dict[str, AttributeValue] = {}
    _common_response_attributes(data, attrs)
    _usage(attrs, data.get("usage"))
    messages: list[Message] = []
    reasons: list[str] = []
    choices = data.get("choices")
    if isinstance(choices, list):
        for choice in sorted(choices, key=_choice_index):
            if not isinstance(choice, dict):
                continue
            message = choice.get("message")
            reason = choice.get("finish_reason")
            reason = reason if isinstance(reason, str) else "error"
            reasons.append(reason)
            messages.append(
                {
                    "role": "assistant",
                    "parts": assistant_parts(message) if isinstance(message, dict) else [],
                    "finish_reason": normalise_finish_reason(reason),
                }
            )
    if reasons:
        attrs[FINISH_REASONS] = reasons
    return LlmResponse(attrs, messages, error_type_of(data.get("error")))


class _ToolCallBuffer:
    __slots__ = ("arguments", "id", "kind", "name")

    def __init__(self) -> None:
        self.id: str | None = None
        self.kind: str | None = None
        self.name: str | None = None
        self.arguments: list[str] = []

    def feed(self, delta: Mapping[str, Any]) -> None:
        if isinstance(delta.get("id"), str):
            self.id = delta["id"]
        if isinstance(delta.get("type"), str):
            self.kind = delta["type"]
        function = delta.get("function") or delta.get("custom")
        if isinstance(function, dict):
            if isinstance(function.get("name"), str):
                self.name = function["name"]
            chunk = function.get("arguments", function.get("input"))
            if isinstance(chunk, str):
                self.arguments.append(chunk)

    def part(self) -> Part:
        arguments = "".join(self.arguments)
        return {
            "type": "tool_call",
            "id": self.id,
            "name": self.name,
            "arguments": arguments if self.kind == "custom" else parse_arguments(arguments),
        }


class _ChoiceBuffer:
    """The deltas of one choice, joined once at the end."""

    __slots__ = (
        "audio",
        "audio_data",
        "finish_reason",
        "function_call",
        "reasoning",
        "reasoning_key",
        "refusal",
        "text",
        "tool_calls",
        "transcript",
    )

    def __init__(self) -> None:
        self.text: list[str] = []
        self.refusal: list[str] | None = None
        self.reasoning: list[str] = []
        self.reasoning_key: str | None = None
        self.audio: dict[str, Any] | None = None
        self.audio_data: list[str] = []
        self.transcript: list[str] = []
        self.tool_calls: dict[int, _ToolCallBuffer] = {}
        self.function_call: _ToolCallBuffer | None = None
        self.finish_reason: str | None = None

    def feed(self, delta: dict[str, Any]) -> None:
        # One pass over the keys present: most deltas carry a single "content" string.
        for key, value in delta.items():
            if value is None:
                continue
            if key == "content":
                if value.__class__ is str:
                    self.text.append(value)
            elif key == "tool_calls":
                if type(value) is list:
                    for call in value:
                        if type(call) is dict:
                            self._tool_call(call)
            elif key == "refusal":
                if value.__class__ is str:
                    if self.refusal is None:
                        self.refusal = []
                    self.refusal.append(value)
            elif key in ("reasoning_content", "reasoning"):
                # Not OpenAI's: compatible servers stream reasoning under either name
                # (some under both, with the same text); the first name seen is kept.
                if value.__class__ is str and self.reasoning_key in (None, key):
                    self.reasoning_key = key
                    self.reasoning.append(value)
            elif key == "function_call":
                if type(value) is dict:
                    if self.function_call is None:
                        self.function_call = _ToolCallBuffer()
                    self.function_call.feed({"function": value})
            elif key == "audio" and type(value) is dict:
                self._audio(value)

    def _tool_call(self, call: Mapping[str, Any]) -> None:
        index = call.get("index")
        if not isinstance(index, int):
            # Some compatible servers send whole calls without an index: one call each,
            # unless this is a continuation of the last call (no new id).
            last = len(self.tool_calls) - 1
            fresh = isinstance(call.get("id"), str) or last < 0
            index = len(self.tool_calls) if fresh else max(self.tool_calls)
        buffer = self.tool_calls.get(index)
        if buffer is None:
            buffer = self.tool_calls[index] = _ToolCallBuffer()
        buffer.feed(call)

    def _audio(self, audio: Mapping[str, Any]) -> None:
        if self.audio is None:
            self.audio = {}
        if isinstance(audio.get("id"), str):
            self.audio["id"] = audio["id"]
        if isinstance(audio.get("data"), str):
            self.audio_data.append(audio["data"])
        if isinstance(audio.get("transcript"), str):
            self.transcript.append(audio["transcript"])

    def _has_more_than_text(self) -> bool:
        return bool(
            self.tool_calls
            or self.function_call is not None
            or self.refusal is not None
            or self.audio is not None
        )

    def message(self) -> tuple[str, Message]:
        """The finish reason and the assembled message, with the parts the same answer has
        unstreamed: a stream opens with ``"content": ""`` where the unstreamed message has
        ``null`` beside tool calls (or a refusal, or audio), so an empty text stands as a part
        only for an answer that is empty text."""
        parts: list[Part] = []
        if self.reasoning:
            parts.append({"type": "reasoning", "content": "".join(self.reasoning)})
        text = "".join(self.text)
        if text or (self.text and not self._has_more_than_text()):
            parts.append({"type": "text", "content": text})
        if self.refusal is not None:
            parts.append({"type": "refusal", "content": "".join(self.refusal)})
        if self.audio is not None:
            parts.extend(
                _audio_parts(
                    {"data": "".join(self.audio_data), "transcript": "".join(self.transcript)}
                )
            )
        parts.extend(self.tool_calls[i].part() for i in sorted(self.tool_calls))
        if self.function_call is not None:
            parts.append(self.function_call.part())
        reason = self.finish_reason or "error"
        return reason, {
            "role": "assistant",
            "parts": parts,
            "finish_reason": normalise_finish_reason(reason),
        }


def _feed_choices(choices: dict[Any, _ChoiceBuffer], deltas: list[Any]) -> None:
    for choice in deltas:
        if type(choice) is not dict:
            continue
        index = choice.get("index", 0)
        buffer = choices.get(index)
        if buffer is None:
            buffer = choices[index] = _ChoiceBuffer()
        delta = choice.get("delta")
        if type(delta) is dict:
            buffer.feed(delta)
        reason = choice.get("finish_reason")
        if reason.__class__ is str:
            buffer.finish_reason = reason


def from_stream(body: bytes) -> LlmResponse:
    choices: dict[Any, _ChoiceBuffer] = {}
    first: dict[str, Any] | None = None  # the first chunk naming the completion
    last: dict[str, Any] | None = None  # the last chunk, whose tier and fingerprint win
    error_type: str | None = None
    usage: Any = None
    done = False  # "[DONE]" is the terminal event: the SDK stops reading there
    for event in parse_sse(body):
        data = event.data
        if data.startswith("[DONE]"):
            done = True
            continue
        try:
            chunk = decode_str(data)
        except ValueError:
            continue  # a chunk cut mid-way by an abandoned stream
        if type(chunk) is not dict:
            continue
        error = chunk.get("error")
        if error is not None:
            error_type = error_type_of(error) or error_type
            continue
        if first is None and chunk.get("id"):
            first = chunk
        last = chunk
        chunk_usage = chunk.get("usage")
        if chunk_usage is not None:
            usage = chunk_usage
        deltas = chunk.get("choices")
        if type(deltas) is list:
            _feed_choices(choices, deltas)
    attrs: dict[str, AttributeValue] = {}
    if first is not None:
        _common_response_attributes(first, attrs)
    if last is not None:  # service tier and fingerprint may only arrive on later chunks
        put_str(attrs, RESPONSE_SERVICE_TIER, last.get("service_tier"))
        put_str(attrs, SYSTEM_FINGERPRINT, last.get("system_fingerprint"))
    _usage(attrs, usage)
    messages: list[Message] = []
    reasons: list[str] = []
    for index in sorted(choices, key=_sort_key):
        reason, message = choices[index].message()
        reasons.append(reason)
        messages.append(message)
    if reasons:
        attrs[FINISH_REASONS] = reasons
    return LlmResponse(attrs, messages, error_type, finished=done)


def _sort_key(index: Any) -> tuple[bool, Any]:
    """Choice indexes in order; a non-integer index from an odd server sorts last."""
    return (type(index) is not int, index if type(index) is int else 0)
