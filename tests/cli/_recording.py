"""Real recordings for the CLI tests.

The real openai and anthropic SDKs (and httpx for the agent's tools) run
against the stand-in provider under the capture instrumentation; the fixtures taken from the
capture hand-off and the finished spans (as the JSON-ready dicts the exporter stores) go into
a store (``record``); the CLI tests copy it for each test.

Runs recorded (oldest first):

* ``SUPPORT``: the example support agent's whole conversation over OpenAI Chat Completions:
  9 steps, model calls with tool calls, the agent's HTTP tool calls, and two streamed answers.
* ``ERRORS``: a provider error (HTTP 429) the agent gets over, then a stream the provider cuts
  mid-way, which ends the run in error.
* ``CLAUDE``: one Anthropic Messages call that asks for a tool; its prompt holds rich markup.

``bare`` holds ``SUPPORT`` again with its spans stripped of content, as recorded with
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=NO_CONTENT``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan

import otel_replay
from examples.standin import StandIn
from examples.support_agent import CONVERSATION, SupportAgent
from otel_replay.runs._handoff import handoff
from otel_replay.step import RunEnd, Step
from otel_replay.store import Store
from otel_replay.testing import CaptureKit

SUPPORT = "r_20261121T090000_a1b2c3d4"
ERRORS = "r_20261121T090500_e5f60718"
CLAUDE = "r_20261121T091000_9a8b7c6d"
CLAUDE_PROMPT = "Where is my order A-1234? [bold red]urgent[/bold red]"
KEY = "sk-test-cli-not-a-secret"
CONTENT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
)


@dataclass(frozen=True)
class Recorded:
    """Template stores (copy before use) and what went into them, by run id."""

    store: Path
    bare: Path
    fixtures: dict[str, list[Step]]
    spans: dict[str, list[dict[str, Any]]]


def span_dict(span: ReadableSpan) -> dict[str, Any]:
    """A finished span as a JSON-ready dict (the shape of ``examples/otlp_sink.py``)."""
    assert span.context is not None
    attrs = {k: list(v) if isinstance(v, tuple) else v for k, v in (span.attributes or {}).items()}
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": f"{span.context.trace_id:032x}",
        "span_id": f"{span.context.span_id:016x}",
        "parent_span_id": f"{span.parent.span_id:016x}" if span.parent else None,
        "start_ns": span.start_time,
        "end_ns": span.end_time,
        "status": {"code": span.status.status_code.name, "message": span.status.description or ""},
        "attributes": attrs,
        "events": [],
    }


def _support(standin: StandIn) -> None:
    with (
        otel_replay.run(name="support-agent", seed=7, run_id=SUPPORT),
        openai.OpenAI(base_url=standin.openai_base_url, api_key=KEY) as client,
        httpx.Client(base_url=standin.tools_url) as tools,
    ):
        agent = SupportAgent(client, tools, "gpt-4o-mini")
        for number, question in enumerate(CONVERSATION, start=1):
            agent.ask(question, stream=number == len(CONVERSATION))


def _errors(standin: StandIn) -> None:
    with (
        openai.OpenAI(base_url=standin.openai_base_url, api_key=KEY, max_retries=0) as client,
        pytest.raises(openai.APIError),
        otel_replay.run(name="flaky", seed=1, run_id=ERRORS),
    ):
        with pytest.raises(openai.RateLimitError):  # the agent gets over the rate limit...
            client.chat.completions.create(
                model="standin-error", messages=[{"role": "user", "content": "hi"}]
            )
        # ...but not over the cut stream: the run fails with it.
        for _ in client.chat.completions.create(
            model="standin-cut", messages=[{"role": "user", "content": "tell me"}], stream=True
        ):
            pass


def _claude(standin: StandIn) -> None:
    with (
        otel_replay.run(name="claude-agent", seed=3, run_id=CLAUDE),
        anthropic.Anthropic(base_url=standin.anthropic_base_url, api_key=KEY) as client,
    ):
        client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=300,
            system="You are a support agent.",
            messages=[{"role": "user", "content": CLAUDE_PROMPT}],
            tools=[
                {
                    "name": "lookup_order",
                    "description": "Look up an order by id.",
                    "input_schema": {
                        "type": "object",
                        "properties": {"order_id": {"type": "string"}},
                        "required": ["order_id"],
                    },
                }
            ],
        )


def _by_run(items: list[Any], run_of: Callable[[Any], str]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for item in items:
        out.setdefault(run_of(item), []).append(item)
    return out


def _take(consumer: Any) -> tuple[list[Step], list[RunEnd]]:
    """The fixtures the capture handed over, in step order, and the runs' ends."""
    items = consumer.drain()
    return [item[0] for item in items if isinstance(item, tuple)], [
        item for item in items if isinstance(item, RunEnd)
    ]


def record(root: Path) -> Recorded:
    """Record the runs and store them under ``root`` (``store`` and ``bare``)."""
    with StandIn(event_delay=0.001) as standin:
        consumer = handoff().attach()
        try:
            with CaptureKit() as kit:
                _support(standin)
                _errors(standin)
                _claude(standin)
                raw = kit.raw_spans()
                fixtures, ends = _take(consumer)
        finally:
            handoff().detach(consumer)
    spans = [span_dict(s) for s in raw]
    with Store.open(root / "store") as store:
        store.put(fixtures, spans)
        for end in ends:
            store.end_run(end)
    bare_spans = [
        {**s, "attributes": {k: v for k, v in s["attributes"].items() if k not in CONTENT_KEYS}}
        for s in spans
        if s["attributes"]["replay.run.id"] == SUPPORT
    ]
    with Store.open(root / "bare") as store:
        store.put([fx for fx in fixtures if fx.run_id == SUPPORT], bare_spans)
    return Recorded(
        store=root / "store",
        bare=root / "bare",
        fixtures=_by_run(fixtures, lambda fx: fx.run_id),
        spans=_by_run(spans, lambda s: s["attributes"]["replay.run.id"]),
    )
