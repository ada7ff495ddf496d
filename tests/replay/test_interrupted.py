"""A request the recording saw interrupted (Ctrl-C while it was on its way) is interrupted
again on replay, with ``KeyboardInterrupt`` itself: as a transport error the openai SDK retried
it, and the replay said "diverged, already served" instead of ending as the program did."""

from __future__ import annotations

import httpx
import openai
import pytest
import requests

import otel_replay
from otel_replay._canonical import sha256_tag
from otel_replay.replay import RecordedStep, Run

BASE = "http://127.0.0.1:9/v1"  # nothing listens there
REQUEST = b'{"messages":[{"role":"user","content":"hi"}],"model":"gpt-4o-mini"}'


def _run(url: str, body: bytes, kind: str, endpoint: str) -> Run:
    step = RecordedStep(
        index=0,
        kind=kind,
        endpoint=endpoint,
        method="POST",
        url=url,
        request_body=body,
        request_hash=sha256_tag(body),
        status_code=None,
        response_headers=(),
        response_body=b"",
        fidelity="exact",
        complete=False,
        error_type="KeyboardInterrupt",
    )
    return Run(run_id="r_interrupted", source="test", steps=(step,))


def test_the_openai_sdk_is_interrupted_again_and_does_not_retry() -> None:
    run = _run(f"{BASE}/chat/completions", REQUEST, "llm", "openai.chat_completions")
    client = openai.OpenAI(base_url=BASE, api_key="sk-interrupted", max_retries=2)
    with pytest.raises(KeyboardInterrupt), otel_replay.replaying(run) as result:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
        )
    assert [step.recorded for step in result.steps] == [0]  # asked once: no retry
    assert result.identical, result.first_divergence
    assert result.agent.error == "KeyboardInterrupt"


@pytest.mark.parametrize("client", ["httpx", "requests"])
def test_every_http_stack_is_interrupted_again(client: str) -> None:
    url = "http://tools.test/orders"
    run = _run(url, b"{}", "http", "POST /orders")
    with pytest.raises(KeyboardInterrupt), otel_replay.replaying(run):
        if client == "httpx":
            httpx.post(url, content=b"{}")
        else:
            requests.post(url, data=b"{}", timeout=5)
