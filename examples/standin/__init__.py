"""A local stand-in model provider and toy tool backend, for demos and tests (stdlib only).

It speaks OpenAI Chat Completions, OpenAI Responses and Anthropic Messages (streaming or not)
well enough for the real SDKs, records every request byte for byte, and answers like a small
support-desk model: it calls `lookup_order`, `get_weather` and `refund_order` when offered and
the user asks for them, then quotes the tool results (rules in `_brain.py`).

    with StandIn() as standin:
        client = openai.OpenAI(base_url=standin.openai_base_url, api_key="sk-standin-not-a-secret")
        ...
        standin.received  # [RecordedRequest(method, path, query, headers, body), ...]

Special models: `standin-error` (HTTP 429 in the provider's error format), `standin-cut` (the
answer stops mid-stream and the connection drops), `standin-slow` (2 s before the headers),
`standin-flaky` (HTTP 429 to the first request of each distinct body, then the answer; the header
`x-standin-fail-first: N` refuses the first N instead, for any model and for tool calls, and
`x-standin-fail-status: 503` refuses them with that status), `standin-loop` (asks for the same
tools again after their results), `standin-unoffered`, `standin-bad-arguments`,
`standin-bad-json` (tool calls that are wrong: rules in `_brain.py`).
An integer `seed` in the request body makes the wording deterministic; ids stay random.
Command line: `python -m examples.standin --port 8765 [--port-file PATH] [--event-delay S]`.
"""

from __future__ import annotations

from .recording import RecordedRequest
from .server import StandIn

__all__ = ["RecordedRequest", "StandIn"]
