"""Spans read back from the store are the spans the exporter was handed, attribute for
attribute, whether the store kept a content attribute as given or rebuilt it from the step's
bodies (``store/_derived.py``).

Real runs: the openai and anthropic SDKs against the stand-in provider, through the
instrumentor, the SDK's batch processor and the ``replay`` exporter; an in-memory exporter
beside it keeps what the exporter was handed.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_replay
from examples.standin import StandIn
from examples.support_agent import CONVERSATION, SupportAgent
from otel_replay.capture.instrumentor import ReplayInstrumentor
from otel_replay.export._encode import span_to_dict
from otel_replay.runs._handoff import handoff
from otel_replay.step import Step
from otel_replay.store import Store
from otel_replay.store._derived import Sources, derivable, rebuild
from otel_replay.store._format import RUNS_DIR
from otel_replay.store._records import decode_records
from otel_replay.store._write import checked, step_bodies
from tests.export._support import Pipeline

KEY = "sk-test-fidelity-not-a-secret"
EDITED = '[{"role":"user","parts":[{"type":"text","content":"edited after capture"}]}]'
CONTENT = (
    "replay.prompt.hash",
    "replay.tool.schema.version",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
    "replay.request.body",
    "replay.response.body",
)


class EditFirstCall(SpanProcessor):
    """Changes the ``gen_ai.input.messages`` of the first model call's span as it starts:
    a span whose content its step's bodies do not give."""

    def __init__(self) -> None:
        self.edited: str | None = None

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self.edited is None and "gen_ai.input.messages" in (span.attributes or {}):
            span.set_attribute("gen_ai.input.messages", EDITED)
            self.edited = f"{span.context.span_id:016x}"


def _record(standin: StandIn, root: Path) -> tuple[list[ReadableSpan], str]:
    handed = InMemorySpanExporter()
    edit = EditFirstCall()
    with Pipeline(root, others=[handed]) as pipe:
        pipe.provider.add_span_processor(edit)
        with (
            otel_replay.run(name="support", run_id="fidelity-support"),
            openai.OpenAI(base_url=standin.openai_base_url, api_key=KEY) as client,
            httpx.Client(base_url=standin.tools_url) as tools,
        ):
            agent = SupportAgent(client, tools, "gpt-4o-mini")
            for number, question in enumerate(CONVERSATION, start=1):
                agent.ask(question, stream=number == len(CONVERSATION))
            # Another instrumentation's span, its content not derivable from any step.
            with pipe.tracer.start_as_current_span("chat foreign") as foreign:
                foreign.set_attribute("replay.run.id", "fidelity-support")
                foreign.set_attribute("gen_ai.operation.name", "chat")
                foreign.set_attribute("gen_ai.input.messages", '[{"role":"user"}]' + " " * 2000)
                foreign.set_attribute("gen_ai.output.messages", "[]")
        with (
            otel_replay.run(name="claude", run_id="fidelity-claude"),
            anthropic.Anthropic(base_url=standin.anthropic_base_url, api_key=KEY) as claude,
        ):
            claude.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=300,
                system="You are a support agent.",
                messages=[{"role": "user", "content": "Where is my order A-1234?"}],
            )
            with claude.messages.stream(
                model="claude-sonnet-4-6",
                max_tokens=300,
                messages=[{"role": "user", "content": "Tell me a story"}],
            ) as stream:
                for _ in stream.text_stream:
                    pass
    assert edit.edited is not None
    return list(handed.get_finished_spans()), edit.edited


def _derived_keys(root: Path) -> dict[str, list[str]]:
    """The attributes each span's record entry left out as derived, by span id."""
    out: dict[str, list[str]] = {}
    for path in (root / RUNS_DIR).rglob("*.rec"):
        for record in decode_records(path.read_bytes()).records:
            for entry in record.spans:
                if entry.derived is not None:
                    out[entry.span["span_id"]] = entry.derived.keys
    return out


