"""The stand-in's opt-in models for paths its default model cannot take: a handoff
(``standin-triage``), structured output through an output tool (``standin-structured``), an
agent loop (``standin-loop``) and bad tool calls (``standin-unoffered``,
``standin-bad-arguments``, ``standin-bad-json``); and the failures its headers ask for. Any other
model answers as before."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
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


def test_the_loop_model_asks_for_the_same_call_after_its_result(oai: openai.OpenAI) -> None:
    first = oai.chat.completions.create(model="standin-loop", messages=ASK, tools=[LOOKUP])
    (call,) = first.choices[0].message.tool_calls or ()
    history = [
        *ASK,
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": '{"status": "shipped"}'},
    ]
    assert calls(oai, "standin-loop", history, [LOOKUP]) == [
        ("lookup_order", {"order_id": "A-1234"})
    ]
    assert calls(oai, "gpt-4o-mini", history, [LOOKUP]) == []  # the default model answers


def test_the_bad_tool_call_models_call_wrong(oai: openai.OpenAI, standin: StandIn) -> None:
    assert calls(oai, "standin-unoffered", ASK, [LOOKUP]) == [
        ("cancel_order", {"order_id": "A-1234"})
    ]
    assert calls(oai, "standin-bad-arguments", ASK, [LOOKUP]) == [
        ("lookup_order", {"order_id": ["A-1234"]})
    ]
    message = oai.chat.completions.create(model="standin-bad-json", messages=ASK, tools=[LOOKUP])
    (call,) = message.choices[0].message.tool_calls or ()
    assert call.function.name == "lookup_order"
    assert call.function.arguments == '{"order_id'  # half of {"order_id":"A-1234"}
    with anthropic.Anthropic(
        base_url=standin.base_url, api_key="sk-standin-not-a-secret", max_retries=0
    ) as claude:
        answer = claude.messages.create(
            model="standin-unoffered",
            max_tokens=100,
            messages=ASK,  # type: ignore[arg-type]
            tools=[{"name": "lookup_order", "input_schema": LOOKUP["function"]["parameters"]}],
        )
    assert [(b.name, b.input) for b in answer.content if b.type == "tool_use"] == [
        ("cancel_order", {"order_id": "A-1234"})
    ]


def test_the_fail_headers_answer_a_status_to_model_and_tool_calls(standin: StandIn) -> None:
    failing = {"x-standin-fail-first": "2", "x-standin-fail-status": "503"}
    with openai.OpenAI(
        base_url=standin.openai_base_url,
        api_key="sk-standin-not-a-secret",
        max_retries=0,
        default_headers=failing,
    ) as client:
        for _ in range(2):
            with pytest.raises(openai.InternalServerError) as raised:
                client.chat.completions.create(model="gpt-4o-mini", messages=ASK)  # type: ignore[arg-type]
            assert raised.value.status_code == 503
            assert raised.value.body["type"] == "server_error"  # type: ignore[index]
        answer = client.chat.completions.create(model="gpt-4o-mini", messages=ASK)  # type: ignore[arg-type]
        assert answer.choices[0].message.content
    with httpx.Client(base_url=standin.tools_url, headers=failing) as tools:
        refused = [tools.get("/orders/A-1234") for _ in range(2)]
        assert [r.status_code for r in refused] == [503, 503]
        assert refused[0].json() == {"error": {"status": 503, "message": "service unavailable"}}
        assert tools.get("/weather", params={"city": "Oslo"}).status_code == 503  # its own count
        assert tools.get("/orders/A-1234").json()["order_id"] == "A-1234"
