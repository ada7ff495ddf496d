"""requests and urllib3: captured byte-exact with the step spans, replayed with the stand-in
stopped, secrets kept out, an unmatched request refused as requests expects, and a transport
we do not serve (``urllib.request``, ``http.client``) refused loudly."""

from __future__ import annotations

import hashlib
import http.client
import urllib.error
import urllib.request
from typing import Any

import pytest
import requests
import urllib3

import otel_replay
from examples.standin import StandIn
from otel_replay.errors import UnmatchedConnectionError
from otel_replay.replay.sources import load_run
from otel_replay.testing import CaptureKit
from tests.export._support import stored_bytes
from tests.transports._calls import KEY, QUERY_KEY, SECRETS, X_API_KEY, chat, requests_calls
from tests.transports.conftest import DEAD, Recording


def test_requests_and_urllib3_record_each_exchange_byte_exact(record: Recording) -> None:
    store, run_id, _, received = record(requests_calls)
    run = load_run(run_id, store=store)
    assert (
        [s.step.method for s in run.steps]
        == [r.method for r in received]
        == [
            "GET",
            "POST",
            "POST",
            "POST",
            "GET",
            "POST",
        ]
    )
    assert all(s.fidelity == "exact" for s in run.steps)
    for step, sent in zip([s.step for s in run.steps], received, strict=True):
        assert step.complete and step.error_type is None
        assert step.request_body == sent.body  # the generator body too, as it was sent
        assert step.request_hash == "sha256:" + hashlib.sha256(sent.body).hexdigest()
    kinds = [(s.step.kind, s.endpoint) for s in run.steps]
    assert kinds[1] == ("llm", "openai.chat_completions")
    assert kinds[2] == ("llm", "openai.chat_completions")
    assert kinds[0][0] == kinds[3][0] == "http"
    # The SSE stream is kept whole, in the pieces the application read.
    streamed = run.steps[2].step
    assert streamed.response_body.startswith(b"data: {")
    assert streamed.response_body.endswith(b"data: [DONE]\n\n")
    assert len(streamed.chunks) > 3


def test_spans_carry_the_http_and_genai_conventions(standin: Any) -> None:
    with CaptureKit() as kit:
        got = requests.get(
            f"{standin.tools_url}/orders/A-1234",
            params={"api_key": QUERY_KEY},
            headers={"Authorization": f"Bearer {KEY}"},
        )
        reply = requests.post(
            f"{standin.openai_base_url}/chat/completions",
            json=chat("Where is A-1?", stream=True, stream_options={"include_usage": True}),
            stream=True,
        )
        lines = list(reply.iter_lines())
    root, *spans = kit.spans()
    assert root["name"].startswith("invoke_agent ")  # the process run's root span
    assert [(s["name"], s["scope"], s["kind"]) for s in spans] == [
        ("GET", "otel_replay", "CLIENT"),
        ("chat gpt-4o-mini", "otel_replay", "CLIENT"),
    ]
    tool, model = (s["attributes"] for s in spans)
    assert tool["http.request.method"] == "GET"
    assert tool["url.full"] == f"{standin.tools_url}/orders/A-1234?api_key=REDACTED"
    assert tool["server.address"] == "127.0.0.1" and tool["server.port"] == standin.port
    assert tool["http.response.status_code"] == 200
    assert tool["replay.step.kind"] == "http" and tool["replay.step.index"] == 0
    assert tool["replay.response.body"] == got.text
    assert model["gen_ai.operation.name"] == "chat"
    assert model["gen_ai.provider.name"] == "openai"
    assert model["gen_ai.request.model"] == "gpt-4o-mini"
    assert model["gen_ai.usage.output_tokens"] > 0
    assert model["gen_ai.response.time_to_first_chunk"] > 0
    assert model["replay.step.index"] == 1 and model["replay.response.complete"] is True
    assert model["gen_ai.input.messages"][0]["parts"][0]["content"] == "Where is A-1?"
    assert b"data: [DONE]" in lines


def test_a_stream_closed_early_is_recorded_incomplete(standin: Any) -> None:
    with CaptureKit() as kit:
        reply = requests.post(
            f"{standin.openai_base_url}/chat/completions",
            json=chat("Tell me a long story.", stream=True),
            stream=True,
        )
        first = next(reply.iter_content(chunk_size=None))
        reply.close()
    _root, span = kit.spans()
    assert span["attributes"]["replay.response.complete"] is False
    assert span["attributes"]["replay.response.size"] >= len(first)


def _cut_stream(base: str) -> tuple[list[bytes], str]:
    """The lines of a stream the stand-in cuts off, and the error reading it raised."""
    reply = requests.post(
        f"{base}/v1/chat/completions",
        json=chat("Tell me a long story.", stream=True, model="standin-cut"),
        stream=True,
    )
    lines: list[bytes] = []
    with pytest.raises(requests.exceptions.ChunkedEncodingError) as raised:
        lines.extend(reply.iter_lines())
    (cause,) = raised.value.args
    assert isinstance(cause, urllib3.exceptions.ProtocolError)
    return lines, str(cause)


