"""Secrets planted in 25 places never reach the store, the OTLP wire, the console exporter
or the logs: an agent on the real openai, anthropic and httpx clients, under
``opentelemetry-instrument``, talks to a provider that echoes its credentials back (in
bodies, error messages, headers, JSON escapes and split across stream events)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.otlp_sink import OtlpSink
from otel_replay.store import Store
from tests.capture._leaky_provider import (
    ESCAPED_PATTERN_SECRET,
    SPLIT_PATTERN_SECRET,
    LeakyProvider,
)
from tests.export._support import INSTRUMENT, ROOT, stored_bytes, subprocess_env

pytestmark = pytest.mark.subprocess

SENT = {
    "openai": "sk-live-OPENAI-0a1b2c3d4e5f",  # header; echoed raw, escaped, split, in headers
    "anthropic": "sk-ant-ANTHROPIC-9f8e7d6c",  # x-api-key; echoed in a 401 message
    "azure": "az-HEADER-77aa66bb55cc",  # api-key header
    "query": "AIza-QUERY-1234abcd5678",  # ?key=
    "signature": "sig-AMZ-00ff11ee22dd",  # ?X-Amz-Signature=
    "userinfo": "pw-USERINFO-3344ccdd",  # http://user:pw@host
    "basic": "pw-BASIC-5566eeff7788",  # Authorization: Basic
    "cookie": "ck-COOKIE-0a0b0c0d0e0f",  # Cookie: session=
    "auth_token": "tk-XAUTH-abcdef123456",  # x-auth-token header
    "body": "bk-BODYFIELD-13579bdf",  # "api_key" in the JSON body
    "nested": "cs-NESTED-2468ace0",  # metadata.client_secret
    "token": "ghp_TOKENFIELD0a1b2c3d4e",  # "github_token" in the JSON body
    "credentials": "cr-CREDFIELD-99aa88bb",  # "credentials" in the JSON body
    "tool": "tp-TOOLARG-1122aabb",  # "password" in tool-call arguments (JSON in a string)
    "pattern": "CUSTOM-1111-2222",  # matches OTEL_REPLAY_REDACT in a message
    "bearer": "eyJ-TOOLBEARER-5f6e7d8c",  # "Bearer ..." in a tool's result, an ordinary key
}
PLANTED = (*SENT.values(), ESCAPED_PATTERN_SECRET, SPLIT_PATTERN_SECRET, "cookie-from-server")
AGENT = ROOT / "tests" / "capture" / "_leaky_agent.py"


@pytest.fixture
def provider() -> Iterator[LeakyProvider]:
    with LeakyProvider() as running:
        yield running


@pytest.fixture
def sink() -> Iterator[OtlpSink]:
    with OtlpSink() as receiver:
        yield receiver


def test_no_planted_secret_reaches_store_wire_console_or_logs(
    provider: LeakyProvider, sink: OtlpSink, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    env = subprocess_env(
        store,
        OTEL_TRACES_EXPORTER="otlp,replay,console",
        OTEL_EXPORTER_OTLP_ENDPOINT=sink.grpc_endpoint,
        OTEL_EXPORTER_OTLP_INSECURE="true",
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true",
        OTEL_REPLAY_REDACT=r"CUSTOM-\d{4}-\d{4}",
        OTEL_PYTHON_LOG_LEVEL="debug",
        LEAK_URL=provider.url,
        LEAK_SECRETS=json.dumps(SENT),
    )
    done = subprocess.run(
        [str(INSTRUMENT), sys.executable, str(AGENT)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert b"agent done" in done.stdout
    received = provider.received()
    basic = {base64.b64encode(f"ann:{SENT[name]}".encode()) for name in ("basic", "userinfo")}
    plain = [value for name, value in SENT.items() if name not in ("basic", "userinfo")]
    assert all(secret.encode() in received for secret in plain)
    assert all(credentials in received for credentials in basic)  # sent as HTTP Basic

    sink.wait_for_spans(6, 10)
    wire = sink.raw_bytes()
    disk = stored_bytes(store)
    with Store.open(store, create=False) as opened:
        (run,) = opened.runs()
        assert run.step_count == 6
        api = b"".join(
            repr(opened.read_step(step)).encode() + json.dumps(opened.spans(run.run_id)).encode()
            for step in opened.steps(run.run_id)
        )
    places = {
        "OTLP": wire,
        "store files": disk,
        "store API": api,
        "console": done.stdout,
        "logs": done.stderr,
    }
    leaks = [
        (secret, where)
        for secret in PLANTED
        for where, data in places.items()
        if secret.encode() in data
    ]
    assert leaks == []
    # Not vacuous: the redacted bodies and spans are all there, echoes and streams included.
    for where in ("OTLP", "store API", "console"):
        data = places[where]
        assert b"Your key is REDACTED; escaped REDACTED; and REDACTED." in data, where
        assert b"Key REDACTED and REDACTED (as you asked)" in data, where
        assert b"invalid x-api-key: REDACTED" in data, where