def test_every_span_attribute_comes_back_as_the_exporter_was_handed_it(
    standin: StandIn, tmp_path: Path
) -> None:
    root = tmp_path / "store"
    handed, edited = _record(standin, root)
    with Store.open(root, create=False) as store:
        stored = {
            span["span_id"]: span
            for run in ("fidelity-support", "fidelity-claude")
            for span in store.spans(run)
        }
        assert [p for p in store.verify() if p.damage] == []
    given: dict[str, dict[str, Any]] = {}
    for span in handed:
        encoded = json.loads(json.dumps(span_to_dict(span)))
        if encoded["attributes"].get("replay.run.id", "").startswith("fidelity-"):
            given[encoded["span_id"]] = encoded
    assert set(stored) == set(given)
    for span_id, span in given.items():
        back = stored[span_id]
        assert back == span, span["name"]
        # In the same order, too: an export writes them as they come.
        assert list(back["attributes"]) == list(span["attributes"]), span["name"]
    derived = _derived_keys(root)
    model_calls = [s for s in given.values() if "gen_ai.output.messages" in s["attributes"]]
    assert len(model_calls) >= 8
    for span in model_calls:
        keys = derived.get(span["span_id"], [])
        if span["span_id"] == edited:
            # Its edited input messages are kept as given; the rest is still derived.
            assert "gen_ai.input.messages" not in keys and "gen_ai.output.messages" in keys
        elif span["name"] == "chat foreign":
            assert keys == []
        else:
            present = [k for k in CONTENT if k in span["attributes"]]
            assert sorted(keys) == sorted(present), (span["name"], keys, present)


def _captured(standin: StandIn) -> list[tuple[Step, dict[str, Any]]]:
    """(step, span as the exporter encodes it) of real model calls, from the hand-off."""
    provider = TracerProvider()
    instrumentor = ReplayInstrumentor()
    consumer = handoff().attach()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with (
            otel_replay.run(name="read", run_id="fidelity-read"),
            openai.OpenAI(base_url=standin.openai_base_url, api_key=KEY) as client,
            httpx.Client(base_url=standin.tools_url) as tools,
            anthropic.Anthropic(base_url=standin.anthropic_base_url, api_key=KEY) as claude,
        ):
            agent = SupportAgent(client, tools, "gpt-4o-mini")
            for number, question in enumerate(CONVERSATION, start=1):
                agent.ask(question, stream=number == len(CONVERSATION))
            with claude.messages.stream(
                model="claude-sonnet-4-6",
                max_tokens=300,
                system="You are a support agent.",
                messages=[{"role": "user", "content": "Tell me a story"}],
            ) as stream:
                for _ in stream.text_stream:
                    pass
    finally:
        instrumentor.uninstrument()
        items = consumer.drain()
        handoff().detach(consumer)
        provider.shutdown()
    return [
        (item[0], span_to_dict(item[1]))
        for item in items
        if type(item) is tuple and item[0].kind == "llm"
    ]


def test_what_the_capture_made_of_the_bodies_is_trusted_only_as_those_bodies(
    standin: StandIn,
) -> None:
    """The store trusts what the capture made of a step's bodies (the very objects:
    ``Step.reading``): their hashes, and the span values read from them, without reading the
    bodies again. That shortcut must leave out exactly what reading the bodies would, and
    rebuild to the same bytes; other bytes are checked as before."""
    captured = _captured(standin)
    assert len(captured) >= 6
    assert {step.reading.codec for step, _ in captured if step.reading} == {
        "openai.chat_completions",
        "anthropic.messages",
    }
    for step, span in captured:
        # The bodies the capture hashed are the step's: not hashed again, while other bytes
        # under the same hashes are refused.
        assert step.reading is not None and step.reading.hashed(step) == (True, True)
        assert checked(step) is step
        with pytest.raises(ValueError, match="request hash"):
            checked(replace(step, request_body=step.request_body[:-1] + b" "))
        with pytest.raises(ValueError, match="response hash"):
            checked(replace(step, response_body=step.response_body + b" "))
        attrs = span["attributes"]
        bodies = step_bodies([step])
        unread = replace(step, reading=None)
        fast = derivable(attrs, Sources.of([step], bodies))
        slow = derivable(attrs, Sources.of([unread], bodies))
        assert fast is not None and fast == slow, span["name"]
        assert sorted(fast.keys) == sorted(k for k in CONTENT if k in attrs), span["name"]
        kept = {k: v for k, v in attrs.items() if k not in fast.keys}
        assert rebuild(kept, fast, bodies.__getitem__) == {k: attrs[k] for k in fast.keys}
        # The shortcut is taken: with the bodies' bytes unreadable, the values the capture
        # read are still known to be theirs; without the reading nothing is.
        garbage = dict.fromkeys(bodies, b"\xff not json")
        blind = derivable(attrs, Sources.of([step], garbage))
        assert blind is not None and sorted(blind.keys) == sorted(fast.keys)
        assert blind.crc == fast.crc  # of the values, whatever bytes the sources hold
        assert derivable(attrs, Sources.of([unread], garbage)) is None
        # A value equal to the capture's but not its object goes the slow way, same result.
        copied = {k: (v.encode().decode() if isinstance(v, str) else v) for k, v in attrs.items()}
        assert derivable(copied, Sources.of([step], bodies)) == fast
