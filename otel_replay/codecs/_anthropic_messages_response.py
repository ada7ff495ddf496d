"""The response side of the Anthropic Messages codec: content blocks, messages, streams."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from opentelemetry.util.types import AttributeValue

from otel_replay.codecs._sse import SseEvent, parse_sse
from otel_replay.codecs._types import LlmResponse, Message, Part

__all__ = ["OTHER_ERROR", "content_parts", "error_type_of", "message_response", "parse_stream"]

RESPONSE_ID: Final = "gen_ai.response.id"
RESPONSE_MODEL: Final = "gen_ai.response.model"
RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
USAGE_CACHE_WRITE_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"

# The finish reason reported when the model's own stop reason never arrived.
ERROR_FINISH: Final = "error"
# Stop reasons in the output-messages schema's finish-reason vocabulary.
_MESSAGE_FINISH: Final = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_call",
    "refusal": "content_filter",
}
# error.type's conventional fallback, for an Anthropic error object without its own type.
OTHER_ERROR: Final = "_OTHER"

_SERVER_TOOL_CALL_TYPES: Final = frozenset({"server_tool_use", "mcp_tool_use"})
_MEDIA_MODALITY: Final = {"image": "image", "document": "document"}


# -- content blocks (request and response alike) ---------------------------------------------


def content_parts(content: object) -> list[Part]:
    """A ``content`` (or ``system``) value, a string or a list of blocks, as GenAI parts."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    if isinstance(content, list):
        parts: list[Part] = []
        for block in content:
            if isinstance(block, Mapping):
                parts.append(_part(block))
            elif isinstance(block, str):
                parts.append({"type": "text", "content": block})
        return parts
    return []


def _part(block: Mapping[str, Any]) -> Part:
    """One content block as a GenAI part."""
    kind = block.get("type")
    if not isinstance(kind, str):
        return {**block, "type": "unknown"}
    if kind == "text":
        return {"type": "text", "content": block.get("text", "")}
    if kind in _SERVER_TOOL_CALL_TYPES:
        return _server_tool_call(block)
    if kind == "tool_use":
        return {
            "type": "tool_call",
            "id": block.get("id"),
            "name": block.get("name"),
            "arguments": block.get("input"),
        }
    if kind == "tool_result":
        result = block.get("content")
        part: Part = {
            "type": "tool_call_response",
            "id": block.get("tool_use_id"),
            "response": content_parts(result) if isinstance(result, list) else result,
        }
        if block.get("is_error") is True:
            part["is_error"] = True
        return part
    if kind == "thinking":
        return {"type": "reasoning", "content": block.get("thinking", "")}
    if kind == "redacted_thinking":
        return {"type": "reasoning", "content": "", "redacted": True}
    if kind in _MEDIA_MODALITY:
        media = _media_part(_MEDIA_MODALITY[kind], block.get("source"))
        if media is not None:
            return media
    elif kind.endswith("_tool_result"):
        details = {k: v for k, v in block.items() if k != "tool_use_id"}
        return {
            "type": "server_tool_call_response",
            "id": block.get("tool_use_id"),
            "server_tool_call_response": details,
        }
    return dict(block)


def _server_tool_call(block: Mapping[str, Any]) -> Part:
    name = block.get("name")
    details: dict[str, Any] = {"type": name}
    for key, value in block.items():
        if key not in ("type", "id", "name"):
            details[key] = value
    return {
        "type": "server_tool_call",
        "id": block.get("id"),
        "name": name,
        "server_tool_call": details,
    }


def _media_part(modality: str, source: object) -> Part | None:
    """An image or document source as a blob, uri or file part; None for other sources."""
    if not isinstance(source, Mapping):
        return None
    kind = source.get("type")
    if kind == "base64":
        return {
            "type": "blob",
            "modality": modality,
            "mime_type": source.get("media_type"),
            "content": source.get("data"),
        }
    if kind == "url":
        return {"type": "uri", "modality": modality, "uri": source.get("url")}
    if kind == "file":
        return {"type": "file", "modality": modality, "file_id": source.get("file_id")}
    return None


# -- responses -------------------------------------------------------------------------------


