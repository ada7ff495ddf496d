"""The instrumentor's life cycle and what each step span carries."""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from types import ModuleType
from typing import Any

import pytest
from opentelemetry import context

import otel_replay
from otel_replay.capture.instrumentor import ReplayInstrumentor
from otel_replay.runs import RUN_FACTS
from otel_replay.runs._handoff import handoff
from otel_replay.step import RunEnd
from otel_replay.testing import CaptureKit
from tests.capture._spans import outline
from tests.capture.conftest import scripted_transport

URL = "http://tools.local/orders/A-1?api_key=sk-query-secret"


def _json_transport(module: ModuleType) -> Any:
    def answer(request: Any) -> Any:
        return module.Response(200, json={"echo": json.loads(request.content or b"null")})

    return module.MockTransport(answer)


def test_clients_created_before_instrumentation_are_covered(client_module: ModuleType) -> None:
    client = client_module.Client(transport=_json_transport(client_module))
    with CaptureKit() as kit:
        client.get(URL)
        assert [s["name"] for s in kit.spans()] == ["GET"]
    client.close()


def test_instrument_twice_is_harmless_and_uninstrument_unwraps(
    client_module: ModuleType,
) -> None:
    def steps() -> int:  # the process run's root span ends with the instrumentation
        return sum("replay.step.index" in s["attributes"] for s in kit.spans())

    with CaptureKit() as kit, client_module.Client(transport=_json_transport(client_module)) as c:
        kit.instrumentor.instrument(tracer_provider=kit.tracer_provider)
        c.get(URL)
        assert steps() == 1
        kit.instrumentor.uninstrument()
        c.get(URL)
        assert steps() == 1
        kit.instrumentor.instrument(tracer_provider=kit.tracer_provider)
        c.get(URL)
        assert steps() == 2
    assert not isinstance(
        client_module.Client.__dict__["_send_single_request"].__class__.__name__, type
    )
    assert "wrapt" not in type(client_module.Client.__dict__["_send_single_request"]).__module__


