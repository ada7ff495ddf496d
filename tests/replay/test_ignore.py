"""Background traffic in an in-process replay: calls ``OTEL_REPLAY_IGNORE`` matches, and the
OpenTelemetry SDK's own exports, are answered by otel-replay before any socket (strict or
not), never compared, never network attempts, and counted in ``result.ignored``."""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import httpx2
import pytest
import requests
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

import otel_replay
from examples.otlp_sink import OtlpSink
from examples.standin import StandIn
from otel_replay.replay.sources import load_run
from tests.export._support import Pipeline
from tests.transports.conftest import DEAD, connects

__all__ = ["connects"]  # the fixture: every real socket.connect while a test runs

IGNORED = {"otel_replay": "ignored"}


def _seen(reply: Any) -> tuple[int, Any]:
    """A reply's status and, when it is JSON naming otel-replay, that mark."""
    body = reply.content if hasattr(reply, "content") else reply
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    status = reply.status_code if hasattr(reply, "status_code") else 0
    if isinstance(parsed, dict) and "otel_replay" in parsed:
        return status, {"otel_replay": parsed["otel_replay"]}
    return status, None


def _agent(base: str) -> list[tuple[int, Any]]:
    """Two calls of the agent's with SDK uploads around and between them, through httpx,
    httpx2, requests and aiohttp; what each call got."""
    seen = [_seen(requests.get(f"{base}/tools/orders/A-1234", timeout=10))]
    seen.append(_seen(httpx2.post(f"{base}/v1/traces/ingest", json={"data": [{"id": "t_1"}]})))
    seen.append(_seen(requests.get(f"{base}/info", timeout=10)))  # a user's rule
    seen.append(_seen(requests.post(f"{base}/runs/multipart", data=b"--b--", timeout=10)))

    async def batch() -> tuple[int, Any]:
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{base}/runs/batch", json={"post": []}) as reply,
        ):
            body = await reply.read()
            return reply.status, _seen(body)[1]

    seen.append(asyncio.run(batch()))
    seen.append(_seen(httpx.post(f"{base}/v1/traces/ingest", json={"data": [{"id": "t_2"}]})))
    seen.append(_seen(httpx.get(f"{base}/tools/orders/B-2077", timeout=10)))
    return seen


@pytest.fixture
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """The agent recorded into a store, ``/info`` ignored by the user's rule; the stand-in is
    stopped afterwards."""
    monkeypatch.setenv("OTEL_REPLAY_IGNORE", "127.0.0.1/info")
    store = tmp_path / "store"
    with StandIn(event_delay=0.001) as standin, Pipeline(store) as pipe:
        seen = _agent(standin.base_url)
        run_id = pipe.run.run_id
    assert [status for status, _ in seen] == [200, 204, 200, 202, 202, 204, 200]
    return store, run_id


def test_only_the_agents_calls_are_recorded(recorded: tuple[Path, str]) -> None:
    run = load_run(recorded[1], store=str(recorded[0]))
    assert [(s.step.method, s.step.url.rsplit("/", 2)[-2:]) for s in run.steps] == [
        ("GET", ["orders", "A-1234"]),
        ("GET", ["orders", "B-2077"]),
    ]


@pytest.mark.parametrize("strict", [True, False])
def test_background_calls_are_answered_by_otel_replay_before_any_socket(
    recorded: tuple[Path, str], connects: list[str], strict: bool
) -> None:
    store, run_id = recorded
    with otel_replay.replaying(run_id, store=str(store), strict=strict) as result:
        seen = _agent(DEAD)
    assert seen == [
        (200, None),  # the agent's calls, from the recording
        (200, IGNORED),  # uploads: accepted and dropped
        (404, IGNORED),  # a read: nothing there
        (200, IGNORED),
        (200, IGNORED),
        (200, IGNORED),
        (200, None),
    ]
    assert result.identical, result.first_divergence
    assert result.network_attempts == [] and connects == []
    assert dict(result.ignored) == {
        "127.0.0.1:9/v1/traces/ingest": 2,
        "127.0.0.1:9/info": 1,
        "127.0.0.1:9/runs/multipart": 1,
        "127.0.0.1:9/runs/batch": 1,
    }
    assert result.to_json()["ignored"] == dict(result.ignored)