def error_type_of(data: Mapping[str, Any]) -> str | None:
    """The provider's error type (``rate_limit_error``…) of an error object, if it has one."""
    error = data.get("error")
    if isinstance(error, Mapping):
        kind = error.get("type")
        if isinstance(kind, str) and kind:
            return kind
    return None


def message_response(data: Mapping[str, Any]) -> LlmResponse:
    attributes: dict[str, AttributeValue] = {}
    _put_str(attributes, RESPONSE_ID, data.get("id"))
    _put_str(attributes, RESPONSE_MODEL, data.get("model"))
    finish = _finish_reason(data.get("stop_reason"))
    attributes[RESPONSE_FINISH_REASONS] = [finish]
    usage = data.get("usage")
    if isinstance(usage, Mapping):
        _put_usage(attributes, usage)
    role = data.get("role")
    message: Message = {
        "role": role if isinstance(role, str) else "assistant",
        "parts": content_parts(data.get("content")),
        "finish_reason": _MESSAGE_FINISH.get(finish, finish),
    }
    return LlmResponse(attributes=attributes, output_messages=[message])


def _finish_reason(stop_reason: object) -> str:
    return stop_reason if isinstance(stop_reason, str) and stop_reason else ERROR_FINISH


def _put_str(attributes: dict[str, AttributeValue], key: str, value: object) -> None:
    if isinstance(value, str):
        attributes[key] = value


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _put_usage(attributes: dict[str, AttributeValue], usage: Mapping[str, Any]) -> None:
    uncached = _count(usage.get("input_tokens"))
    cache_read = _count(usage.get("cache_read_input_tokens"))
    cache_write = _count(usage.get("cache_creation_input_tokens"))
    if uncached is not None or cache_read is not None or cache_write is not None:
        attributes[USAGE_INPUT_TOKENS] = (uncached or 0) + (cache_read or 0) + (cache_write or 0)
    output = _count(usage.get("output_tokens"))
    if output is not None:
        attributes[USAGE_OUTPUT_TOKENS] = output
    if cache_read is not None:
        attributes[USAGE_CACHE_READ_INPUT_TOKENS] = cache_read
    if cache_write is not None:
        attributes[USAGE_CACHE_WRITE_INPUT_TOKENS] = cache_write
    details = usage.get("output_tokens_details")
    if isinstance(details, Mapping):
        thinking = _count(details.get("thinking_tokens"))
        if thinking is not None:
            attributes[USAGE_REASONING_OUTPUT_TOKENS] = thinking


class _Block:
    """One content block being assembled from a stream."""

    __slots__ = ("json", "start", "text")

    def __init__(self, start: Mapping[str, Any]) -> None:
        self.start = start
        self.text: list[str] = []
        self.json: list[str] = []

    def finish(self) -> Part:
        block = dict(self.start)
        kind = block.get("type")
        if kind == "text":
            block["text"] = _joined(block.get("text"), self.text)
        elif kind == "thinking":
            block["thinking"] = _joined(block.get("thinking"), self.text)
        raw = "".join(self.json)
        if raw:  # a tool without arguments streams one empty piece: its {} stands
            try:
                block["input"] = json.loads(raw)
            except ValueError:
                block["input"] = raw  # cut mid-arguments: keep what arrived
        return _part(block)


def _joined(initial: object, pieces: list[str]) -> str:
    if isinstance(initial, str) and initial:
        return initial + "".join(pieces)
    return "".join(pieces)


def parse_stream(body: bytes) -> LlmResponse:
    """Rebuild the message from its events; a stream cut anywhere yields what arrived."""
    events = list(parse_sse(body))
    stream = _Stream()
    for event, data in zip(events, _decoded(events), strict=True):
        if isinstance(data, dict):
            stream.feed(data.get("type", event.event), data)
    return stream.result()


def _decoded(events: list[SseEvent]) -> list[object]:
    """Each event's JSON data, None where it is not JSON (a stream cut mid-event)."""
    # One json.loads for the whole stream is much cheaper than one per event; fall back to
    # per-event decoding when any event is not a single JSON value.
    try:
        decoded = json.loads("[" + ",".join([event.data for event in events]) + "]")
        if isinstance(decoded, list) and len(decoded) == len(events):
            return decoded
    except ValueError:
        pass
    values: list[object] = []
    for event in events:
        try:
            values.append(json.loads(event.data))
        except ValueError:
            values.append(None)
    return values