def test_mode_off_records_nothing(
    client_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_REPLAY_MODE", "off")
    with CaptureKit() as kit, client_module.Client(transport=_json_transport(client_module)) as c:
        assert c.get(URL).json() == {"echo": None}
        assert kit.spans() == []


def test_suppressed_context_records_nothing(client_module: ModuleType) -> None:
    with CaptureKit() as kit, client_module.Client(transport=_json_transport(client_module)) as c:
        token = context.attach(context.set_value(context._SUPPRESS_INSTRUMENTATION_KEY, True))
        try:
            c.get(URL)
        finally:
            context.detach(token)
        assert kit.spans() == []


def test_plain_http_step_attributes(client_module: ModuleType) -> None:
    body = b'{"order_id": "A-1", "reason": "broken"}'
    answer = b'{"echo":{"order_id":"A-1","reason":"broken"}}'
    with (
        CaptureKit(deterministic=True) as kit,
        client_module.Client(transport=_json_transport(client_module)) as c,
    ):
        response = c.post(
            "https://tools.local:8443/refunds?token=tok-secret",
            content=body,
            headers={"content-type": "application/json", "Authorization": "Bearer sk-hdr"},
        )
        spans = kit.whole_spans()
    assert response.content == answer
    assert spans == [
        {
            "name": "POST",
            "kind": "CLIENT",
            "trace_id": 1,
            "span_id": 2,
            "parent": 1,  # the process run's root span, still open
            "start_time": 4_000_000_000,
            "end_time": 5_000_000_000,
            "status": {"code": "UNSET", "description": None},
            "attributes": {
                "replay.run.id": "run-1",
                "replay.mode": "record",
                "replay.step.index": 0,
                # The root span it was made under, which carries the run's facts
                # (vcs.ref.head.revision, replay.code.dirty).
                "replay.run.span_id": f"{1:016x}",
                "replay.request.hash": "sha256:" + hashlib.sha256(body).hexdigest(),
                "replay.request.size": len(body),
                "replay.request.body": body.decode(),
                "server.address": "tools.local",
                "server.port": 8443,
                "replay.step.kind": "http",
                "http.request.method": "POST",
                "url.full": "https://tools.local:8443/refunds?token=REDACTED",
                "replay.response.hash": "sha256:" + hashlib.sha256(answer).hexdigest(),
                "replay.response.size": len(answer),
                "replay.response.body": answer.decode(),
                "replay.response.status_code": 200,
                "replay.response.content_type": "application/json",
                "http.response.status_code": 200,
                "replay.response.complete": True,
            },
            "events": [],
            "scope": "otel_replay",
        }
    ]
    assert "sk-hdr" not in repr(kit.raw_spans()) and "tok-secret" not in repr(kit.raw_spans())


def test_user_patterns_redact_bodies_before_hashing(
    client_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_REPLAY_REDACT", r"acct-[0-9]+")
    body = b'{"account": "acct-4242"}'
    with CaptureKit() as kit, client_module.Client(transport=_json_transport(client_module)) as c:
        assert c.post(URL, content=body).json() == {"echo": {"account": "acct-4242"}}
        (span,) = kit.spans()
    redacted = b'{"account": "REDACTED"}'
    assert span["attributes"]["replay.request.hash"] == (
        "sha256:" + hashlib.sha256(redacted).hexdigest()
    )


def test_a_step_under_the_applications_own_trace_carries_the_run_facts(
    client_module: ModuleType,
) -> None:
    """A step made under a span of the application's own trace names no span of its run,
    which would carry the run's facts: it carries them itself."""
    with (
        CaptureKit(deterministic=True) as kit,
        client_module.Client(transport=_json_transport(client_module)) as c,
    ):
        with kit.tracer_provider.get_tracer("app").start_as_current_span("handle"):
            c.get(URL)
        c.get(URL)  # under the process run's root: the root has them
        spans = kit.whole_spans()
    own, rooted = [s["attributes"] for s in spans if "replay.step.index" in s["attributes"]]
    assert "replay.run.span_id" not in own
    assert (own["vcs.ref.head.revision"], own["replay.code.dirty"]) == ("<revision>", "<dirty>")
    assert rooted["replay.run.span_id"] and not RUN_FACTS & rooted.keys()


def test_step_index_follows_send_order_and_runs_restart_it(client_module: ModuleType) -> None:
    with (
        CaptureKit(deterministic=True) as kit,
        client_module.Client(transport=_json_transport(client_module)) as c,
    ):
        c.get(URL)
        with otel_replay.run(name="triage", seed=7):
            c.get(URL)
            c.get(URL)
        c.get(URL)
        spans = kit.whole_spans()
    shape = outline(spans, "replay.run.id", "replay.step.index", "replay.seed")
    # The process run's root (trace 1, span 1) is still open; the run() block is a trace of
    # its own whose steps count from 0 again; the process run's steps go on where they were.
    assert shape == [
        ("GET", 1, 2, 1, 4, 5, "run-1", 0, None),
        ("invoke_agent triage", 2, 3, None, 9, 14, "run-2", None, 7),
        ("GET", 2, 4, 3, 10, 11, "run-2", 0, None),  # the seed is on the block's span
        ("GET", 2, 5, 3, 12, 13, "run-2", 1, None),
        ("GET", 1, 6, 1, 17, 18, "run-1", 1, None),
    ]
    agent = spans[1]["attributes"]
    assert agent["gen_ai.operation.name"] == "invoke_agent"
    assert agent["gen_ai.agent.name"] == "triage"


def test_run_seeds_random_and_works_async() -> None:
    async def draw() -> tuple[str, float]:
        async with otel_replay.run(name="a", seed=1234) as run:
            return run.run_id, random.random()

    with CaptureKit() as kit:
        first_id, first = asyncio.run(draw())
        second_id, second = asyncio.run(draw())
        with pytest.raises(ValueError, match="boom"), otel_replay.run(name="b"):
            raise ValueError("boom")
        spans = kit.spans()
    assert first == second == random.Random(1234).random()
    assert first_id != second_id
    failed = spans[-1]
    assert failed["status"] == "ERROR"
    assert failed["attributes"]["error.type"] == "ValueError"
    assert isinstance(failed["attributes"]["replay.seed"], int)


def test_a_seeded_run_repeats_the_codes_randomness_not_opentelemetrys_ids(
    client_module: ModuleType,
) -> None:
    """Seeding ``random`` for the code must not make span ids repeat (a recording and its
    replay, or two runs with one seed, had the same ids after the first seeded block), and
    the spans a run makes must not move the code's sequence on."""

    def seeded(requests: int) -> float:
        transport = _json_transport(client_module)
        with client_module.Client(transport=transport) as client, otel_replay.run("s", seed=99):
            for _ in range(requests):
                client.get(URL)
            return random.random()

    with CaptureKit() as kit:
        drawn = [seeded(0), seeded(3), seeded(3)]
        with otel_replay.run(name="after"):  # a root opened after the seeded blocks
            pass
        spans = kit.raw_spans()
    assert drawn == [random.Random(99).random()] * 3
    assert len(spans) == 3 + 3 + 3 + 1
    assert len({span.context.span_id for span in spans}) == len(spans)
    assert len({span.context.trace_id for span in spans if span.parent is None}) == 4


def test_the_kits_counting_ids_hold_through_seeded_runs(
    client_module: ModuleType, replay_capture_deterministic: CaptureKit
) -> None:
    """The capture keeps the SDK's ids apart from the code's ``random`` (``capture/_ids``);
    an id generator given to the tracer provider is still the one every span draws from."""
    with client_module.Client(transport=_json_transport(client_module)) as client:
        for _ in range(2):
            with otel_replay.run("s", seed=99):
                client.get(URL)
                drawn = random.random()
    spans = replay_capture_deterministic.whole_spans()
    assert drawn == random.Random(99).random()
    assert [(s["trace_id"], s["span_id"], s["parent"]) for s in spans] == [
        (1, 1, None),
        (1, 2, 1),
        (2, 3, None),
        (2, 4, 3),
    ]
    assert [s["start_time"] for s in spans] == sorted({s["start_time"] for s in spans})


def test_concurrent_threads_get_distinct_indices(client_module: ModuleType) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with CaptureKit() as kit, client_module.Client(transport=_json_transport(client_module)) as c:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _: c.get(URL), range(40)))
        indices = sorted(s["attributes"]["replay.step.index"] for s in kit.spans())
    assert indices == list(range(40))


