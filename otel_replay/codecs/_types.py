"""The shapes every provider codec produces.

A codec raises :class:`~otel_replay.errors.CodecError` only when a body is not the provider's
shape, never for a body it merely dislikes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from opentelemetry.util.types import AttributeValue

__all__ = ["Codec", "LlmRequest", "LlmResponse", "Message", "Part"]

# GenAI structured content (gen_ai.input.messages / gen_ai.output.messages), JSON-ready.
Part = dict[str, Any]
Message = dict[str, Any]


@dataclass(slots=True)
class LlmRequest:
    """What a codec reads from a request body.

    ``attributes`` holds only non-content attributes (``gen_ai.request.*``,
    ``gen_ai.output.type``, ``gen_ai.conversation.id``...). Content lives in the three lists, in
    the GenAI structured shape, so the capture layer can drop it when content capture is off.
    """

    operation: str
    provider: str
    model: str | None
    stream: bool
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    system_instructions: list[Part] = field(default_factory=list)
    input_messages: list[Message] = field(default_factory=list)
    tool_definitions: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class LlmResponse:
    """What a codec reads from a complete response body (the whole stream for SSE).

    ``attributes`` holds ``gen_ai.response.*`` and ``gen_ai.usage.*``. ``error_type`` is the
    provider's own error type when the body is an error object (for example
    ``rate_limit_error``), else None. ``finished`` is False when a stream ended before the
    provider's terminal event: SDKs close the stream as soon as they see that event, so it,
    not the end of the byte stream, says whether the answer arrived whole.
    """

    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    output_messages: list[Message] = field(default_factory=list)
    error_type: str | None = None
    finished: bool = True


class Codec(Protocol):
    """One provider API (for example OpenAI Chat Completions)."""

    @property
    def name(self) -> str:
        """Stable identifier, for example ``openai.chat_completions``."""
        ...

    def matches(self, path: str, body: Mapping[str, Any]) -> bool:
        """True when a POST to ``path`` with this JSON body is a call to this API.

        Decides by path suffix and body shape, never by host: users point base URLs at
        proxies, Azure deployments and local servers.
        """
        ...

    def parse_request(self, path: str, body: Mapping[str, Any]) -> LlmRequest:
        """Read the request attributes and content from the decoded JSON request body.

        The content (the three lists) depends on ``body`` alone, never on ``path``: the store
        rebuilds a span's content attributes from the stored body without it."""
        ...

    def parse_response(self, status: int, body: bytes, streamed: bool) -> LlmResponse:
        """Read the response from its exact bytes; ``streamed`` means an SSE body."""
        ...
