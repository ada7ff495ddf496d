"""Codec for the OpenAI Chat Completions API (``POST .../chat/completions``) and the servers
that speak it: matched by path suffix and body shape, never by host."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.util.types import AttributeValue

from otel_replay.codecs._openai_chat_response import (
    assistant_parts,
    from_completion,
    from_stream,
)
from otel_replay.codecs._openai_common import (
    API_TYPE,
    MAX_TOKENS,
    OUTPUT_TYPE,
    REQUEST_MODEL,
    REQUEST_SERVICE_TIER,
    REQUEST_STREAM,
    content_parts,
    function_tool,
    generic_tool,
    looks_like_json_object,
    model_from_path,
    output_type,
    put_float,
    put_int,
    put_str,
    response_object,
    strip_path,
)
from otel_replay.codecs._types import LlmRequest, LlmResponse, Message, Part

__all__ = ["OPENAI_CHAT", "OpenAIChatCodec"]

_FLOAT_PARAMS: tuple[tuple[str, str], ...] = (
    ("temperature", "gen_ai.request.temperature"),
    ("top_p", "gen_ai.request.top_p"),
    ("frequency_penalty", "gen_ai.request.frequency_penalty"),
    ("presence_penalty", "gen_ai.request.presence_penalty"),
)
_ROLES = {"developer": "system", "function": "tool"}
_TOOL_ROLES = frozenset({"tool", "function"})


# --- requests -----------------------------------------------------------------------------


def _input_message(message: Any) -> Message:
    if not isinstance(message, dict):
        return {"role": "user", "parts": content_parts(message)}
    role = message.get("role")
    role = _ROLES.get(role, role) if isinstance(role, str) else "user"
    parts: list[Part]
    if role == "assistant":
        parts = assistant_parts(message)
    elif role == "tool":
        content = message.get("content")
        parts = [
            {
                "type": "tool_call_response",
                "id": message.get("tool_call_id"),
                "response": content if isinstance(content, str) else content_parts(content),
            }
        ]
    else:
        parts = content_parts(message.get("content"))
    result: Message = {"role": role, "parts": parts}
    name = message.get("name")
    if isinstance(name, str):
        result["name"] = name
    return result


def _input_messages(messages: list[Any]) -> list[Message]:
    out: list[Message] = []
    append = out.append
    for message in messages:
        # Fast path for the bulk of every history, which agents re-send each turn: a plain
        # {"role": <str>, "content": <str>} turn of any role but "tool"/"function". Exactly what
        # _input_message returns for it, without its calls and lookups.
        if message.__class__ is dict and len(message) == 2:
            role = message.get("role")
            content = message.get("content")
            if role.__class__ is str and content.__class__ is str and role not in _TOOL_ROLES:
                append(
                    {
                        "role": _ROLES.get(role, role),
                        "parts": [{"type": "text", "content": content}],
                    }
                )
                continue
        append(_input_message(message))
    return out


def _tool_definition(tool: Any) -> dict[str, Any]:
    if not isinstance(tool, dict):
        return {"type": "unknown", "name": None, "value": tool}
    kind = tool.get("type")
    if kind == "function" and isinstance(tool.get("function"), dict):
        return function_tool(tool["function"])
    if kind == "custom" and isinstance(tool.get("custom"), dict):
        return {"type": "custom", **tool["custom"]}
    return generic_tool(tool)


def _tool_definitions(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    definitions: list[dict[str, Any]] = []
    tools = body.get("tools")
    if isinstance(tools, list):
        definitions.extend(_tool_definition(tool) for tool in tools)
    functions = body.get("functions")  # deprecated: bare function definitions
    if isinstance(functions, list):
        definitions.extend(function_tool(f) for f in functions if isinstance(f, dict))
    return definitions


def _request_attributes(
    body: Mapping[str, Any], model: str | None, stream: bool
) -> dict[str, AttributeValue]:
    attrs: dict[str, AttributeValue] = {API_TYPE: "chat_completions"}
    if model:
        attrs[REQUEST_MODEL] = model
    max_tokens = body.get("max_completion_tokens")
    put_int(attrs, MAX_TOKENS, body.get("max_tokens") if max_tokens is None else max_tokens)
    for field, key in _FLOAT_PARAMS:
        put_float(attrs, key, body.get(field))
    stop = body.get("stop")
    if isinstance(stop, str):
        attrs["gen_ai.request.stop_sequences"] = [stop]
    elif isinstance(stop, list):
        attrs["gen_ai.request.stop_sequences"] = [s for s in stop if isinstance(s, str)]
    put_int(attrs, "gen_ai.request.seed", body.get("seed"))
    n = body.get("n")
    if n != 1:
        put_int(attrs, "gen_ai.request.choice.count", n)
    response_format = body.get("response_format")
    kind = response_format.get("type") if isinstance(response_format, dict) else response_format
    out = output_type(kind)
    if out is None:
        modalities = body.get("modalities")
        if isinstance(modalities, list) and "audio" in modalities:
            out = "speech"
    if out is not None:
        attrs[OUTPUT_TYPE] = out
    tier = body.get("service_tier")
    if tier != "auto":
        put_str(attrs, REQUEST_SERVICE_TIER, tier)
    if stream:
        attrs[REQUEST_STREAM] = True
    return attrs


# --- the codec ----------------------------------------------------------------------------


class OpenAIChatCodec:
    """OpenAI Chat Completions: ``POST .../chat/completions`` with a ``messages`` list."""

    @property
    def name(self) -> str:
        return "openai.chat_completions"

    def matches(self, path: str, body: Mapping[str, Any]) -> bool:
        path = strip_path(path)
        return (path.endswith("/chat/completions") or path == "chat/completions") and isinstance(
            body.get("messages"), list
        )

    def parse_request(self, path: str, body: Mapping[str, Any]) -> LlmRequest:
        model = body.get("model")
        if not isinstance(model, str) or not model:
            model = model_from_path(path)
        stream = body.get("stream") is True
        messages = body.get("messages")
        return LlmRequest(
            operation="chat",
            provider="openai",
            model=model,
            stream=stream,
            attributes=_request_attributes(body, model, stream),
            system_instructions=[],
            input_messages=_input_messages(messages) if isinstance(messages, list) else [],
            tool_definitions=_tool_definitions(body),
        )

    def parse_response(self, status: int, body: bytes, streamed: bool) -> LlmResponse:
        if streamed and not looks_like_json_object(body):
            return from_stream(body)
        data = response_object(status, body, "chat completion")
        return LlmResponse() if data is None else from_completion(data)


OPENAI_CHAT = OpenAIChatCodec()