def test_handoff_gets_the_exact_bytes_when_a_consumer_is_attached(
    client_module: ModuleType,
) -> None:
    chunks = [b"data: a\n\n", b"data: b\n\n"]
    pair = scripted_transport(client_module, chunks)
    consumer = handoff().attach()
    try:
        with CaptureKit() as kit, client_module.Client(transport=pair[0]) as c:
            c.post(URL, content=b"q", headers={"Authorization": "Bearer sk-handoff"})
            (raw,) = kit.raw_spans()
        assert raw.context is not None
        step = consumer.steps().get(raw.context.span_id)
    finally:
        handoff().detach(consumer)
    assert step is not None
    assert step.request_body == b"q"
    assert step.response_body == b"".join(chunks)
    assert [size for size, _ in step.chunks] == [len(c) for c in chunks]
    assert step.complete is True and step.status_code == 200
    assert ("Authorization", "REDACTED") in step.request_headers
    assert step.url.endswith("api_key=REDACTED")
    assert step.request_hash == "sha256:" + hashlib.sha256(b"q").hexdigest()
    assert step.provider is step.model is step.tokens_in is step.tokens_out is None
    assert step.run is not None and step.run.run_id == step.run_id


def test_steps_of_a_run_share_its_facts(client_module: ModuleType) -> None:
    consumer = handoff().attach()
    try:
        with CaptureKit(), client_module.Client(transport=_json_transport(client_module)) as c:
            outside = c.get(URL)
            with otel_replay.run(name="triage", seed=7) as run:
                c.get(URL)
                c.get(URL)
            assert outside.status_code == 200
        steps = sorted(consumer.steps().values(), key=lambda s: s.start_ns)
    finally:
        handoff().detach(consumer)
    first, in_run, in_run_too = steps
    assert in_run.run is in_run_too.run, "one RunFacts per run"
    facts = in_run.run
    assert facts is not None and facts.run_id == run.run_id and facts.seed == 7
    assert facts.mode == "record"
    assert facts.start_ns <= in_run.start_ns
    assert first.run is not None and first.run.run_id != run.run_id


def test_a_run_block_hands_its_end_to_the_exporter_sync_and_async() -> None:
    async def run_async() -> str:
        async with otel_replay.run(name="a") as run:
            return run.run_id

    consumer = handoff().attach()
    try:
        with CaptureKit():
            with otel_replay.run(name="ok") as ok:
                pass
            async_id = asyncio.run(run_async())
            with pytest.raises(KeyError), otel_replay.run(name="b") as failed:
                raise KeyError("boom")
            with pytest.raises(json.JSONDecodeError), otel_replay.run(name="c") as failed_too:
                json.loads("{")
        ends = consumer.drain()
    finally:
        handoff().detach(consumer)
    assert all(isinstance(end, RunEnd) for end in ends)
    assert [(e.run_id, e.error_type) for e in ends if isinstance(e, RunEnd)] == [
        (ok.run_id, None),
        (async_id, None),
        (failed.run_id, "KeyError"),
        (failed_too.run_id, "json.decoder.JSONDecodeError"),
    ]


def test_a_run_block_ends_quietly_with_no_exporter_attached() -> None:
    with CaptureKit(), otel_replay.run(name="alone"):
        pass
    assert not handoff().wanted


def test_entry_point_is_registered() -> None:
    from importlib.metadata import entry_points

    (ep,) = [e for e in entry_points(group="opentelemetry_instrumentor") if e.name == "otel_replay"]
    assert ep.load() is ReplayInstrumentor
