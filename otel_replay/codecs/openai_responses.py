"""Codec for the OpenAI Responses API (``POST .../responses``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.util.types import AttributeValue

from otel_replay.codecs._openai_common import (
    API_TYPE,
    CONVERSATION_ID,
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
from otel_replay.codecs._openai_responses_response import (
    from_response,
    from_stream,
    item_parts,
)
from otel_replay.codecs._types import LlmRequest, LlmResponse, Message, Part

__all__ = ["OPENAI_RESPONSES", "OpenAIResponsesCodec"]

_ROLES = {"developer": "system"}
_ASSISTANT_ITEMS = frozenset({"reasoning", "mcp_list_tools", "mcp_approval_request", "compaction"})


# --- requests -----------------------------------------------------------------------------


def _item_role(item: Mapping[str, Any]) -> str:
    kind = item.get("type")
    role = item.get("role")
    if (kind is None or kind == "message") and isinstance(role, str):
        return _ROLES.get(role, role)
    if isinstance(kind, str):
        if kind.endswith("_output"):
            return "tool"
        if kind.endswith("_call") or kind in _ASSISTANT_ITEMS:
            return "assistant"
    return _ROLES.get(role, role) if isinstance(role, str) else "user"


def _input_messages(items: Any) -> list[Message]:
    if isinstance(items, str):
        return [{"role": "user", "parts": [{"type": "text", "content": items}]}]
    if not isinstance(items, list):
        return []
    messages: list[Message] = []
    merging = False  # the last message collects consecutive assistant-side items
    for item in items:
        if not isinstance(item, dict):
            messages.append({"role": "user", "parts": content_parts(item)})
            merging = False
            continue
        role = _item_role(item)
        parts = item_parts(item)
        if role == "assistant" and merging:
            messages[-1]["parts"].extend(parts)
            continue
        messages.append({"role": role, "parts": parts})
        merging = role == "assistant"
    return messages


def _system_instructions(instructions: Any) -> list[Part]:
    if isinstance(instructions, str):
        return [{"type": "text", "content": instructions}]
    if not isinstance(instructions, list):
        return []
    parts: list[Part] = []
    for item in instructions:
        if isinstance(item, dict):
            parts.extend(item_parts(item))
        else:
            parts.extend(content_parts(item))
    return parts


def _tool_definitions(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        return []
    return [
        function_tool(tool) if tool.get("type") == "function" else generic_tool(tool)
        for tool in tools
        if isinstance(tool, dict)
    ]


def _request_attributes(
    body: Mapping[str, Any], model: str | None, stream: bool
) -> dict[str, AttributeValue]:
    attrs: dict[str, AttributeValue] = {API_TYPE: "responses"}
    if model:
        attrs[REQUEST_MODEL] = model
    put_int(attrs, MAX_TOKENS, body.get("max_output_tokens"))
    put_float(attrs, "gen_ai.request.temperature", body.get("temperature"))
    put_float(attrs, "gen_ai.request.top_p", body.get("top_p"))
    text = body.get("text")
    if isinstance(text, dict):
        fmt = text.get("format")
        out = output_type(fmt.get("type") if isinstance(fmt, dict) else None)
        if out is not None:
            attrs[OUTPUT_TYPE] = out
    tier = body.get("service_tier")
    if tier != "auto":
        put_str(attrs, REQUEST_SERVICE_TIER, tier)
    conversation = body.get("conversation")
    if isinstance(conversation, dict):
        conversation = conversation.get("id")
    put_str(attrs, CONVERSATION_ID, conversation)
    if stream:
        attrs[REQUEST_STREAM] = True
    return attrs


# --- the codec ----------------------------------------------------------------------------


class OpenAIResponsesCodec:
    """OpenAI Responses: ``POST .../responses`` with a ``model`` or an ``input``."""

    @property
    def name(self) -> str:
        return "openai.responses"

    def matches(self, path: str, body: Mapping[str, Any]) -> bool:
        path = strip_path(path)
        return (path.endswith("/responses") or path == "responses") and (
            "model" in body or "input" in body
        )

    def parse_request(self, path: str, body: Mapping[str, Any]) -> LlmRequest:
        model = body.get("model")
        if not isinstance(model, str) or not model:
            model = model_from_path(path)
        stream = body.get("stream") is True
        return LlmRequest(
            operation="chat",
            provider="openai",
            model=model,
            stream=stream,
            attributes=_request_attributes(body, model, stream),
            system_instructions=_system_instructions(body.get("instructions")),
            input_messages=_input_messages(body.get("input")),
            tool_definitions=_tool_definitions(body.get("tools")),
        )

    def parse_response(self, status: int, body: bytes, streamed: bool) -> LlmResponse:
        if streamed and not looks_like_json_object(body):
            return from_stream(body)
        data = response_object(status, body, "response")
        return LlmResponse() if data is None else from_response(data, True, None)


OPENAI_RESPONSES = OpenAIResponsesCodec()
