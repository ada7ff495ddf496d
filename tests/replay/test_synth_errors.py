"""Spans that cannot be replayed semantically get one-line SourceErrors naming the problem."""

from __future__ import annotations

import json
from typing import Any

import pytest

from otel_replay.errors import SourceError
from otel_replay.replay.synth import ENDPOINTS, synthesize

BASE = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}
GOOD = [{"role": "assistant", "parts": [{"type": "text", "content": "Hi"}]}]


@pytest.mark.parametrize(
    ("output", "says"),
    [
        (None, "has no gen_ai.output.messages: it cannot be replayed semantically"),
        ('[{"role": "assistant", "parts": [', "malformed gen_ai.output.messages: not JSON"),
        ('{"role": "assistant"}', "malformed gen_ai.output.messages: a JSON dict"),
        ("[]", "malformed gen_ai.output.messages: an empty list"),
        ('["hello"]', "message 0 is not an object"),
        ('[{"role": "assistant"}]', "message 0 has no parts list"),
        ([{"role": "assistant", "parts": "Hi"}], "message 0 has no parts list"),
        ([*GOOD, {"role": "assistant", "parts": ["Hi"]}], "message 1 has a part that is not"),
        (42, "malformed gen_ai.output.messages: a JSON int"),
    ],
    ids=[
        "absent",
        "truncated",
        "object",
        "empty",
        "string-message",
        "no-parts",
        "parts-string",
        "part-string",
        "number",
    ],
)
@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_missing_or_malformed_output_messages(
    endpoint: str, stream: bool, output: Any, says: str
) -> None:
    attrs = dict(BASE)
    if output is not None:
        attrs["gen_ai.output.messages"] = output
    with pytest.raises(SourceError) as caught:
        synthesize(endpoint, attrs, stream)
    message = str(caught.value)
    assert message.startswith("span 'chat gpt-4o' ")
    assert says in message
    assert "\n" not in message


def test_unknown_endpoint() -> None:
    attrs = {**BASE, "gen_ai.output.messages": json.dumps(GOOD)}
    with pytest.raises(SourceError, match=r"^span 'chat gpt-4o': no semantic replay for endpoint"):
        synthesize("GET /orders/1", attrs, False)


def test_what_the_span_lacks_is_filled_in_stably() -> None:
    """No id, model, usage or finish reason: the answer still replays, the same every time."""
    attrs = {"gen_ai.output.messages": json.dumps(GOOD)}
    for endpoint in ENDPOINTS:
        for stream in (False, True):
            made = synthesize(endpoint, attrs, stream)
            assert made.body and made == synthesize(endpoint, attrs, stream)
    body = json.loads(synthesize("openai.chat_completions", attrs, False).body)
    assert body["id"].startswith("chatcmpl-") and body["model"] == "unknown"
    assert body["choices"][0]["finish_reason"] == "stop" and "usage" not in body
