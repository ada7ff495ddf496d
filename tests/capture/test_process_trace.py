"""One trace per burst of a process run: steps made outside any span nest under the process
run's root span ``invoke_agent {program}``, instead of each being a trace of its own."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

import otel_replay
from otel_replay.runs import _process_trace
from otel_replay.runs._run import current_run, start_process_run
from otel_replay.testing import CaptureKit, TimeGenerator
from tests.capture._spans import SECOND, outline
from tests.export._support import Pipeline

URL = "http://tools.local/orders/A-1"
ROOT_SPAN = f"invoke_agent {_process_trace._program()}"  # pytest, or python under xdist


def _client(module: ModuleType) -> Any:
    def answer(request: Any) -> Any:
        return module.Response(200, json={"path": request.url.path})

    return module.Client(transport=module.MockTransport(answer))


def _roots(spans: tuple[ReadableSpan, ...]) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith("invoke_agent")]


def _steps(spans: tuple[ReadableSpan, ...]) -> list[ReadableSpan]:
    return [s for s in spans if "replay.step.index" in (s.attributes or {})]


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def test_steps_outside_any_span_are_one_trace_under_the_process_run_root(
    client_module: ModuleType,
) -> None:
    with CaptureKit(deterministic=True) as kit, _client(client_module) as client:
        for n in range(3):
            client.get(f"{URL}{n}")
        otel_replay.now()  # a value step too
        assert _roots(kit.raw_spans()) == []  # open while the process run goes on
    root, *steps = kit.whole_spans()
    seed = root["attributes"].pop("replay.seed")  # drawn at instrumentation, recorded here
    assert isinstance(seed, int) and seed >= 0
    # It spans its steps: from the first one's start (read just before its span's) to the
    # last one's end.
    assert root == {
        "name": ROOT_SPAN,
        "kind": "INTERNAL",
        "trace_id": 1,
        "span_id": 1,
        "parent": None,
        "start_time": 3_000_000_000,
        "end_time": 13_000_000_000,
        "status": {"code": "UNSET", "description": None},
        "attributes": {
            "replay.run.id": "run-1",
            "replay.mode": "record",
            "vcs.ref.head.revision": "<revision>",
            "replay.code.dirty": "<dirty>",
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": ROOT_SPAN.removeprefix("invoke_agent "),
        },
        "events": [],
        "scope": "otel_replay",
    }
    assert outline(steps, "replay.run.id", "replay.step.index") == [
        ("GET", 1, 2, 1, 4, 5, "run-1", 0),
        ("GET", 1, 3, 1, 7, 8, "run-1", 1),
        ("GET", 1, 4, 1, 10, 11, "run-1", 2),
        ("value now", 1, 5, 1, 12, 13, "run-1", 3),
    ]


def test_steps_with_a_span_around_them_keep_it_and_open_no_root(
    client_module: ModuleType,
) -> None:
    with CaptureKit() as kit, _client(client_module) as client:
        tracer = kit.tracer_provider.get_tracer("the-application")
        with tracer.start_as_current_span("handle request") as mine:
            client.get(URL)
        with otel_replay.run(name="refunds"):
            client.get(URL)
    spans = kit.raw_spans()
    assert _roots(spans) == [s for s in spans if s.name == "invoke_agent refunds"]
    first, second = sorted(_steps(spans), key=lambda s: s.start_time or 0)
    assert _parent(first) == mine.get_span_context().span_id
    (block,) = _roots(spans)
    assert block.context is not None and _parent(second) == block.context.span_id


def test_the_application_never_has_the_root_as_its_current_span(
    client_module: ModuleType,
) -> None:
    with CaptureKit(), _client(client_module) as client:
        client.get(URL)
        assert not trace.get_current_span().get_span_context().is_valid
        client.get(URL)
        assert not trace.get_current_span().get_span_context().is_valid


def test_threads_and_tasks_of_the_process_run_share_its_trace() -> None:
    async def ask(client: httpx.AsyncClient, n: int) -> None:
        await client.get(f"{URL}{n}")

    async def tasks() -> None:
        transport = httpx.MockTransport(lambda request: httpx.Response(200))
        async with httpx.AsyncClient(transport=transport) as client:
            await asyncio.gather(*(ask(client, n) for n in range(4)))

    with CaptureKit() as kit, _client(httpx) as client:
        threads = [threading.Thread(target=client.get, args=(f"{URL}{n}",)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        asyncio.run(tasks())
    spans = kit.raw_spans()
    (root,) = _roots(spans)
    assert len(_steps(spans)) == 8
    assert root.context is not None
    assert {_parent(s) for s in _steps(spans)} == {root.context.span_id}


def test_an_idle_process_run_opens_a_new_trace(
    client_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_process_trace, "IDLE_GAP_NS", 60_000_000_000)
    clock = TimeGenerator()
    with CaptureKit(deterministic=True, clock=clock) as kit, _client(client_module) as client:
        client.get(URL)
        client.get(URL)
        clock.advance(61_000_000_000)  # idle past the gap
        # The first root ends at its last step's end, when the next step comes.
        client.get(URL)
        (first,) = _roots(kit.raw_spans())
    spans = kit.whole_spans()
    assert outline(spans, "replay.run.id") == [
        (ROOT_SPAN, 1, 1, None, 3, 8, "run-1"),
        ("GET", 1, 2, 1, 4, 5, "run-1"),
        ("GET", 1, 3, 1, 7, 8, "run-1"),
        (ROOT_SPAN, 2, 4, None, 70, 72, "run-1"),
        ("GET", 2, 5, 4, 71, 72, "run-1"),
    ]
    assert first.end_time == 8 * SECOND


def test_a_new_process_run_ends_the_root_of_the_last(client_module: ModuleType) -> None:
    with CaptureKit() as kit, _client(client_module) as client:
        client.get(URL)
        before = current_run().run_id
        start_process_run()
        (root,) = _roots(kit.raw_spans())
        assert dict(root.attributes or {})["replay.run.id"] == before
        client.get(URL)
    roots = _roots(kit.raw_spans())
    assert len(roots) == 2 and roots[1].attributes is not None
    assert roots[1].attributes["replay.run.id"] == current_run().run_id != before


_EXIT_SCRIPT = """
import sys
import httpx
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

