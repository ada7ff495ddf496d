"""Provider codecs: pure functions from exact request/response bodies to GenAI attributes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
    "detect",
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
