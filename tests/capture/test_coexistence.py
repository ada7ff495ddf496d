"""Living beside the official instrumentations: nest under theirs or theirs under ours, never
duplicate a model-call span."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import httpx
import httpx2
import openai
import pytest
from opentelemetry.instrumentation.httpx import HTTPX2ClientInstrumentor, HTTPXClientInstrumentor
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

from examples.standin import StandIn
from otel_replay.testing import CaptureKit

KEY = "sk-coexist-secret"
MESSAGES = [{"role": "user", "content": "Where is my order A-1234?"}]


@pytest.fixture
def with_httpx_instrumentation() -> Iterator[CaptureKit]:
    with CaptureKit() as kit:
        instrumentors = [HTTPXClientInstrumentor(), HTTPX2ClientInstrumentor()]
        for instrumentor in instrumentors:
            instrumentor.instrument(tracer_provider=kit.tracer_provider)
        try:
            yield kit
        finally:
            for instrumentor in instrumentors:
                instrumentor.uninstrument()


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_httpx_span_nests_under_the_llm_span(
    standin: StandIn, with_httpx_instrumentation: CaptureKit, stream: bool
) -> None:
    kit = with_httpx_instrumentation
    with openai.OpenAI(base_url=standin.openai_base_url, api_key=KEY) as client:
        result = client.chat.completions.create(
            model="gpt-4o-mini", messages=MESSAGES, stream=stream
        )
        if stream:
            list(result)
    spans = kit.spans()
    assert [(s["name"], s["scope"]) for s in spans] == [
        ("chat gpt-4o-mini", "otel_replay"),
        ("POST", "opentelemetry.instrumentation.httpx"),
    ]
    llm, http = spans
    assert http["parent"] == 0 and llm["parent"] is None
    assert "replay.step.index" in llm["attributes"]
    assert not any(key.startswith(("replay.", "gen_ai.")) for key in http["attributes"])


def test_plain_http_step_and_httpx_span_are_one_each(
    standin: StandIn, with_httpx_instrumentation: CaptureKit
) -> None:
    kit = with_httpx_instrumentation
    with httpx.Client() as client:
        assert client.get(f"{standin.tools_url}/orders/A-1234").status_code == 200
    ours, theirs = kit.spans()
    assert ours["scope"] == "otel_replay" and ours["attributes"]["replay.step.kind"] == "http"
    assert theirs["scope"] == "opentelemetry.instrumentation.httpx" and theirs["parent"] == 0


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_official_openai_span_is_the_one_chat_span(standin: StandIn, stream: bool) -> None:
    with CaptureKit() as kit:
        official = OpenAIInstrumentor()
        official.instrument(tracer_provider=kit.tracer_provider)
        try:
            with openai.OpenAI(base_url=standin.openai_base_url, api_key=KEY) as client:
                result = client.chat.completions.create(
                    model="gpt-4o-mini", messages=MESSAGES, stream=stream
                )
                if stream:
                    list(result)
        finally:
            official.uninstrument()
        spans = kit.spans()
    call, attempt = spans
    # The official instrumentation's span is the call's one chat span, with the GenAI
    # attributes; the attempt on the wire is an HTTP span of ours beneath it, with the kit.
    assert call["name"] == "chat gpt-4o-mini" and call["scope"] != "otel_replay"
    assert (
        call["attributes"]["gen_ai.input.messages"][0]["parts"][0]["content"]
        == (MESSAGES[0]["content"])
    )
    assert call["attributes"]["replay.run.id"] == attempt["attributes"]["replay.run.id"]
    assert (attempt["name"], attempt["scope"], attempt["parent"]) == ("POST", "otel_replay", 0)
    attrs = attempt["attributes"]
    assert not any(key.startswith("gen_ai.") for key in attrs)
    (received,) = standin.received
    assert attrs["replay.request.hash"] == "sha256:" + hashlib.sha256(received.body).hexdigest()
    assert attrs["replay.step.kind"] == "llm"
    assert attrs["replay.prompt.hash"].startswith("sha256:")
    assert attrs["replay.response.hash"].startswith("sha256:")
    assert attrs["replay.response.complete"] is True
    assert attrs["http.response.status_code"] == 200


def test_httpx2_module_is_covered_too(
    standin: StandIn, with_httpx_instrumentation: CaptureKit
) -> None:
    with httpx2.Client() as client:
        client.get(f"{standin.tools_url}/orders/A-1234")
    ours, theirs = with_httpx_instrumentation.spans()
    assert ours["scope"] == "otel_replay" and theirs["parent"] == 0
