"""``OTEL_TRACES_EXPORTER=otlp,replay opentelemetry-instrument python examples/support_agent.py``:
the store fills while the OTLP export goes on unchanged."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples.otlp_sink import OtlpSink
from examples.standin import StandIn
from otel_replay._inline import decode_body
from otel_replay.store import Store
from tests.export._support import (
    INSTRUMENT,
    ROOT,
    instrumentations,
    sha,
    stored_bytes,
    subprocess_env,
)

pytestmark = pytest.mark.subprocess

SECRET = "sk-live-EXPORTME-5c1e0d9a7b3f42e6a8d4"
AGENT_SPAN = "invoke_agent support-agent"


@pytest.fixture
def sink() -> Iterator[OtlpSink]:
    with OtlpSink() as receiver:
        yield receiver


def run_agent(
    standin: StandIn, sink: OtlpSink, store: Path, exporters: str, official: str = ""
) -> None:
    """Run the example agent; ``official`` names an auto-instrumentation to keep enabled
    (its spans are then the model calls' spans, each attempt a step span of ours beneath)."""
    env = subprocess_env(
        store,
        OTEL_SERVICE_NAME="support-agent",
        OTEL_TRACES_EXPORTER=exporters,
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
        OTEL_EXPORTER_OTLP_ENDPOINT=sink.grpc_endpoint,
        OTEL_BSP_SCHEDULE_DELAY="100",
        OPENAI_API_KEY=SECRET,
        OPENAI_BASE_URL=standin.openai_base_url,
        SUPPORT_TOOLS_URL=standin.tools_url,
        **instrumentations(*filter(None, [official])),
    )
    proc = subprocess.run(
        [str(INSTRUMENT), sys.executable, "examples/support_agent.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert proc.stdout.count("agent> ") == 3
    sink.wait_for_spans(lambda spans: any(s["name"] == AGENT_SPAN for s in spans), 10)


def shape(spans: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What must not change when ``replay`` joins ``otlp``: every span's name, kind, scope,
    parent and attribute keys (values such as ids, seeds and timings differ per run)."""
    names = {s["span_id"]: s["name"] for s in spans}
    return sorted(
        (
            s["name"],
            s["kind"],
            s["scope"],
            names.get(s["parent_span_id"]),
            tuple(sorted(s["attributes"])),
            s["status"]["code"],
        )
        for s in spans
    )


@pytest.mark.parametrize("official", ["", "openai"], ids=["ours", "openai-v2"])
def test_the_store_fills_while_otlp_export_goes_on_unchanged(
    standin: StandIn, sink: OtlpSink, tmp_path: Path, official: str
) -> None:
    run_agent(standin, sink, tmp_path / "alone", "otlp", official)
    alone = sink.spans()
    assert not (tmp_path / "alone").exists(), "without replay, no store"
    sink.clear()
    standin.clear()

    run_agent(standin, sink, tmp_path / "store", "otlp,replay", official)
    spans = sink.spans()
    assert shape(spans) == shape(alone), "OTLP export is unchanged by the replay exporter"
    # With openai-v2 on, the model calls' spans are its own, each attempt a span of ours.
    chat_scopes = {s["scope"] for s in spans if s["name"].startswith("chat ")}
    calls = [s for s in spans if s["name"].startswith("chat ") and s["scope"] != "otel_replay"]
    assert (chat_scopes == {"otel_replay"}) is (not official), chat_scopes
    received = standin.received
    assert len(received) == 9

    (run_id,) = {s["attributes"]["replay.run.id"] for s in spans}
    with Store.open(tmp_path / "store", create=False) as store:
        (run,) = store.runs()
        assert run.run_id == run_id and run.status == "ok" and run.step_count == 9
        assert run.models == ("gpt-4o-mini",) and run.tokens_in > 0
        steps = store.steps(run_id)
        kinds = ["http" if r.path.startswith("/tools/") else "llm" for r in received]
        assert [s.kind for s in steps] == kinds
        assert [s.index for s in steps] == list(range(9))
        by_id = {s["span_id"]: s for s in spans}
        for step, request in zip(steps, received, strict=True):
            assert step.request_hash == sha(request.body)
            assert store.request_body(step) == request.body
            response = store.response_body(step)
            assert sha(response) == step.response_hash and step.complete
            # OTLP data alone carries the same exact bytes (inline bodies).
            attrs = by_id[f"{step.span_id:016x}"]["attributes"]
            assert decode_body(attrs["replay.request.body"]) == request.body
            assert decode_body(attrs["replay.response.body"]) == response
            kept = store.read_step(step)
            assert attrs["replay.response.status_code"] == kept.status_code
            content_type = dict((k.lower(), v) for k, v in kept.response_headers)
            assert attrs["replay.response.content_type"] == content_type["content-type"]
            if "replay.response.chunk.sizes" in attrs:
                assert attrs["replay.response.chunk.sizes"] == [n for n, _ in kept.chunks]
        assert "replay.response.chunk.sizes" in by_id[f"{steps[-1].span_id:016x}"]["attributes"]

        # The spans in the store are the spans the backend received, exactly.
        stored = {s["span_id"]: s for s in store.spans(run_id)}
        assert len(stored) == 10 + len(calls)  # 9 steps, the agent's run, openai-v2's calls
        assert set(stored) == {s["span_id"] for s in spans if "replay.run.id" in s["attributes"]}
        for span_id, span in stored.items():
            expected = dict(by_id[span_id])
            del expected["transport"]
            assert span == expected, span["name"]
        assert store.verify() == []

    # Secrets never reach the wire or the disk (and the stand-in did get the key).
    assert received[0].header("Authorization") == f"Bearer {SECRET}"
    for data in (sink.raw_bytes(), stored_bytes(tmp_path / "store")):
        assert SECRET.encode() not in data and b"sk-live" not in data and b"Bearer" not in data
