"""Tool results otel-replay cannot write down as JSON (a ``__repr__`` that raises, a structure
deeper than any Python's json writes) are recorded as a text, and recording never raises into the
application over them: the tool returns to the agent what it returned without us.

Before, a smolagents or Haystack tool returning such a value raised (``ValueError`` from the
value's ``__repr__``, ``RecursionError``, orjson's ``TypeError: Recursion limit reached`` at
254 levels) where the same call without otel-replay returned it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from haystack.tools import Tool as HaystackTool
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from smolagents import tool

from tests.export._support import Pipeline


class Unprintable:
    def __repr__(self) -> str:
        raise ValueError("no text for this one")


def nested(depth: int) -> list[Any]:
    outer: list[Any] = []
    inner = outer
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    return outer


def depth_of(value: Any) -> int:
    depth = 0
    while isinstance(value, list) and value:
        value, depth = value[0], depth + 1
    return depth


@tool
def unprintable(order_id: str) -> object:
    """A result that has no text.

    Args:
        order_id: the order
    """
    return Unprintable()


@tool
def tree(depth: int) -> list:  # type: ignore[type-arg]
    """A nested result.

    Args:
        depth: how deep
    """
    return nested(depth)


PARAMETERS = {"type": "object", "properties": {"order_id": {"type": "string"}}}
haystack_unprintable = HaystackTool(
    name="haystack_unprintable",
    description="A result that has no text.",
    parameters=PARAMETERS,
    function=lambda order_id: Unprintable(),
)


def _recorded(path: Path) -> tuple[list[Any], list[dict[str, Any]]]:
    memory = InMemorySpanExporter()
    with Pipeline(path) as pipeline:
        pipeline.provider.add_span_processor(SimpleSpanProcessor(memory))
        seen = [
            unprintable(order_id="A-1"),
            tree(depth=254),
            tree(depth=100_000),
            haystack_unprintable.invoke(order_id="A-1"),
        ]
    tools = [
        dict(span.attributes or {})
        for span in memory.get_finished_spans()
        if span.name.startswith("execute_tool")
    ]
    return seen, sorted(tools, key=lambda attrs: attrs["replay.step.index"])


def test_a_result_with_no_json_form_is_returned_as_it_was_and_recorded_as_text(
    tmp_path: Path,
) -> None:
    seen, tools = _recorded(tmp_path / "store")
    # What the tools returned reached the caller untouched.
    assert isinstance(seen[0], Unprintable)
    assert depth_of(seen[1]) == 254
    assert depth_of(seen[2]) == 100_000
    assert isinstance(seen[3], Unprintable)
    # Each call is a step that returned (no error), its result a text standing for it.
    assert [(t["gen_ai.tool.name"], t.get("error.type")) for t in tools] == [
        ("unprintable", None),
        ("tree", None),
        ("tree", None),
        ("haystack_unprintable", None),
    ]
    results = [json.loads(t["gen_ai.tool.call.result"]) for t in tools]
    unprintable_type = f"<{__name__}.Unprintable object>"
    assert results[0] == unprintable_type
    assert depth_of(results[1]) == 254  # deep, but written as the JSON it is
    assert results[2] == "<builtins.list object>"
    assert results[3] == unprintable_type
