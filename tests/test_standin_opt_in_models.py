"""The stand-in's opt-in models for framework paths its default model cannot take: a handoff
(``standin-triage``) and structured output through an output tool (``standin-structured``).
Any other model answers as before."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from examples.standin import StandIn


def function(name: str, **properties: str) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {key: {"type": kind} for key, kind in properties.items()},
        "required": [*properties],
    }
    return {"type": "function", "function": {"name": name, "parameters": schema}}


LOOKUP = function("lookup_order", order_id="string")
HANDOFF = function("transfer_to_refunds")
OUTPUT = function("final_result", order_id="string", status="string", total="number", note="string")
ASK = [{"role": "user", "content": "Where is my order A-1234?"}]


@pytest.fixture
def oai(standin: StandIn) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=standin.openai_base_url, api_key="sk-standin-not-a-secret", max_retries=0
    ) as client:
        yield client


def calls(oai: openai.OpenAI, model: str, messages: Any, tools: Any) -> list[tuple[str, Any]]:
    message = oai.chat.completions.create(model=model, messages=messages, tools=tools)
    message = message.choices[0].message
    return [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or ()]


def test_the_triage_model_hands_off_where_the_default_model_calls_the_tool(
    oai: openai.OpenAI,
) -> None:
    assert calls(oai, "standin-triage", ASK, [LOOKUP, HANDOFF]) == [("transfer_to_refunds", {})]
    assert calls(oai, "gpt-4o-mini", ASK, [LOOKUP, HANDOFF]) == [
        ("lookup_order", {"order_id": "A-1234"})
    ]
    assert calls(oai, "standin-triage", ASK, [LOOKUP]) == [
        ("lookup_order", {"order_id": "A-1234"})  # no handoff offered: as the default model
    ]


def test_the_structured_model_answers_through_the_output_tool(oai: openai.OpenAI) -> None:
    first = (
        oai.chat.completions.create(
            model="standin-structured", messages=ASK, tools=[LOOKUP, OUTPUT]
        )
        .choices[0]
        .message
    )
    (call,) = first.tool_calls or ()
    assert call.function.name == "lookup_order"  # the tools first, as the default model
    result = {"order_id": "A-1234", "status": "shipped", "total": 129.0}
    history = [
        *ASK,
        first.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)},
    ]
    ((name, arguments),) = calls(oai, "standin-structured", history, [LOOKUP, OUTPUT])
    assert name == "final_result"
    # Filled from the tool's result; the rest from the text answer the model would have given.
    assert {k: arguments[k] for k in result} == result
    assert "A-1234" in arguments["note"] and "shipped" in arguments["note"]
    assert calls(oai, "gpt-4o-mini", history, [LOOKUP, OUTPUT]) == []  # a text answer
