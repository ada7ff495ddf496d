"""Real runs that fail in every way triage knows, recorded once per session.

The real openai and anthropic SDKs (and httpx for the example agent's HTTP tools) run against
the stand-in, told to fail (``x-standin-fail-*`` headers, its slow and erring models, its
looping and bad-tool-call models), under the capture instrumentation; the real ``replay``
exporter writes them into a store, and their spans are kept beside it, as the Collector's file
exporter would write them, for the runs triage reads from a trace file.

Runs in the store (oldest first):

* ``DRIFT``: a 429 a retry got over; a tool backend's 503; a model call that timed out; a
  connection refused; a 429 past the SDK's retries; then a provider 503 past the retries, which
  ends the run in error.
* ``HALLUCINATED``: the example support agent, whose model calls a tool it was not offered,
  then sends arguments that break the tool's schema, then JSON that does not parse (the agent
  tells the model each time, and the run ends well); then an Anthropic call of a tool not
  offered.
* ``LOOPING``: the example support agent, whose model asks for the same order again after
  every answer, until the agent gives up (error).
* ``LOOPING_TOOL``: the same loop through an ``@otel_replay.tool``, which the agent leaves
  after five calls and answers anyway (ok).
* ``OVERFLOWING``: a tool whose every attempt is refused, past its retry budget (error).
* ``BROKEN_CONTRACT``: a tool that returns what its declared type refuses (error).
* ``HEALTHY``: the support agent's conversation, nothing wrong.

Runs in the trace file (``traces.jsonl``), in the store too but for ``SAMPLED_OUT``, whole
there, but not in the trace:

* ``CUT_BODIES``: a model call recorded with ``OTEL_REPLAY_INLINE_LIMIT=64``: its bodies did not
  travel in the span.
* ``NO_CONTENT``: a model call recorded with content capture off
  (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=NO_CONTENT``): the span carries neither
  bytes nor messages.
* ``SAMPLED_OUT``: a successful run recorded with ``OTEL_REPLAY_SAMPLE_OK=0`` (the store drops
  its fixtures) and small inline bodies.
* ``GAPPY``: the support agent's first question with the tracer provider's sampler dropping the
  spans of the HTTP tool calls.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_ON,
    Decision,
    Sampler,
    SamplingResult,
)
from opentelemetry.trace import Link, SpanKind
from opentelemetry.util.types import Attributes

import otel_replay
from examples.standin import StandIn
from examples.support_agent import CONVERSATION, SupportAgent
from otel_replay import Budget
from tests.export._support import Pipeline
from tests.replay.conftest import _env, collector_json

DRIFT = "r_20261121T080000_d1f70001"
HALLUCINATED = "r_20261121T080100_4a110002"
LOOPING = "r_20261121T080200_100b0003"
LOOPING_TOOL = "r_20261121T080300_100b0004"
OVERFLOWING = "r_20261121T080400_0f100005"
BROKEN_CONTRACT = "r_20261121T080500_c0de0006"
HEALTHY = "r_20261121T080600_0c0c0007"
CUT_BODIES = "r_20261121T080700_b0d10008"
NO_CONTENT = "r_20261121T080800_0c0f0009"
SAMPLED_OUT = "r_20261121T080900_5a4d000a"
GAPPY = "r_20261121T081000_6a40000b"

KEY = "sk-test-triage-not-a-secret"
ASK = [{"role": "user", "content": "Where is my order A-1234?"}]
LOOKUP: Any = {
    "type": "function",
    "function": {
        "name": "lookup_order",
        "description": "Get an order's status.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    },
}


@dataclass(frozen=True)
class Recorded:
    """A template store (copy it before writing) and the trace file beside it."""

    store: Path
    traces: Path


def closed_port() -> int:
    """A local TCP port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _client(standin: StandIn, **options: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=standin.openai_base_url, api_key=KEY, **options)


def _drift(standin: StandIn) -> None:
    failing = {"x-standin-fail-status": "503"}
    with (
        contextlib.suppress(openai.InternalServerError),
        otel_replay.run("drift", seed=1, run_id=DRIFT),
        _client(standin, max_retries=1) as client,
        httpx.Client(
            base_url=standin.tools_url, headers={**failing, "x-standin-fail-first": "1"}
        ) as tools,
    ):
        client.chat.completions.create(model="standin-flaky", messages=ASK)  # type: ignore[arg-type]
        assert tools.get("/orders/A-1234").status_code == 503
        with contextlib.suppress(openai.APITimeoutError):
            client.with_options(timeout=0.2, max_retries=0).chat.completions.create(
                model="standin-slow",
                messages=ASK,  # type: ignore[arg-type]
            )
        with contextlib.suppress(httpx.ConnectError):
            tools.get(f"http://127.0.0.1:{closed_port()}/orders/A-1234")
        with contextlib.suppress(openai.RateLimitError):
            client.chat.completions.create(model="standin-error", messages=ASK)  # type: ignore[arg-type]
        client.with_options(
            default_headers={**failing, "x-standin-fail-first": "9"}
        ).chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Is the service up?"}],
        )


def _support(agent: SupportAgent, models: Sequence[str], questions: Sequence[str]) -> None:
    for model, question in zip(models, questions, strict=True):
        agent.model = model
        agent.ask(question)


@contextlib.contextmanager
def _support_run(standin: StandIn, run_id: str) -> Iterator[SupportAgent]:
    """The example support agent, in run ``run_id``."""
    with (
        otel_replay.run("support-agent", seed=7, run_id=run_id),
        _client(standin) as client,
        httpx.Client(base_url=standin.tools_url) as tools,
    ):
        yield SupportAgent(client, tools, "gpt-4o-mini")