def test_without_the_rule_the_call_would_be_the_agents(
    recorded: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Recorded with /info ignored, replayed without the rule: no recorded step to serve it.
    monkeypatch.setenv("OTEL_REPLAY_IGNORE", "")
    store, run_id = recorded
    with (
        otel_replay.replaying(run_id, store=str(store), strict=False) as result,
        pytest.raises(requests.ConnectionError),
    ):
        requests.get(f"{DEAD}/info", timeout=10)  # went live: nothing listens there
    assert [s.url for s in result.extra] == [f"{DEAD}/info"]
    assert not result.ignored


def _exporting(endpoint: str) -> tuple[TracerProvider, OTLPSpanExporter]:
    exporter = OTLPSpanExporter(endpoint=endpoint, timeout=5)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_an_opentelemetry_export_in_strict_replay_is_answered_not_refused(
    recorded: tuple[Path, str], connects: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    # An endpoint no rule names: the export is known by the suppressed instrumentation alone.
    provider, _ = _exporting(f"{DEAD}/collector/spans")
    store, run_id = recorded
    with caplog.at_level(logging.WARNING), otel_replay.replaying(run_id, store=str(store)) as res:
        with provider.get_tracer("agent").start_as_current_span("invoke_agent desk"):
            pass  # the SDK exports it at once (SimpleSpanProcessor), suppressed
        with suppress_instrumentation():  # a batch processor's thread exports like this
            requests.post(f"{DEAD}/collector/metrics", data=b"x", timeout=5)
    provider.shutdown()
    assert dict(res.ignored) == {
        "127.0.0.1:9/collector/spans": 1,
        "127.0.0.1:9/collector/metrics": 1,
    }
    assert res.network_attempts == [] and connects == []
    assert not [r for r in caplog.records if r.name.startswith("opentelemetry")]  # no error


def test_an_opentelemetry_export_in_a_replay_that_is_not_strict_goes_out(
    recorded: tuple[Path, str],
) -> None:
    store, run_id = recorded
    with OtlpSink() as sink:
        provider = TracerProvider()
        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{sink.http_endpoint}/v1/traces"))
        )
        with otel_replay.replaying(run_id, store=str(store), strict=False) as result:
            with provider.get_tracer("agent").start_as_current_span("invoke_agent desk"):
                pass
            provider.force_flush()
        provider.shutdown()
        assert [s["name"] for s in sink.wait_for_spans(1, 10)] == ["invoke_agent desk"]
    assert not result.ignored and not result.extra and not result.steps


def test_a_socket_to_an_ignored_host_is_refused_but_not_counted(
    recorded: tuple[Path, str],
) -> None:
    store, run_id = recorded
    with otel_replay.replaying(run_id, store=str(store)) as result:
        # urllib.request is not served: strict replay refuses its sockets, as always.
        for url in ("http://us.i.posthog.com/batch/", "http://example.invalid/"):
            with pytest.raises(urllib.error.URLError):
                urllib.request.urlopen(url, timeout=1)
        with suppress_instrumentation(), pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(f"{DEAD}/v2/spans", timeout=1)  # an exporter of its own
    assert result.network_attempts == ["name lookup example.invalid:80"]
    assert dict(result.ignored) == {"name lookup us.i.posthog.com:80": 1, "127.0.0.1:9": 1}
    assert not result.identical  # the agent's refused attempt still counts


def test_a_recordings_steps_of_ignored_calls_are_set_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recorded with no rule (before the rule was added): the upload is a step. Replayed
    with the rules, that step is neither served nor expected."""
    monkeypatch.setenv("OTEL_REPLAY_IGNORE", "-defaults")
    store = tmp_path / "store"
    with StandIn(event_delay=0.001) as standin, Pipeline(store) as pipe:
        requests.get(f"{standin.tools_url}/orders/A-1234", timeout=10)
        httpx2.post(f"{standin.base_url}/v1/traces/ingest", json={"data": [{"id": "t_1"}]})
        run_id = pipe.run.run_id
    assert [s.endpoint for s in load_run(run_id, store=str(store)).steps] == [
        "GET /tools/orders/A-1234",
        "POST /v1/traces/ingest",
    ]
    monkeypatch.setenv("OTEL_REPLAY_IGNORE", "")
    with otel_replay.replaying(run_id, store=str(store)) as result:
        requests.get(f"{DEAD}/tools/orders/A-1234", timeout=10)
        upload = httpx2.post(f"{DEAD}/v1/traces/ingest", json={"data": [{"id": "t_2"}]})
    assert _seen(upload) == (200, IGNORED)
    assert result.identical, result.first_divergence
    assert [s.endpoint for s in result.run.steps] == ["GET /tools/orders/A-1234"]
    assert dict(result.ignored) == {"127.0.0.1:9/v1/traces/ingest": 1}
