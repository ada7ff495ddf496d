"""Pydantic AI tools recorded and replayed in-process, the model a scripted ``FunctionModel``
(no HTTP): a tool's ``ModelRetry``, a pydantic model result, an ``@otel_replay.tool``
function made a Pydantic AI tool, and the hook taken off again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pydantic
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets.function import FunctionToolset

import otel_replay
from tests.export._support import Pipeline

RUNS: list[str] = []


class Stock(pydantic.BaseModel):
    sku: str
    in_stock: int


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Asks for every tool at once, then again for the one that asked to be retried, then
    answers with what the tools returned."""
    if len(messages) == 1:
        return ModelResponse(
            parts=[
                ToolCallPart("read_stock", {"sku": "KB-101"}, tool_call_id="call_read"),
                ToolCallPart("count_busy", {"sku": "KB-101"}, tool_call_id="call_busy"),
                ToolCallPart("ship", {"order_id": "A-1"}, tool_call_id="call_ship"),
            ]
        )
    parts = [part for message in messages for part in message.parts]
    asked = [p for p in parts if isinstance(p, ToolCallPart) and p.tool_name == "count_busy"]
    if len(asked) == 1:  # it answered with a retry: ask again
        return ModelResponse(parts=[ToolCallPart("count_busy", {"sku": "KB-101"}, "call_again")])
    seen = [
        f"{part.tool_name}: {part.model_response_str()}"
        for part in parts
        if isinstance(part, ToolReturnPart | RetryPromptPart) and part.tool_name
    ]
    return ModelResponse(parts=[TextPart(" | ".join(seen))])


@otel_replay.tool(effect="write")
def ship(order_id: str) -> dict[str, str]:
    """Ship an order (declared a write tool by its author)."""
    RUNS.append("ship")
    return {"order_id": order_id, "status": "shipped"}


def make_agent() -> tuple[Agent[None, str], list[Stock]]:
    """A fresh agent (its tools count their runs in ``RUNS``) and the Stock objects
    ``read_stock`` gave it."""
    agent = Agent(FunctionModel(scripted))
    given: list[Stock] = []

    @agent.tool_plain
    def read_stock(sku: str) -> Stock:
        """How many of an item are in stock."""
        RUNS.append("read_stock")
        return Stock(sku=sku, in_stock=3)

    @agent.tool_plain
    async def count_busy(sku: str) -> int:
        """Count an item (busy the first time: the model is asked to call again)."""
        RUNS.append("count_busy")
        if RUNS.count("count_busy") == 1:
            raise ModelRetry("the warehouse is busy, try again")
        return 7

    agent.tool_plain(ship)

    def keep(result: Any) -> None:
        for message in result.all_messages():
            given.extend(
                part.content
                for part in message.parts
                if isinstance(part, ToolReturnPart) and part.tool_name == "read_stock"
            )

    agent.keep = keep  # type: ignore[attr-defined]
    return agent, given


def run_agent() -> tuple[str, list[Stock]]:
    agent, given = make_agent()
    # run_sync makes an event loop current and never closes it: give it one that is closed
    # after, or the loop and its self-pipe are reported unclosed in whatever test runs next.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        result = agent.run_sync("How many KB-101 are there? Ship A-1.")
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    agent.keep(result)  # type: ignore[attr-defined]
    return result.output, given


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Any, list[ReadableSpan]]:
    RUNS.clear()
    memory = InMemorySpanExporter()
    store = tmp_path_factory.mktemp("pydantic-ai-in-process") / "store"
    with Pipeline(store) as pipeline:
        pipeline.provider.add_span_processor(SimpleSpanProcessor(memory))
        seen = run_agent()
        run_id = pipeline.run.run_id
    return store, run_id, seen, list(memory.get_finished_spans())


def _tools(spans: list[ReadableSpan]) -> list[dict[str, Any]]:
    found = [dict(s.attributes or {}) for s in spans if s.name.startswith("execute_tool")]
    return sorted(found, key=lambda attrs: attrs["replay.step.index"])


def test_each_call_is_one_step_a_retry_included(
    recorded: tuple[Path, str, Any, list[ReadableSpan]],
) -> None:
    _, _, (output, given), spans = recorded
    assert sorted(RUNS) == ["count_busy", "count_busy", "read_stock", "ship"]
    assert output == (
        'read_stock: {"sku":"KB-101","in_stock":3}'
        ' | count_busy: {"error":"the warehouse is busy, try again"}'
        ' | ship: {"order_id":"A-1","status":"shipped"} | count_busy: 7'
    )
    assert given == [Stock(sku="KB-101", in_stock=3)]
    tools = _tools(spans)
    steps = {
        (t["gen_ai.tool.name"], t.get("gen_ai.tool.call.id"), t.get("error.type")) for t in tools
    }
    assert len(tools) == 4 and steps == {
        ("read_stock", "call_read", None),
        ("count_busy", "call_busy", "pydantic_ai.exceptions.ModelRetry"),
        # The @otel_replay.tool's own step, not a second one (no model response went over
        # HTTP here, so there is no tool call it could claim an id from).
        ("ship", None, None),
        ("count_busy", "call_again", None),
    }
    ship_step = next(t for t in tools if t["gen_ai.tool.name"] == "ship")
    assert ship_step["replay.tool.effect"] == "write"


def test_the_tools_replay_without_running(
    recorded: tuple[Path, str, Any, list[ReadableSpan]],
) -> None:
    store, run_id, seen, _ = recorded
    RUNS.clear()
    with otel_replay.replaying(run_id, store=str(store)) as result:
        again = run_agent()
    assert RUNS == []  # no body ran, the write included; the ModelRetry was raised again
    assert again == seen  # the Stock came back a Stock
    assert result.identical, result.first_divergence


def test_the_hook_comes_off_when_nobody_holds_it() -> None:
    assert not hasattr(vars(FunctionToolset)["call_tool"], "__wrapped__")
    RUNS.clear()
    run_agent()  # runs as if we were not there
    assert sorted(RUNS) == ["count_busy", "count_busy", "read_stock", "ship"]
