"""The ``replay`` exporter: what it persists, how it reports failure, and that it never raises."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult

import otel_replay
from otel_replay.errors import StoreNotWritableError
from otel_replay.export import ExporterStats, ReplaySpanExporter
from otel_replay.export.exporter import DROPPED_STEPS, observe_drops
from otel_replay.runs._handoff import Handoff, handoff
from otel_replay.runs._process_trace import _program
from otel_replay.store import Store
from tests.export._support import (
    CHAT_URL,
    Pipeline,
    chat_request,
    chat_response,
    echo_client,
    sha,
)
from tests.store._data import make_step

ROOT_SPAN = f"invoke_agent {_program()}"  # pytest, or python under xdist


def _post_chats(count: int, start: int = 0) -> list[bytes]:
    bodies = [chat_request(f"question {start + i}") for i in range(count)]
    with echo_client() as client:
        for body in bodies:
            client.post(CHAT_URL, content=body, headers={"content-type": "application/json"})
    return bodies


def test_the_entry_point_builds_it_with_no_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (point,) = entry_points(group="opentelemetry_traces_exporter", name="replay")
    assert point.load() is ReplaySpanExporter
    monkeypatch.setenv("OTEL_REPLAY_STORE", str(tmp_path / "from-env"))
    exporter = point.load()()
    try:
        assert exporter.location == str(tmp_path / "from-env")
    finally:
        exporter.shutdown()


def test_steps_runs_and_their_spans_are_persisted(pipeline: Pipeline) -> None:
    with otel_replay.run("agent") as run:
        bodies = _post_chats(3)
    pipeline.stop()
    stats = pipeline.exporter.stats()
    assert (stats.steps, stats.spans, stats.dropped, stats.failed) == (3, 4, 0, 0)
    with pipeline.open_store() as store:
        info = store.run(run.run_id)
        assert info.step_count == 3 and info.models == ("gpt-4o-mini",)
        steps = store.steps(run.run_id)
        assert [s.kind for s in steps] == ["llm"] * 3
        assert [s.provider for s in steps] == ["openai"] * 3, "step facts: span in the same flush"
        assert [store.request_body(s) for s in steps] == bodies
        spans = store.spans(run.run_id)
        names = sorted(s["name"] for s in spans)
        assert names == ["chat gpt-4o-mini"] * 3 + ["invoke_agent agent"]
        assert len({s["span_id"] for s in spans}) == 4, "no span is stored twice"
        (agent,) = [s for s in spans if s["name"] == "invoke_agent agent"]
        assert all(s["parent_span_id"] == agent["span_id"] for s in spans if s is not agent)
        assert store.verify() == []


def test_a_step_under_another_instrumentations_span_does_not_wait_for_it(
    pipeline: Pipeline,
) -> None:
    # Like opentelemetry-instrumentation-openai-v2: its span is current during the call and
    # ends after the response was read; the attempt is a span of ours beneath it.
    body = chat_request("hi")
    with pipeline.tracer.start_as_current_span(
        "chat gpt-4o-mini", attributes={"gen_ai.operation.name": "chat"}
    ) as outer:
        with echo_client() as client:
            client.post(CHAT_URL, content=body, headers={"content-type": "application/json"})
        # The attempt's span ended with its response: the step is durable already.
        assert pipeline.exporter.force_flush()
        assert pipeline.exporter.stats().steps == 1
        outer.set_attribute("gen_ai.usage.input_tokens", 42)
    assert pipeline.exporter.force_flush()
    pipeline.stop()
    with pipeline.open_store() as store:
        (run,) = store.runs()
        (step,) = store.steps(run.run_id)
        # The step's facts are the capture's (the response's usage); the store never reads
        # them back out of telemetry. The call span is stored as it ended, beside the step's.
        assert step.tokens_in == 5
        # The call span started with no parent: it nests under the process run's root.
        attempt, call, root = sorted(store.spans(run.run_id), key=lambda s: s["name"])
        assert attempt["attributes"]["replay.request.hash"] == sha(body)
        assert call["attributes"]["gen_ai.usage.input_tokens"] == 42
        assert root["name"] == ROOT_SPAN
        assert call["parent_span_id"] == root["span_id"] and root["parent_span_id"] is None


def test_two_steps_in_one_call_span_are_both_kept_and_the_call_span_once(
    pipeline: Pipeline,
) -> None:
    # An SDK retry inside another instrumentation's span: two requests, a span each, one call.
    with pipeline.tracer.start_as_current_span(
        "chat gpt-4o-mini", attributes={"gen_ai.operation.name": "chat"}
    ):
        bodies = _post_chats(2)
    pipeline.stop()
    with pipeline.open_store() as store:
        (run,) = store.runs()
        assert [store.request_body(s) for s in store.steps(run.run_id)] == bodies
        names = sorted(s["name"] for s in store.spans(run.run_id))
        assert names == ["POST", "POST", "chat gpt-4o-mini", ROOT_SPAN]


def test_export_and_force_flush_return_once_durable(pipeline: Pipeline) -> None:
    _post_chats(2)
    assert pipeline.exporter.force_flush()
    with pipeline.open_store() as store:  # a second reader sees it: it is on disk
        (run,) = store.runs()
        assert run.step_count == 2
    assert pipeline.exporter.export([]) is SpanExportResult.SUCCESS


def test_store_given_as_an_object_is_flushed_not_closed(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "store")
    with Pipeline(tmp_path / "store", store=store) as pipe:
        _post_chats(1)
    pipe.stop()
    assert [r.step_count for r in store.runs()] == [1]
    store.put([], [])  # still open
    store.close()


def test_failures_return_failure_log_once_and_are_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_REPLAY_FLUSH_TIMEOUT_MS", "2000")
    store = Store.open(tmp_path / "store")
    real_flush = store.flush
    broken = threading.Event()
    broken.set()

    def flaky_flush() -> None:
        if broken.is_set():
            raise StoreNotWritableError(f"cannot write store {store.location}: disk full")
        real_flush()

    monkeypatch.setattr(store, "flush", flaky_flush)
    with (
        caplog.at_level(logging.DEBUG, logger="otel_replay"),
        Pipeline(tmp_path / "store", store=store) as pipe,
    ):
        _post_chats(3)
        assert pipe.exporter.export([]) is SpanExportResult.FAILURE
        assert pipe.exporter.force_flush(500) is False
        assert pipe.exporter.export([]) is SpanExportResult.FAILURE
        stats = pipe.exporter.stats()
        # 3 steps and their 3 spans wait
        assert stats.steps == 0 and stats.pending == 6 and stats.flush_errors >= 3
        broken.clear()
        assert pipe.exporter.force_flush()
        assert pipe.exporter.stats().steps == 3
    pipe.stop()
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    cannot = [r for r in warnings if "cannot write the store" in r.getMessage()]
    assert len(cannot) == 1, [r.getMessage() for r in warnings]
    assert "disk full" in cannot[0].getMessage()
    assert any("writable again" in r.getMessage() for r in warnings)
    assert [r.step_count for r in store.runs()] == [3]
    store.close()


def test_a_store_that_cannot_be_opened_is_reported_never_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with (
        caplog.at_level(logging.WARNING, logger="otel_replay"),
        Pipeline(blocker / "store") as pipe,
    ):
        _post_chats(2)
        assert pipe.exporter.export([]) is SpanExportResult.FAILURE
        assert pipe.exporter.force_flush(200) is False
    pipe.stop()  # gives up at shutdown: counted and logged, not raised
    stats = pipe.exporter.stats()
    # 2 steps, their 2 spans and the process run's root span
    assert stats.failed == 5 and stats.steps == 0 and stats.held_bytes == 0
    messages = [r.getMessage() for r in caplog.records]
    assert len([m for m in messages if "cannot open the store" in m]) == 1
    assert any(str(blocker) in m for m in messages)


def test_a_full_handoff_applies_back_pressure_then_counts_drops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(handoff(), "max_bytes", 3 * 5000)  # ~3 small steps
    monkeypatch.setattr(handoff(), "wait_s", 0.1)
    monkeypatch.setenv("OTEL_REPLAY_FLUSH_TIMEOUT_MS", "200")
    store = Store.open(tmp_path / "store")
    real_flush = store.flush
    stuck = threading.Event()
    stuck.set()

    def slow_flush() -> None:
        while stuck.is_set():
            threading.Event().wait(0.01)
        real_flush()

    monkeypatch.setattr(store, "flush", slow_flush)
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    observe_drops(handoff(), meters)  # what the exporter does with the global MeterProvider
    with (
        caplog.at_level(logging.WARNING),
        Pipeline(tmp_path / "store", store=store, processor=SimpleSpanProcessor) as pipe,
    ):
        _post_chats(8)
        stats = pipe.exporter.stats()
        assert stats.dropped > 0
        assert _dropped_metric(reader) == stats.dropped
        stuck.clear()
        # The writer catches up now; the 200 ms of the flush timeout are for the wait above,
        # too short for this one on a loaded machine.
        _until(lambda: _written(pipe.exporter.stats()) == 8)
    pipe.stop()
    stats = pipe.exporter.stats()
    assert stats.steps + stats.dropped == 8 and stats.failed == 0
    assert len([r for r in caplog.records if "hand-off is full" in r.getMessage()]) == 1
    assert any("were not recorded" in r.getMessage() for r in caplog.records)
    (run,) = store.runs()
    spans = [s for s in store.spans(run.run_id) if "replay.step.index" in s["attributes"]]
    assert len(spans) == 8, "a dropped step's span still reaches the store through export()"
    store.close()
    handoff().dropped = 0
    meters.shutdown()


def _written(stats: ExporterStats) -> int:
    """Steps written or dropped, once nothing is pending."""
    return stats.steps + stats.dropped if stats.pending == 0 and stats.held_bytes == 0 else -1


def _until(condition: Callable[[], bool], seconds: float = 60) -> None:
    """Poll ``condition`` until it holds; fail after ``seconds`` (a generous deadline)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not so after {seconds} s"
        time.sleep(0.01)