def test_a_stream_cut_off_is_recorded_as_its_error_and_replayed(record: Recording) -> None:
    store, run_id, recorded, _ = record(_cut_stream)
    (step,) = [s.step for s in load_run(run_id, store=store).steps]
    assert (step.status_code, step.complete) == (200, False)
    assert step.error_type == "urllib3.exceptions.ProtocolError"
    assert recorded[0] and step.response_body.startswith(recorded[0][0])
    with otel_replay.replaying(run_id, store=store) as result:
        replayed = _cut_stream(DEAD)
    assert replayed == recorded  # the same error after the same lines
    assert result.identical, result.first_divergence


def test_a_replay_serves_the_same_bytes_without_the_network(
    record: Recording, connects: list[str]
) -> None:
    store, run_id, recorded, _ = record(requests_calls)
    connects.clear()
    with otel_replay.replaying(run_id, store=store) as result:
        replayed = requests_calls(DEAD)
    assert replayed == recorded  # same bytes, same stream pieces, same line splits
    assert result.identical, result.first_divergence
    assert dict(result.matched()) == {"hash": 6}
    assert result.network_attempts == []
    assert connects == []


def test_https_is_served_without_a_tls_connection(record: Recording, connects: list[str]) -> None:
    store, run_id, recorded, _ = record(
        lambda base: requests.get(f"{base}/tools/orders/A-1234").json()
    )
    connects.clear()
    with otel_replay.replaying(run_id, store=store) as result:
        replayed = requests.get("https://tools.example.test/tools/orders/A-1234").json()
    assert replayed == recorded
    assert result.identical and result.network_attempts == [] and connects == []


def test_an_unmatched_request_is_a_requests_connection_error(record: Recording) -> None:
    store, run_id, _, _ = record(lambda base: requests.get(f"{base}/tools/orders/A-1234"))
    with otel_replay.replaying(run_id, store=store) as result:
        requests.get(f"{DEAD}/tools/orders/A-1234")
        with pytest.raises(requests.ConnectionError) as raised:
            requests.get(f"{DEAD}/tools/orders/Z-9999")
        with pytest.raises(urllib3.exceptions.ProtocolError) as direct:
            urllib3.request("POST", f"{DEAD}/tools/refunds", body=b"{}", retries=False)
    assert "no recorded step of run" in str(raised.value)
    (_, unmatched) = direct.value.args
    assert isinstance(unmatched, UnmatchedConnectionError)
    assert "step 0 GET /tools/orders/A-1234" in str(unmatched)
    assert [(s.how, s.url) for s in result.steps] == [
        ("hash", f"{DEAD}/tools/orders/A-1234"),
        ("none", f"{DEAD}/tools/orders/Z-9999"),
        ("none", f"{DEAD}/tools/refunds"),
    ]
    assert not result.identical
    assert result.network_attempts == []


def test_without_strict_mode_an_unmatched_request_goes_live(record: Recording) -> None:
    store, run_id, _, _ = record(lambda base: requests.get(f"{base}/tools/orders/A-1234"))
    with (
        StandIn(event_delay=0.001) as live,
        otel_replay.replaying(run_id, store=store, strict=False) as result,
    ):
        requests.get(f"{live.tools_url}/orders/A-1234")
        fresh = requests.post(f"{live.tools_url}/refunds", data=iter([b'{"order_id": "A-1234"}']))
        (sent,) = live.received  # only the unmatched request reached the server
    assert fresh.status_code == 201
    assert sent.body == b'{"order_id": "A-1234"}' and sent.header("transfer-encoding") == "chunked"
    assert [(s.how, s.live) for s in result.steps] == [("hash", False), ("none", True)]


@pytest.mark.parametrize("library", ["urllib.request", "http.client"])
def test_a_transport_we_do_not_serve_is_refused_loudly(record: Recording, library: str) -> None:
    store, run_id, _, _ = record(lambda base: requests.get(f"{base}/tools/orders/A-1234"))
    with otel_replay.replaying(run_id, store=store) as result:
        if library == "urllib.request":
            with pytest.raises(urllib.error.URLError, match="refused network access"):
                urllib.request.urlopen(f"{DEAD}/tools/orders/A-1234", timeout=1)
        else:
            connection = http.client.HTTPConnection("127.0.0.1", 9, timeout=1)
            with pytest.raises(ConnectionRefusedError, match="refused network access"):
                connection.request("GET", "/tools/orders/A-1234")
    assert result.network_attempts == ["127.0.0.1:9"]
    assert not result.identical


def test_secrets_never_reach_the_store(record: Recording) -> None:
    store, _, _, received = record(requests_calls)
    sent = received[0]
    assert sent.header("authorization") == f"Bearer {KEY}"  # they did go to the server
    assert sent.header("x-api-key") == X_API_KEY and QUERY_KEY in sent.query
    from pathlib import Path

    disk = stored_bytes(Path(store))
    assert [s for s in SECRETS if s.encode() in disk] == []
    assert b"api_key=REDACTED" in disk  # not vacuous: the redacted URL is there