from otel_replay.capture.instrumentor import ReplayInstrumentor

provider = TracerProvider()
provider.add_span_processor(
    BatchSpanProcessor(ConsoleSpanExporter(formatter=lambda span: span.to_json(None) + "\\n"))
)
trace.set_tracer_provider(provider)
ReplayInstrumentor().instrument()
client = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200)))
for n in range(3):
    client.get(f"http://tools.local/orders/{n}")
sys.exit(0)
"""


@pytest.mark.subprocess
def test_the_root_is_exported_at_exit_after_its_steps(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(_EXIT_SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=Path(__file__).parents[2],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    spans = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    (root,) = [s for s in spans if s["name"] == "invoke_agent agent.py"]
    steps = [s for s in spans if s is not root]
    assert len(steps) == 3
    assert {s["parent_id"] for s in steps} == {root["context"]["span_id"]}
    assert {s["context"]["trace_id"] for s in spans} == {root["context"]["trace_id"]}
    assert root["end_time"] == max(s["end_time"] for s in steps)


def test_a_genai_span_started_with_no_parent_nests_under_the_root(
    client_module: ModuleType,
) -> None:
    """Another instrumentation's call span with no parent (an SDK's own): it nests under the
    process run's root, and the root ends where it ends. A span without GenAI attributes, one
    with a parent, one of another tracer provider and one in a run() block keep theirs."""
    genai = {"gen_ai.operation.name": "chat"}
    with CaptureKit() as kit, _client(client_module) as client:
        sdk = kit.tracer_provider.get_tracer("an.sdk")
        elsewhere = TracerProvider().get_tracer("an.sdk")
        with sdk.start_as_current_span("sdk.call", attributes=genai) as call:
            client.get(URL)  # the step, beneath the call
        plain = sdk.start_span("handle request")
        plain.end()
        with sdk.start_as_current_span("mine"):
            child = sdk.start_span("sdk.call", attributes=genai)
            child.end()
        other = elsewhere.start_span("sdk.call", attributes=genai)
        other.end()
        with otel_replay.run(name="block"):
            blocked = sdk.start_span("sdk.call", attributes=genai)
            blocked.end()
        late = sdk.start_span("sdk.call", attributes=genai)  # no step after it
        late.end()
    spans = kit.raw_spans()
    roots = {s.name: s for s in _roots(spans)}
    assert roots.keys() == {ROOT_SPAN, "invoke_agent block"}
    root, block = roots[ROOT_SPAN], roots["invoke_agent block"]
    assert root.context is not None and block.context is not None
    (step,) = _steps(spans)
    assert _parent(step) == call.get_span_context().span_id
    # The step, beneath the call, made the root its run's.
    assert dict(root.attributes or {})["replay.run.id"] == current_run().run_id
    adopted = [s for s in spans if s.name == "sdk.call" and _parent(s) == root.context.span_id]
    assert [s.context.span_id for s in adopted if s.context] == [
        call.get_span_context().span_id,
        late.get_span_context().span_id,
    ]
    assert {s.context.trace_id for s in (root, *adopted, step) if s.context} == {
        root.context.trace_id
    }
    mine = next(s for s in spans if s.name == "mine")
    assert plain.parent is None
    assert mine.context is not None and _parent(child) == mine.context.span_id
    assert other.get_span_context().trace_id != root.context.trace_id
    assert _parent(blocked) == block.context.span_id
    assert root.end_time == late.end_time


def test_a_root_another_span_opened_is_a_runs_only_once_a_step_is_made_under_it(
    client_module: ModuleType, tmp_path: Path
) -> None:
    genai = {"gen_ai.operation.name": "chat"}
    with CaptureKit() as kit, _client(client_module) as client:
        sdk = kit.tracer_provider.get_tracer("an.sdk")
        sdk.start_span("sdk.call", attributes=genai).end()
        start_process_run()  # ends that root: no step was made under it
        sdk.start_span("sdk.call", attributes=genai).end()
        client.get(URL)
    first, second = sorted(_roots(kit.raw_spans()), key=lambda s: s.start_time or 0)
    assert not any(k.startswith("replay.") for k in first.attributes or {})
    assert dict(second.attributes or {})["replay.run.id"] == current_run().run_id
    # A program whose GenAI spans made no step records no run.
    with Pipeline(tmp_path / "store") as pipe:
        pipe.provider.get_tracer("an.sdk").start_span("sdk.call", attributes=genai).end()
    assert not (tmp_path / "store").exists()
