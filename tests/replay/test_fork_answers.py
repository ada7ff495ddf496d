"""A model answer overridden for Anthropic Messages, in the shape the request asks for: the
recorded streamed call (``CLAUDE``) asked again streamed and not, answered from ``text:`` and
from a Messages response body, through the real anthropic SDK and ``replaying()``."""

from __future__ import annotations

import json

import anthropic
import pytest

import otel_replay
from tests.replay.conftest import CLAUDE, KEY, Recorded

ASK = {
    "model": "claude-sonnet-4-6",
    "max_tokens": 300,
    "system": "You are a support agent.",
    "messages": [{"role": "user", "content": "Where is my order A-1234?"}],
}
BODY = {
    "id": "msg_fork",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-6",
    "content": [{"type": "text", "text": "From a body."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 3, "output_tokens": 4},
}


@pytest.mark.parametrize(
    ("override", "said"), [("text:Bonjour.", "Bonjour."), (json.dumps(BODY), "From a body.")]
)
@pytest.mark.parametrize("stream", [True, False])
def test_an_anthropic_answer_is_served_as_asked(
    recorded: Recorded, override: str, said: str, stream: bool
) -> None:
    client = anthropic.Anthropic(base_url="http://127.0.0.1:9", api_key=KEY, max_retries=0)
    with otel_replay.replaying(CLAUDE, store=str(recorded.store), override={0: override}) as result:
        if stream:
            with client.messages.stream(**ASK) as answer:  # type: ignore[arg-type]
                text = answer.get_final_text()
        else:
            message = client.messages.create(**ASK)  # type: ignore[arg-type]
            text = "".join(b.text for b in message.content if b.type == "text")
    assert text == said
    named = override if len(override) <= 60 else override[:59] + "…"  # a long body, cut
    assert [s.forked for s in result.steps] == [f"override {named}"]
