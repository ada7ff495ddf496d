"""Codec for the Anthropic Messages API (``POST …/v1/messages``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from opentelemetry.util.types import AttributeValue

from otel_replay.codecs._anthropic_messages_response import (
    OTHER_ERROR,
    content_parts,
    error_type_of,
    message_response,
    parse_stream,
)
from otel_replay.codecs._json import loads
from otel_replay.codecs._types import Codec, LlmRequest, LlmResponse, Message
from otel_replay.errors import CodecError

__all__ = ["ANTHROPIC_MESSAGES", "AnthropicMessagesCodec"]

REQUEST_MODEL: Final = "gen_ai.request.model"
REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
REQUEST_TOP_P: Final = "gen_ai.request.top_p"
REQUEST_TOP_K: Final = "gen_ai.request.top_k"
REQUEST_STOP_SEQUENCES: Final = "gen_ai.request.stop_sequences"
REQUEST_STREAM: Final = "gen_ai.request.stream"
REQUEST_REASONING_LEVEL: Final = "gen_ai.request.reasoning.level"
OUTPUT_TYPE: Final = "gen_ai.output.type"

# Request keys only OpenAI's APIs use: with them and without max_tokens, a body is not ours.
_OPENAI_ONLY_KEYS: Final = frozenset(
    {
        "max_completion_tokens",
        "n",
        "response_format",
        "frequency_penalty",
        "presence_penalty",
        "logprobs",
        "top_logprobs",
        "logit_bias",
        "seed",
        "functions",
        "function_call",
        "parallel_tool_calls",
        "modalities",
        "audio",
        "reasoning_effort",
        "input",
        "instructions",
    }
)
_SSE_START: Final = (b"event:", b"data:", b":", b"id:", b"retry:")


class AnthropicMessagesCodec:
    """The Anthropic Messages API: ``POST /v1/messages``, JSON or SSE responses."""

    @property
    def name(self) -> str:
        return "anthropic.messages"

    def matches(self, path: str, body: Mapping[str, Any]) -> bool:
        """A POST to ``…/messages`` whose body has a ``messages`` list and ``max_tokens``.

        ``/messages/batches`` and ``/messages/count_tokens`` are other operations. A body without
        ``max_tokens`` still matches when it names a ``model`` and uses no OpenAI-only key.
        """
        path = path.partition("?")[0].rstrip("/")
        if not path.endswith("/messages") or not isinstance(body.get("messages"), list):
            return False
        if "max_tokens" in body:
            return True
        return "model" in body and _OPENAI_ONLY_KEYS.isdisjoint(body)

    def parse_request(self, path: str, body: Mapping[str, Any]) -> LlmRequest:
        model = body.get("model")
        model = model if isinstance(model, str) else None
        stream = body.get("stream") is True
        attributes: dict[str, AttributeValue] = {}
        if model is not None:
            attributes[REQUEST_MODEL] = model
        _put_int(attributes, REQUEST_MAX_TOKENS, body.get("max_tokens"))
        _put_float(attributes, REQUEST_TEMPERATURE, body.get("temperature"))
        _put_float(attributes, REQUEST_TOP_P, body.get("top_p"))
        _put_int(attributes, REQUEST_TOP_K, body.get("top_k"))
        stops = body.get("stop_sequences")
        if isinstance(stops, list) and stops and all(isinstance(s, str) for s in stops):
            attributes[REQUEST_STOP_SEQUENCES] = list(stops)
        if stream:
            attributes[REQUEST_STREAM] = True
        output_config = body.get("output_config")
        if isinstance(output_config, Mapping):
            effort = output_config.get("effort")
            if isinstance(effort, str):
                attributes[REQUEST_REASONING_LEVEL] = effort
            if isinstance(output_config.get("format"), Mapping):
                attributes[OUTPUT_TYPE] = "json"
        if isinstance(body.get("output_format"), Mapping):  # the structured-outputs beta
            attributes[OUTPUT_TYPE] = "json"

        system = body.get("system")
        messages = body.get("messages")
        tools = body.get("tools")
        return LlmRequest(
            operation="chat",
            provider="anthropic",
            model=model,
            stream=stream,
            attributes=attributes,
            system_instructions=[] if system is None else content_parts(system),
            input_messages=(
                [_message(m) for m in messages if isinstance(m, Mapping)]
                if isinstance(messages, list)
                else []
            ),
            tool_definitions=(
                [_tool_definition(t) for t in tools if isinstance(t, Mapping)]
                if isinstance(tools, list)
                else []
            ),
        )

    def parse_response(self, status: int, body: bytes, streamed: bool) -> LlmResponse:
        """Read a message, an error object or a whole event stream.

        ``streamed`` is a hint: a streamed request answered with a JSON error body, or a plain
        request answered with events, is read as what it is. Raises :class:`CodecError` only for
        a successful non-stream body that is not a JSON object; an unreadable error body gives
        an empty response (the HTTP status describes the error).
        """
        head = body[:64].lstrip()[:8]
        if head.startswith(_SSE_START) or (streamed and not head.startswith(b"{")):
            return parse_stream(body)
        try:
            data = loads(body)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            if status >= 400:
                return LlmResponse()
            raise CodecError(f"Anthropic Messages response is not JSON (HTTP {status})") from exc
        if not isinstance(data, dict):
            if status >= 400:
                return LlmResponse()
            raise CodecError(f"Anthropic Messages response is not a JSON object (HTTP {status})")
        if status >= 400 or data.get("type") == "error":
            error_type = error_type_of(data)
            if error_type is None and status < 400:
                error_type = OTHER_ERROR
            return LlmResponse(error_type=error_type)
        return message_response(data)


ANTHROPIC_MESSAGES: Final[Codec] = AnthropicMessagesCodec()


# -- request helpers -------------------------------------------------------------------------


def _put_int(attributes: dict[str, AttributeValue], key: str, value: object) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        attributes[key] = value
    elif isinstance(value, float) and value.is_integer():
        attributes[key] = int(value)


def _put_float(attributes: dict[str, AttributeValue], key: str, value: object) -> None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        attributes[key] = float(value)


def _message(message: Mapping[str, Any]) -> Message:
    role = message.get("role")
    return {
        "role": role if isinstance(role, str) else "user",
        "parts": content_parts(message.get("content")),
    }


def _tool_definition(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A custom tool as a GenAI function definition; a server tool kept as sent."""
    kind = tool.get("type")
    if kind is not None and kind != "custom":
        return dict(tool)
    definition: dict[str, Any] = {"type": "function", "name": tool.get("name")}
    if "description" in tool:
        definition["description"] = tool["description"]
    if "input_schema" in tool:
        definition["parameters"] = tool["input_schema"]
    return definition
