"""Secrets never reach the wire or the disk: every exported OTLP byte and every byte of the
store (decompressed) is searched for the secrets the application sent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

from examples.otlp_sink import OtlpSink
from otel_replay.store import Store
from tests.export._support import CHAT_URL, Pipeline, chat_request, stored_bytes

BEARER = "sk-live-BEARER-1f2e3d4c5b6a7980"
API_KEY = "ak-HEADER-a1b2c3d4e5f60718"
QUERY_TOKEN = "qt-QUERY-99aa88bb77cc66dd"
SSN = "123-45-6789"  # matched by the OTEL_REPLAY_REDACT pattern below
COOKIE = "session=ck-COOKIE-0a0b0c0d0e0f"
SECRETS = (BEARER, API_KEY, QUERY_TOKEN, SSN, COOKIE)


@pytest.fixture
def sink() -> Iterator[OtlpSink]:
    with OtlpSink() as receiver:
        yield receiver


def test_no_secret_is_exported_or_stored(
    sink: OtlpSink, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_REPLAY_REDACT", r"\d{3}-\d{2}-\d{4}")
    sent: list[bytes] = []

    def echo(request: httpx.Request) -> httpx.Response:
        # Everything the transport saw, so the test is not vacuous; the answer quotes the
        # request body (as models do) and sets a cookie.
        sent.append(str(request.url).encode() + bytes(request.headers.raw[0][1]))
        sent.append(b"".join(k + b": " + v for k, v in request.headers.raw) + request.content)
        answer = {"choices": [{"message": {"content": request.content.decode()}}]}
        return httpx.Response(
            200, json=answer, headers={"set-cookie": COOKIE, "x-request-id": "req-1"}
        )

    otlp = OTLPSpanExporter(endpoint=sink.grpc_endpoint, insecure=True)
    with (
        Pipeline(tmp_path / "store", others=[otlp]) as pipe,
        httpx.Client(transport=httpx.MockTransport(echo)) as client,
    ):
        headers = {"authorization": f"Bearer {BEARER}", "x-api-key": API_KEY}
        body = chat_request(f"my ssn is {SSN}, please file it")
        client.post(CHAT_URL, content=body, headers=headers | {"api-key": API_KEY})
        client.get(f"http://tools.test/lookup?order=A-1&token={QUERY_TOKEN}", headers=headers)
        client.post("http://tools.test/notes", content=json.dumps({"note": SSN}).encode())
    pipe.stop()

    everything_sent = b"".join(sent)
    assert all(secret.encode() in everything_sent for secret in SECRETS[:4])
    sink.wait_for_spans(3, 10)
    wire = sink.raw_bytes()
    disk = stored_bytes(tmp_path / "store")
    assert b"REDACTED" in wire and b"REDACTED" in disk  # the checks below look at real data
    with Store.open(tmp_path / "store", create=False) as store:
        (run,) = store.runs()
        assert run.step_count == 3
        api = b"".join(
            repr(store.read_step(step)).encode() + json.dumps(store.spans(run.run_id)).encode()
            for step in store.steps(run.run_id)
        )
    for secret in SECRETS:
        for where, data in (("OTLP", wire), ("store files", disk), ("store API", api)):
            assert secret.encode() not in data, f"{secret!r} reached the {where}"
