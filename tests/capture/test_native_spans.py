"""SDKs and instrumentations that open their own span per API call: every attempt on the wire
is a step, in the OTLP data with its bytes, and replays from that data alone.

The anthropic SDK 2.x (its native tracing on and off) and the openai SDK under
``opentelemetry-instrumentation-openai-v2`` run against the stand-in with ``max_retries`` ≥ 1,
the stand-in refusing some requests with a 429 before answering them (``x-standin-fail-first``,
``standin-flaky``). Under a call span each attempt is an HTTP span of ours beneath it, carrying
the replay kit; the GenAI attributes stay on the call span; no ``chat`` span is doubled and no
token is counted twice, in spans or in metrics.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk.metrics.export import HistogramDataPoint

import otel_replay
from examples.standin import StandIn
from otel_replay.capture._calls import CALL_SPANS
from otel_replay.replay.sources import import_runs, load_run, read_runs
from otel_replay.runs._process_trace import _program
from otel_replay.store import Store
from otel_replay.testing import CaptureKit
from tests.export._support import Pipeline
from tests.replay.conftest import collector_json

ROOT_SPAN = f"invoke_agent {_program()}"  # pytest, or python under xdist

KEY = "sk-native-spans-not-a-secret"
DEAD = "http://127.0.0.1:9"  # nothing listens there: a live request would fail
QUESTIONS = ["Where is my order A-1234?", "Is order B-77 delayed?", "Hello there"]
FAIL_FIRST = {"x-standin-fail-first": "2"}  # the second question: 429, 429, then the answer
CLAUDE = "claude-sonnet-4-6"


@pytest.fixture(params=[False, True], ids=["plain", "stream"])
def stream(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture(params=[True, False], ids=["native-on", "native-off"])
def native(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


# -- the agents --------------------------------------------------------------------------------


def claude_agent(client: anthropic.Anthropic, stream: bool) -> list[str]:
    """Three questions; the second is refused twice before it is answered."""
    answers = []
    for number, question in enumerate(QUESTIONS):
        request: dict[str, Any] = {
            "model": CLAUDE,
            "max_tokens": 200,
            "messages": [{"role": "user", "content": question}],
            "extra_headers": FAIL_FIRST if number == 1 else None,
        }
        if stream:
            with client.messages.stream(**request) as events:
                answers.append(events.get_final_text())
        else:
            reply = client.messages.create(**request)
            answers.append("".join(b.text for b in reply.content if b.type == "text"))
    return answers


def claude(base_url: str, kit: CaptureKit | None, native: bool) -> anthropic.Anthropic:
    # The SDK's spans go to the kit's provider when its tracing is on (``open_telemetry``; the
    # environment's ANTHROPIC_OPEN_TELEMETRY=false turns it off for clients given no option).
    option: Any = {"tracer_provider": kit.tracer_provider} if native and kit else False
    return anthropic.Anthropic(base_url=base_url, api_key=KEY, max_retries=2, open_telemetry=option)


def gpt_agent(client: openai.OpenAI, stream: bool) -> list[str]:
    answers = []
    for number, question in enumerate(QUESTIONS):
        result = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": question}],
            stream=stream,
            extra_headers=FAIL_FIRST if number == 1 else None,
        )
        if stream:  # an openai Stream, or the official instrumentation's wrapper of one
            answers.append("".join(c.choices[0].delta.content or "" for c in result if c.choices))
        else:
            answers.append(result.choices[0].message.content or "")
    return answers


# -- what the spans and metrics say ------------------------------------------------------------


def _steps(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    steps = [s for s in spans if "replay.step.index" in s["attributes"]]
    return sorted(steps, key=lambda s: s["attributes"]["replay.step.index"])


def _calls(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in spans if s["attributes"].get("gen_ai.operation.name") == "chat"]


def _histogram_points(kit: CaptureKit, name: str) -> list[tuple[str, HistogramDataPoint]]:
    """(scope, point) for every data point of the histogram ``name``."""
    data = kit.metric_reader.get_metrics_data()
    out = []
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    points = metric.data.data_points
                    out += [
                        (scope.scope.name, p) for p in points if isinstance(p, HistogramDataPoint)
                    ]
    return out


def _tokens(kit: CaptureKit, kind: str) -> tuple[int, int]:
    """(data points counted, tokens summed) of ``gen_ai.client.token.usage`` for ``kind``."""
    points = [
        p
        for _, p in _histogram_points(kit, "gen_ai.client.token.usage")
        if (p.attributes or {}).get("gen_ai.token.type") == kind
    ]
    return sum(p.count for p in points), sum(int(p.sum) for p in points)


def _usage(spans: list[dict[str, Any]], key: str) -> int:
    return sum(s["attributes"].get(key, 0) for s in spans)


def _write_otlp(kit: CaptureKit, path: Path) -> Path:
    path.write_text(json.dumps(collector_json(kit.raw_spans())))
    return path


# -- anthropic 2.x -----------------------------------------------------------------------------


def test_anthropic_every_attempt_is_a_step_and_replays_from_otlp(
    tmp_path: Path, native: bool, stream: bool
) -> None:
    with StandIn(event_delay=0.001) as standin, CaptureKit() as kit:
        with claude(standin.anthropic_base_url, kit, native) as client:
            answers = claude_agent(client, stream)
        received = len(standin.received)
    assert received == 5  # the provider saw 429, 429 and three answers
    spans = kit.spans()
    steps = _steps(spans)
    assert [s["attributes"]["replay.step.index"] for s in steps] == list(range(5))
    statuses = [s["attributes"]["replay.response.status_code"] for s in steps]
    assert statuses == [200, 429, 429, 200, 200]
    assert all("replay.request.body" in s["attributes"] for s in steps)
    calls = _calls(spans)
    if native:
        # One call span per API call, the SDK's; each attempt an HTTP span of ours beneath it.
        assert [(c["name"], c["scope"]) for c in calls] == [
            ("anthropic.messages.create", "com.anthropic.sdk.python")
        ] * 3
        assert [s["name"] for s in steps] == ["POST"] * 5
        assert [s["attributes"].get("http.request.resend_count") for s in steps] == [
            None,
            None,
            1,
            2,
            None,
        ]
        assert [calls.index(spans[s["parent"]]) for s in steps] == [0, 1, 1, 1, 2]
        assert all(not any(k.startswith("gen_ai.") for k in s["attributes"]) for s in steps)
        assert [s["attributes"]["http.response.status_code"] for s in steps] == statuses
        assert [s["status"] for s in steps] == ["UNSET", "ERROR", "ERROR", "UNSET", "UNSET"]
        for call, answer, question in zip(calls, answers, QUESTIONS, strict=True):
            attrs = call["attributes"]
            assert call["status"] == "OK" and "error.type" not in attrs
            assert attrs["replay.run.id"] == steps[0]["attributes"]["replay.run.id"]
            assert attrs["gen_ai.input.messages"] == [
                {"role": "user", "parts": [{"type": "text", "content": question}]}
            ]
            (message,) = attrs["gen_ai.output.messages"]
            assert message["parts"][0]["content"] == answer
    else:
        # No call span: each attempt is a model call span of ours.
        assert calls == steps
        assert [s["name"] for s in steps] == [f"chat {CLAUDE}"] * 5
        assert [s["attributes"].get("error.type") is not None for s in steps] == [
            False,
            True,
            True,
            False,
            False,
        ]
    # Tokens once per answer, in spans and in metrics.
    answered = [
        s for s in (calls if native else steps) if "gen_ai.usage.output_tokens" in s["attributes"]
    ]
    assert len(answered) == 3
    out_tokens = _usage(answered, "gen_ai.usage.output_tokens")
    assert _tokens(kit, "output") == (3, out_tokens)
    durations = _histogram_points(kit, "gen_ai.client.operation.duration")
    assert sum(p.count for _, p in durations) == (3 if native else 5)
    assert not CALL_SPANS._calls  # every call forgotten once its span ended

    # The OTLP data alone replays every attempt: the SDK sees the 429s, retries, gets answers.
    source = _write_otlp(kit, tmp_path / "spans.json")
    run = load_run(str(source))
    assert [s.step.status_code for s in run.steps] == statuses
    assert all(s.fidelity == "exact" for s in run.steps)
    with otel_replay.replaying(str(source)) as result, claude(DEAD, None, False) as client:
        replayed = claude_agent(client, stream)
    assert replayed == answers
    assert len(result.steps) == received
    assert [s.recorded for s in result.steps] == list(range(5))
    assert result.identical, result.first_divergence
    assert result.network_attempts == []


# -- openai under the official instrumentation -------------------------------------------------


def test_openai_v2_every_attempt_is_a_step_and_replays_from_otlp(
    tmp_path: Path, stream: bool
) -> None:
    official = OpenAIInstrumentor()  # type: ignore[no-untyped-call]
    with StandIn(event_delay=0.001) as standin, CaptureKit() as kit:
        official.instrument(tracer_provider=kit.tracer_provider, meter_provider=kit.meter_provider)
        try:
            with openai.OpenAI(
                base_url=standin.openai_base_url, api_key=KEY, max_retries=2
            ) as client:
                answers = gpt_agent(client, stream)
        finally:
            official.uninstrument()
        received = len(standin.received)
    assert received == 5
    spans = kit.spans()
    steps = _steps(spans)
    calls = _calls(spans)
    # The official span is the one chat span per call; the attempts are HTTP spans beneath it.
    assert [(c["name"], c["scope"]) for c in calls] == [
        ("chat gpt-4o-mini", "opentelemetry.util.genai.handler")
    ] * 3
    assert [s["name"] for s in steps] == ["POST"] * 5
    assert [calls.index(spans[s["parent"]]) for s in steps] == [0, 1, 1, 1, 2]
    assert [s["attributes"].get("http.request.resend_count") for s in steps] == [
        None,
        None,
        1,
        2,
        None,
    ]
    statuses = [s["attributes"]["http.response.status_code"] for s in steps]
    assert statuses == [200, 429, 429, 200, 200]
    assert all(not any(k.startswith("gen_ai.") for k in s["attributes"]) for s in steps)
    for call in calls:
        assert "error.type" not in call["attributes"]
        assert call["attributes"]["gen_ai.output.messages"]  # filled in by us
    # Its metrics are the instrumentation's own: none of ours beside them.
    for name in ("gen_ai.client.token.usage", "gen_ai.client.operation.duration"):
        scopes = {scope for scope, _ in _histogram_points(kit, name)}
        assert "otel_replay" not in scopes
    if not stream:  # streamed usage comes only with stream_options.include_usage
        assert _tokens(kit, "output")[0] == 3
    assert _tokens(kit, "output")[1] == _usage(calls, "gen_ai.usage.output_tokens")
    assert not CALL_SPANS._calls

    source = _write_otlp(kit, tmp_path / "spans.json")
    with (
        otel_replay.replaying(str(source)) as result,
        openai.OpenAI(base_url=f"{DEAD}/v1", api_key=KEY, max_retries=2) as client,
    ):
        replayed = gpt_agent(client, stream)
    assert replayed == answers
    assert len(result.steps) == received
    assert [s.recorded for s in result.steps] == list(range(5))
    assert result.identical, result.first_divergence

    # Imported, each answered attempt keeps its call's tokens (show and runs listed none).
    with Store.open(tmp_path / "imported") as store:
        import_runs(store, read_runs(source.read_bytes(), str(source)))
        held = [(s.tokens_in, s.tokens_out) for s in store.steps(store.runs()[0].run_id)]
    usage = [
        (
            c["attributes"].get("gen_ai.usage.input_tokens"),
            c["attributes"].get("gen_ai.usage.output_tokens"),
        )
        for c in calls
    ]
    assert held == [usage[0], (None, None), (None, None), usage[1], usage[2]]
    assert stream or all(tokens is not None for pair in held[3:] for tokens in pair)


# -- a call that fails after its retries -------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_rate_limited_call_replays_its_failure_from_otlp(
    tmp_path: Path, asynchronous: bool
) -> None:
    """The '3 p.m. rate limit': every attempt refused; the exported spans alone make the agent
    see the same 429s and the same exception again."""
    request: dict[str, Any] = {
        "model": "standin-error",
        "max_tokens": 50,
        "messages": [{"role": "user", "content": "hi"}],
    }

    def call(base_url: str, kit: CaptureKit | None) -> str:
        option: Any = {"tracer_provider": kit.tracer_provider} if kit else False
        if asynchronous:

            async def go() -> None:
                async with anthropic.AsyncAnthropic(
                    base_url=base_url, api_key=KEY, max_retries=1, open_telemetry=option
                ) as client:
                    await client.messages.create(**request)

            with pytest.raises(anthropic.RateLimitError) as raised:
                asyncio.run(go())
        else:
            with (
                anthropic.Anthropic(
                    base_url=base_url, api_key=KEY, max_retries=1, open_telemetry=option
                ) as client,
                pytest.raises(anthropic.RateLimitError) as raised,
            ):
                client.messages.create(**request)
        return str(raised.value)

    with StandIn(event_delay=0.001) as standin, CaptureKit() as kit:
        message = call(standin.anthropic_base_url, kit)
        received = len(standin.received)
    assert received == 2
    spans = kit.spans()
    (span,) = _calls(spans)
    assert span["status"] == "ERROR" and span["attributes"]["error.type"] == "rate_limit_error"
    steps = _steps(spans)
    assert [s["attributes"]["http.response.status_code"] for s in steps] == [429, 429]
    # One failed operation, no tokens.
    ((_, point),) = _histogram_points(kit, "gen_ai.client.operation.duration")
    assert point.count == 1 and (point.attributes or {})["error.type"] == "rate_limit_error"
    assert _histogram_points(kit, "gen_ai.client.token.usage") == []

    source = _write_otlp(kit, tmp_path / "spans.json")
    with otel_replay.replaying(str(source)) as result:
        assert call(DEAD, None) == message
    assert len(result.steps) == received
    assert result.identical, result.first_divergence


# -- the store, and other owners' attributes ----------------------------------------------------


FLAKY: dict[str, Any] = {
    "model": "standin-flaky",  # the stand-in refuses it once, then answers
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "Where is my order A-1234?"}],
}


def test_the_store_keeps_every_attempt_and_the_call_span(tmp_path: Path) -> None:
    with StandIn(event_delay=0.001) as standin, Pipeline(tmp_path / "store") as pipe:
        with (
            anthropic.Anthropic(
                base_url=standin.anthropic_base_url,
                api_key=KEY,
                max_retries=1,
                open_telemetry={"tracer_provider": pipe.provider},
            ) as client,
            client.messages.stream(**FLAKY) as events,
        ):
            answer = events.get_final_text()
        run_id = pipe.run.run_id
    run = load_run(run_id, store=str(tmp_path / "store"))
    assert [s.step.status_code for s in run.steps] == [429, 200]
    assert [s.fidelity for s in run.steps] == ["exact", "exact"]
    store = pipe.open_store()
    try:
        stored = store.spans(run_id)
        assert [(s.model, s.tokens_out is None) for s in store.steps(run_id)] == [
            ("standin-flaky", True),
            ("standin-flaky", False),
        ]
    finally:
        store.close()
    names = sorted(s["name"] for s in stored)
    # The call span nests under the process run's root span, which the store keeps too.
    assert names == ["POST", "POST", "anthropic.messages.create", ROOT_SPAN]
    with (
        otel_replay.replaying(run_id, store=str(tmp_path / "store")) as result,
        anthropic.Anthropic(base_url=DEAD, api_key=KEY, max_retries=1) as client,
        client.messages.stream(**FLAKY) as events,
    ):
        assert events.get_final_text() == answer
    assert len(result.steps) == 2 and result.identical


def test_an_owners_attributes_are_filled_in_never_replaced(standin: StandIn) -> None:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello there"}]}
    with CaptureKit() as kit:
        tracer = kit.tracer_provider.get_tracer("some.framework")
        owner = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "as-the-framework-names-it",
        }
        with (
            tracer.start_as_current_span("chat framework", attributes=owner),
            httpx.Client() as client,
        ):
            client.post(f"{standin.openai_base_url}/chat/completions", json=body)
        spans = kit.spans()
        (call,) = _calls(spans)
        (step,) = _steps(spans)
    attrs = call["attributes"]
    assert attrs["gen_ai.request.model"] == "as-the-framework-names-it"
    assert attrs["gen_ai.input.messages"][0]["parts"][0]["content"] == "Hello there"
    assert attrs["gen_ai.usage.output_tokens"] > 0
    assert spans[step["parent"]] is call and step["attributes"]["replay.step.kind"] == "llm"
    # An owner not known to record none records its own metrics: we add none.
    assert _histogram_points(kit, "gen_ai.client.token.usage") == []
    assert _histogram_points(kit, "gen_ai.client.operation.duration") == []


def test_an_answer_too_large_to_travel_inline_replays_from_the_call_span(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    # The 429's body fits within the limit, the answer's does not: from OTLP data alone the
    # refused attempt replays byte for byte, the answer from the call span's GenAI attributes.
    monkeypatch.setenv("OTEL_REPLAY_INLINE_LIMIT", "400")
    with (
        StandIn(event_delay=0.001) as standin,
        CaptureKit() as kit,
        claude(standin.anthropic_base_url, kit, native=True) as client,
    ):
        if stream:
            with client.messages.stream(**FLAKY) as events:
                answer = events.get_final_text()
        else:
            reply = client.messages.create(**FLAKY)
            answer = "".join(b.text for b in reply.content if b.type == "text")
    steps = _steps(kit.spans())
    assert "replay.response.body" in steps[0]["attributes"]
    assert "replay.response.body" not in steps[1]["attributes"]

    source = _write_otlp(kit, tmp_path / "spans.json")
    run = load_run(str(source))
    assert [(s.step.status_code, s.fidelity) for s in run.steps] == [
        (429, "exact"),
        (200, "semantic"),
    ]
    assert (run.steps[1].step.provider, run.steps[1].step.model) == ("anthropic", "standin-flaky")
    with otel_replay.replaying(str(source)) as result, claude(DEAD, None, False) as client:
        if stream:
            with client.messages.stream(**FLAKY) as events:
                assert events.get_final_text() == answer
        else:
            reply = client.messages.create(**FLAKY)
            assert "".join(b.text for b in reply.content if b.type == "text") == answer
    assert len(result.steps) == 2 and result.identical, result.first_divergence


@pytest.mark.parametrize("owned", [False, True], ids=["own-span", "under-a-call-span"])
def test_a_refused_responses_attempt_over_the_inline_limit_replays_from_otlp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, owned: bool
) -> None:
    # A Responses API call refused once, its request too large to travel inline (a long
    # conversation): the refused attempt has no response id, so only the span's
    # openai.api.type says which API it was. Read as a Chat Completions call, it matched
    # no request, the retry was served the answer at once and the replay diverged.
    monkeypatch.setenv("OTEL_REPLAY_INLINE_LIMIT", "300")
    request: dict[str, Any] = {
        "model": "standin-1",
        "input": "Where is my order A-1234? " + "Some context. " * 40,
        "extra_headers": {"x-standin-fail-first": "1"},
    }

    def ask(base_url: str, kit: CaptureKit | None) -> str:
        with openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=2) as client:
            if kit is None or not owned:
                return client.responses.create(**request).output_text
            tracer = kit.tracer_provider.get_tracer("some.framework")
            owner = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai"}
            with tracer.start_as_current_span("chat standin-1", attributes=owner):
                return client.responses.create(**request).output_text

    with StandIn(event_delay=0.001) as standin, CaptureKit() as kit:
        answer = ask(standin.openai_base_url, kit)
    steps = _steps(kit.spans())
    assert [s["attributes"].get("replay.response.status_code") for s in steps] == [429, None]
    assert all("replay.request.body" not in s["attributes"] for s in steps)

    source = _write_otlp(kit, tmp_path / "spans.json")
    run = load_run(str(source))
    assert [(s.endpoint, s.step.status_code) for s in run.steps] == [
        ("openai.responses", 429),
        ("openai.responses", 200),
    ]
    with otel_replay.replaying(str(source)) as result:
        assert ask(f"{DEAD}/v1", None) == answer
    assert [s.recorded for s in result.steps] == [0, 1]
    assert result.identical, result.first_divergence


def test_an_answer_too_large_to_travel_inline_replays_from_our_reading_not_the_owners(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An owner that writes its own output messages when its call span ends, lossily (the
    # Agents SDK bridge writes a Responses function call as the text of its repr): the
    # answer, too large to travel inline, replays from what the capture read of it.
    monkeypatch.setenv("OTEL_REPLAY_INLINE_LIMIT", "300")
    tools = [
        {
            "type": "function",
            "name": "lookup_order",
            "description": "Look up an order.",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        }
    ]

    def ask(base_url: str, kit: CaptureKit | None) -> list[Any]:
        with openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0) as client:
            if kit is None:
                reply = client.responses.create(
                    model="standin-1", input="Where is my order A-1234?", tools=tools
                )
                return [(item.type, getattr(item, "name", None)) for item in reply.output]
            tracer = kit.tracer_provider.get_tracer("some.framework")
            owner = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai"}
            with tracer.start_as_current_span("chat standin-1", attributes=owner) as span:
                reply = client.responses.create(
                    model="standin-1", input="Where is my order A-1234?", tools=tools
                )
                lossy = [{"type": "text", "content": str(item)} for item in reply.output]
                span.set_attribute(
                    "gen_ai.output.messages",
                    json.dumps([{"role": "assistant", "parts": lossy}]),
                )
            return [(item.type, getattr(item, "name", None)) for item in reply.output]

    with StandIn(event_delay=0.001) as standin, CaptureKit() as kit:
        answer = ask(standin.openai_base_url, kit)
    assert answer == [("function_call", "lookup_order")]
    (step,) = _steps(kit.spans())
    assert "replay.response.body" not in step["attributes"]

    source = _write_otlp(kit, tmp_path / "spans.json")
    (recorded,) = load_run(str(source)).steps
    assert recorded.fidelity == "semantic"
    with otel_replay.replaying(str(source)) as result:
        assert ask(f"{DEAD}/v1", None) == answer
    assert result.identical, result.first_divergence


def test_a_request_too_large_to_travel_inline_matches_our_reading_not_the_owners(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An owner that writes its own input messages when its call span ends, leaving the tool
    # call and its result out (as the Agents SDK bridge does): the request, too large to
    # travel inline, is matched against what the capture read of it, and the same program
    # replays identical.
    monkeypatch.setenv("OTEL_REPLAY_INLINE_LIMIT", "300")
    history: list[Any] = [
        {"role": "user", "content": "Where is my order A-1234? " + "Some context. " * 30},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "lookup_order",
            "arguments": '{"order_id": "A-1234"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "shipped"},
    ]

    def ask(base_url: str, kit: CaptureKit | None) -> str:
        with openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0) as client:
            if kit is None:
                return client.responses.create(model="standin-1", input=history).output_text
            tracer = kit.tracer_provider.get_tracer("some.framework")
            owner = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai"}
            with tracer.start_as_current_span("chat standin-1", attributes=owner) as span:
                answer = client.responses.create(model="standin-1", input=history).output_text
                lossy = [
                    {"role": "user", "parts": [{"type": "text", "content": history[0]["content"]}]}
                ]
                span.set_attribute("gen_ai.input.messages", json.dumps(lossy))
            return answer

    with StandIn(event_delay=0.001) as standin, CaptureKit() as kit:
        answer = ask(standin.openai_base_url, kit)
    (step,) = _steps(kit.spans())
    assert "replay.request.body" not in step["attributes"]

    source = _write_otlp(kit, tmp_path / "spans.json")
    with otel_replay.replaying(str(source)) as result:
        assert ask(f"{DEAD}/v1", None) == answer
    assert result.identical, result.first_divergence