def _dropped_metric(reader: InMemoryMetricReader) -> int | None:
    """The last value of ``otel_replay.exporter.dropped_steps`` the reader collected."""
    data = reader.get_metrics_data()
    found = [
        point.value
        for resource in (data.resource_metrics if data else [])
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == DROPPED_STEPS
        for point in metric.data.data_points
    ]
    if found:
        (only,) = [m for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics]
        assert only.data.is_monotonic and only.unit == "{step}"
    return int(found[-1]) if found else None


def test_drops_are_a_metric_of_the_meter_provider_given(tmp_path: Path) -> None:
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    own = Handoff(max_bytes=1 << 20)
    exporter = ReplaySpanExporter(tmp_path / "s", handoff=own, meter_provider=meters)
    ReplaySpanExporter(tmp_path / "s2", handoff=own, meter_provider=meters).shutdown()
    assert _dropped_metric(reader) == 0  # one instrument, however many exporters
    own.dropped = 3
    assert _dropped_metric(reader) == 3 == exporter.stats().dropped
    exporter.shutdown()
    meters.shutdown()


def test_a_step_the_store_refuses_costs_only_itself(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    own = Handoff(max_bytes=1 << 20)
    exporter = ReplaySpanExporter(tmp_path / "s", handoff=own)
    provider = TracerProvider()
    tracer = provider.get_tracer("tests")
    good, bad = make_step("run-r", 0, b"q0", b"a0"), make_step("run-r", 1, b"q1", b"a1")
    bad.request_hash = sha(b"not q1")
    for step in (good, bad):
        span = tracer.start_span("chat", attributes={"replay.run.id": "run-r"})
        span.end()
        step.span_id = span.get_span_context().span_id
        assert own.put(step, span)
    with caplog.at_level(logging.WARNING):
        assert exporter.force_flush()
    stats = exporter.stats()
    exporter.shutdown()
    provider.shutdown()
    assert (stats.steps, stats.spans, stats.failed) == (1, 2, 1)
    assert any("a step was not stored" in r.getMessage() for r in caplog.records)
    with Store.open(tmp_path / "s") as store:
        assert [s.index for s in store.steps("run-r")] == [0]
        assert len(store.spans("run-r")) == 2, "the refused step's span is kept"


def test_after_shutdown_it_refuses_quietly(pipeline: Pipeline) -> None:
    pipeline.stop()
    exporter = pipeline.exporter
    exporter.shutdown()  # twice is harmless
    assert exporter.export([]) is SpanExportResult.FAILURE
    assert exporter.force_flush() is False
    assert not handoff().wanted


def test_bad_settings_fall_back_to_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_REPLAY_FLUSH_TIMEOUT_MS", "soon")
    with caplog.at_level(logging.ERROR):
        exporter = ReplaySpanExporter(tmp_path / "store")
    exporter.shutdown()
    assert any("OTEL_REPLAY_FLUSH_TIMEOUT_MS" in r.getMessage() for r in caplog.records)


def test_sigterm_writes_everything_then_calls_the_previous_handler(tmp_path: Path) -> None:
    seen: list[int] = []

    def previous(signum: int, frame: Any) -> None:
        with Store.open(tmp_path / "store", create=False) as store:
            (run,) = store.runs()
            seen.append(run.step_count)

    old = signal.signal(signal.SIGTERM, previous)
    try:
        with Pipeline(tmp_path / "store") as pipe:
            _post_chats(4)
            os.kill(os.getpid(), signal.SIGTERM)
            assert seen == [4], "the handler ran after every step was durable"
            pipe.stop()
        assert signal.getsignal(signal.SIGTERM) is previous, "shutdown puts it back"
    finally:
        signal.signal(signal.SIGTERM, old)


def test_spans_without_the_run_id_are_ignored(tmp_path: Path) -> None:
    exporter = ReplaySpanExporter(tmp_path / "store")
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("plain"):
        pass
    provider.shutdown()
    assert exporter.stats().spans == 0


def test_the_real_client_response_is_untouched(pipeline: Pipeline) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=chat_response("exact"))

    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        response = client.post(CHAT_URL, content=chat_request("q"))
    assert response.content == chat_response("exact")