class _Stream:
    """The state of one event stream: the message so far, its blocks, usage and stop."""

    __slots__ = ("blocks", "error_type", "message", "stop_reason", "stopped", "usage")

    def __init__(self) -> None:
        self.message: Mapping[str, Any] | None = None
        self.blocks: dict[int, _Block] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: object = None
        self.error_type: str | None = None
        self.stopped = False

    def feed(self, kind: object, data: dict[str, Any]) -> None:
        # ping, content_block_stop and unknown events change nothing here.
        if kind == "content_block_delta":
            self._delta(data)
        elif kind == "content_block_start":
            start = data.get("content_block")
            index = data.get("index")
            if isinstance(start, Mapping) and isinstance(index, int):
                self.blocks[index] = _Block(start)
        elif kind == "message_start":
            self._start(data.get("message"))
        elif kind == "message_delta":
            delta = data.get("delta")
            if isinstance(delta, Mapping) and delta.get("stop_reason") is not None:
                self.stop_reason = delta["stop_reason"]
            usage = data.get("usage")
            if isinstance(usage, Mapping):
                # Cumulative counts: the latest non-null value of each wins.
                self.usage.update((k, v) for k, v in usage.items() if v is not None)
        elif kind == "message_stop":
            self.stopped = True
        elif kind == "error":
            self.error_type = error_type_of(data) or OTHER_ERROR

    def _start(self, message: object) -> None:
        if not isinstance(message, Mapping):
            return
        self.message = message
        usage = message.get("usage")
        if isinstance(usage, Mapping):
            self.usage.update(usage)
        content = message.get("content")
        if isinstance(content, list):
            for index, start in enumerate(content):
                if isinstance(start, Mapping):
                    self.blocks[index] = _Block(start)

    def _delta(self, data: dict[str, Any]) -> None:
        index = data.get("index")
        block = self.blocks.get(index) if isinstance(index, int) else None
        delta = data.get("delta")
        if block is None or not isinstance(delta, Mapping):
            return
        kind = delta.get("type")
        if kind == "text_delta":
            _append(block.text, delta.get("text"))
        elif kind == "input_json_delta":
            _append(block.json, delta.get("partial_json"))
        elif kind == "thinking_delta":
            _append(block.text, delta.get("thinking"))
        # signature_delta and citations_delta carry nothing we report.

    def result(self) -> LlmResponse:
        message = self.message
        attributes: dict[str, AttributeValue] = {}
        if message is not None:
            _put_str(attributes, RESPONSE_ID, message.get("id"))
            _put_str(attributes, RESPONSE_MODEL, message.get("model"))
        finish = ERROR_FINISH if self.error_type is not None else _finish_reason(self.stop_reason)
        attributes[RESPONSE_FINISH_REASONS] = [finish]
        if self.usage:
            _put_usage(attributes, self.usage)
        output_messages: list[Message] = []
        if message is not None or self.blocks:
            role = message.get("role") if message is not None else None
            output_messages.append(
                {
                    "role": role if isinstance(role, str) else "assistant",
                    "parts": _parts([self.blocks[i].finish() for i in sorted(self.blocks)]),
                    "finish_reason": _MESSAGE_FINISH.get(finish, finish),
                }
            )
        return LlmResponse(
            attributes=attributes,
            output_messages=output_messages,
            error_type=self.error_type,
            # The message_delta carrying the stop reason is the last event with content (only
            # an empty message_stop follows), and clients such as LiteLLM close the stream as
            # soon as they have it: the answer arrived whole.
            finished=self.stopped or (self.stop_reason is not None and self.error_type is None),
        )


def _parts(parts: list[Part]) -> list[Part]:
    """A streamed message's parts as the unstreamed message has them: a text block the stream
    opened and never filled is no part of it when the message holds anything else."""
    if len(parts) > 1 and any(_empty_text(p) for p in parts):
        kept = [p for p in parts if not _empty_text(p)]
        return kept or parts[:1]
    return parts


def _empty_text(part: Part) -> bool:
    return part.get("type") == "text" and not part.get("content")


def _append(pieces: list[str], value: object) -> None:
    if isinstance(value, str):
        pieces.append(value)
