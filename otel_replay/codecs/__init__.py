"""Provider codecs: pure functions from exact request/response bodies to GenAI attributes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from otel_replay import attributes as A
from otel_replay._canonical import canonical_json, sha256_tag
from otel_replay.codecs._sse import SseEvent, parse_sse
from otel_replay.codecs._types import Codec, LlmRequest, LlmResponse, Message, Part
from otel_replay.codecs.anthropic_messages import ANTHROPIC_MESSAGES
from otel_replay.codecs.openai_chat import OPENAI_CHAT
from otel_replay.codecs.openai_responses import OPENAI_RESPONSES

__all__ = [
    "CODECS",
    "INFERENCE_OPERATIONS",
    "Codec",
    "LlmRequest",
    "LlmResponse",
    "Message",
    "Part",
    "SseEvent",
    "detect",
    "parse_sse",
    "prompt_hash",
    "request_content",
    "response_content",
]

CODECS: tuple[Codec, ...] = (OPENAI_CHAT, OPENAI_RESPONSES, ANTHROPIC_MESSAGES)

INFERENCE_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
"""``gen_ai.operation.name`` values of a model call, ours or another GenAI instrumentation's."""


def detect(method: str, path: str, body: object) -> Codec | None:
    """The codec for a request, or None for a plain HTTP call.

    Only POSTs with a JSON object body can be model calls; the first codec whose path and
    body shape match wins.
    """
    if method != "POST" or not isinstance(body, Mapping):
        return None
    typed: Mapping[str, Any] = body
    for codec in CODECS:
        if codec.matches(path, typed):
            return codec
    return None


def prompt_hash(messages: bytes, system: bytes) -> str:
    """``replay.prompt.hash`` from the canonical JSON of the input messages and of the system
    instructions (``b"[]"`` when there are none): the hash of
    ``canonical_json({"input_messages": m, "system_instructions": s})``, without re-encoding."""
    return sha256_tag(b'{"input_messages":', messages, b',"system_instructions":', system, b"}")


def request_content(llm: LlmRequest) -> dict[str, str]:
    """A request's content attributes as its span carries them, in the span's order:
    ``replay.prompt.hash``, ``replay.tool.schema.version`` (with tools), then
    ``gen_ai.input.messages``, ``gen_ai.system_instructions`` and ``gen_ai.tool.definitions``
    (each when there is some). The capture writes them and the store rebuilds them with this
    one function; what it gives depends on ``llm``'s content alone."""
    messages = canonical_json(llm.input_messages)
    system = canonical_json(llm.system_instructions) if llm.system_instructions else b"[]"
    tools = canonical_json(llm.tool_definitions) if llm.tool_definitions else None
    out = {A.REPLAY_PROMPT_HASH: prompt_hash(messages, system)}
    if tools is not None:
        out[A.REPLAY_TOOL_SCHEMA_VERSION] = sha256_tag(tools)
    out["gen_ai.input.messages"] = messages.decode()
    if llm.system_instructions:
        out["gen_ai.system_instructions"] = system.decode()
    if tools is not None:
        out["gen_ai.tool.definitions"] = tools.decode()
    return out


def response_content(answer: LlmResponse) -> dict[str, str]:
    """A response's content attribute as its span carries it (``gen_ai.output.messages``,
    when there are some), written and rebuilt with this one function as
    :func:`request_content`."""
    if not answer.output_messages:
        return {}
    return {"gen_ai.output.messages": canonical_json(answer.output_messages).decode()}
