"""Codec for the OpenAI Responses API (``POST .../responses``).

Mapping decisions (see the GenAI semantic conventions and their OpenAI refinement):

* ``instructions`` are given separately from the conversation, so they become
  ``system_instructions``; ``system``/``developer`` items of ``input`` stay in
  ``input_messages`` (role ``system``), as the conventions' own Responses example shows.
* Input items become messages: consecutive assistant-side items (``reasoning``, assistant
  ``message``, ``function_call``, built-in tool calls) are one assistant message, the way a
  previous response's ``output`` is echoed back; each ``function_call_output`` is one ``tool``
  message with a ``tool_call_response`` part.
* A response is one generation, so ``output_messages`` holds one assistant message whose
  parts are all output items in order. Built-in (provider-run) tools become
  ``server_tool_call`` / ``server_tool_call_response`` parts, as in the conventions'
  ``code_interpreter`` example.
* The Responses API has no finish reason, so one is derived from the response status (the
  same value in ``gen_ai.response.finish_reasons`` and the message's ``finish_reason``):
  ``completed`` -> ``tool_call`` when the output asks the client to run a tool, else
  ``compaction`` when it holds a compaction item, else ``stop``; ``incomplete`` ->
  ``length`` for ``max_output_tokens``, ``content_filter`` for ``content_filter``, else the
  provider's reason; ``failed`` -> ``error``; ``cancelled`` -> ``cancelled``; a stream that
  ended before its terminal event -> ``error``.
"""

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