def _hallucinated(standin: StandIn) -> None:
    models = ("standin-unoffered", "standin-bad-arguments", "standin-bad-json")
    questions = (
        "Where is my order A-1234?",
        "And where is order B-5678?",
        "What about order C-9012?",
    )
    with (
        _support_run(standin, HALLUCINATED) as agent,
        anthropic.Anthropic(base_url=standin.anthropic_base_url, api_key=KEY) as claude,
    ):
        _support(agent, models, questions)
        claude.messages.create(
            model="standin-unoffered",
            max_tokens=200,
            messages=ASK,  # type: ignore[arg-type]
            tools=[{"name": "lookup_order", "input_schema": LOOKUP["function"]["parameters"]}],
        )


@otel_replay.tool(name="lookup_order", effect="read")
def look_up(order_id: str) -> dict[str, str]:
    """Get an order's status."""
    return {"order_id": order_id, "status": "shipped"}


def _looping_tool(standin: StandIn) -> None:
    offered: Any = {
        "type": "function",
        "function": look_up.__otel_replay_contract__.definition(),  # type: ignore[attr-defined]
    }
    with (
        otel_replay.run("orders", seed=4, run_id=LOOPING_TOOL),
        _client(standin) as client,
    ):
        messages: list[Any] = [{"role": "user", "content": "Where is my order A-1234?"}]
        for _ in range(5):
            message = (
                client.chat.completions.create(
                    model="standin-loop", messages=messages, tools=[offered]
                )
                .choices[0]
                .message
            )
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls or ():
                result = look_up(**json.loads(call.function.arguments))  # type: ignore[union-attr]
                messages.append(
                    {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
                )


@otel_replay.tool(effect="read", retries=Budget(max_attempts=3, backoff=0.001))
def fetch_forecast(city: str) -> dict[str, str]:
    """The weather service, refusing every call."""
    raise ConnectionError(f"weather service refused the forecast for {city}")


@otel_replay.tool(effect="read")
def count_orders(customer: str) -> int:
    """How many orders ``customer`` placed: a word where its type promises a number."""
    return "several"  # type: ignore[return-value]


def _failing_tools() -> None:
    with (
        contextlib.suppress(otel_replay.RetryOverflowError),
        otel_replay.run("forecaster", seed=5, run_id=OVERFLOWING),
    ):
        fetch_forecast("Oslo")
    with (
        contextlib.suppress(otel_replay.ToolContractError),
        otel_replay.run("orders", seed=6, run_id=BROKEN_CONTRACT),
    ):
        count_orders("C-42")


def _one_call(standin: StandIn, run_id: str) -> None:
    with otel_replay.run("one-call", seed=8, run_id=run_id), _client(standin) as client:
        client.chat.completions.create(model="gpt-4o-mini", messages=ASK)  # type: ignore[arg-type]


class _NoToolSpans(Sampler):
    """Drops the spans of the HTTP tool calls (``GET``), as a sampler keeping only model calls
    would; the rest are recorded."""

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
    ) -> SamplingResult:
        if name.startswith("GET"):
            return SamplingResult(Decision.DROP)
        return ALWAYS_ON.should_sample(parent_context, trace_id, name, kind, attributes, links)

    def get_description(self) -> str:
        return "NoToolSpans"


@contextlib.contextmanager
def _pipeline(
    store: Path, spans: list[ReadableSpan], sampler: Sampler | None = None, **env: str
) -> Iterator[Pipeline]:
    """The recording pipeline into ``store``, its spans kept in ``spans``, with ``env`` set
    while it starts (its settings are read then) and the tracer provider's ``sampler``."""
    memory = InMemorySpanExporter()
    with _env(**env):
        pipeline = Pipeline(store)
        if sampler is not None:
            pipeline.provider.sampler = sampler
        pipeline.provider.add_span_processor(SimpleSpanProcessor(memory))
        with pipeline:
            yield pipeline
    spans.extend(memory.get_finished_spans())


def record(root: Path) -> Recorded:
    """Record the runs into ``root / "store"`` and ``root / "traces.jsonl"``."""
    store = root / "store"
    spans: list[ReadableSpan] = []
    with StandIn(event_delay=0.001) as standin:
        with _pipeline(store, spans):
            _drift(standin)
            _hallucinated(standin)
            with contextlib.suppress(RuntimeError), _support_run(standin, LOOPING) as agent:
                _support(agent, ("standin-loop",), CONVERSATION[:1])
            _looping_tool(standin)
            _failing_tools()
            with _support_run(standin, HEALTHY) as agent:
                _support(agent, ("gpt-4o-mini",) * 3, CONVERSATION)
        with _pipeline(store, spans, OTEL_REPLAY_INLINE_LIMIT="64"):
            _one_call(standin, CUT_BODIES)
        with _pipeline(
            store, spans, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="NO_CONTENT"
        ):
            _one_call(standin, NO_CONTENT)
        with _pipeline(store, spans, OTEL_REPLAY_SAMPLE_OK="0", OTEL_REPLAY_INLINE_LIMIT="64"):
            _one_call(standin, SAMPLED_OUT)
        with _pipeline(store, spans, _NoToolSpans()), _support_run(standin, GAPPY) as agent:
            _support(agent, ("gpt-4o-mini",), CONVERSATION[:1])
    in_file = {CUT_BODIES, NO_CONTENT, SAMPLED_OUT, GAPPY}
    chosen = [s for s in spans if (s.attributes or {}).get("replay.run.id") in in_file]
    traces = root / "traces.jsonl"
    traces.write_text(json.dumps(collector_json(chosen)) + "\n")
    return Recorded(store, traces)


def copy(recorded: Recorded, into: Path) -> Path:
    """A private copy of the recorded store, under ``into``."""
    return Path(shutil.copytree(recorded.store, into / "store"))
