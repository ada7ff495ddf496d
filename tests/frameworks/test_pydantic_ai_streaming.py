"""Pydantic AI run the ways its users reach for past a text ``run_sync``: ``output_type`` a
pydantic model (``run_sync``, and ``run_stream`` with ``stream_output()``), ``run_stream`` of
text, ``run_stream_events()``, tools taking ``RunContext`` with ``deps``, and an output
function that writes; recorded under ``opentelemetry-instrument`` against the stand-in's
``standin-structured`` model, the database changed, replayed through the CLI with the stand-in
gone.

An output function is called by Pydantic AI with the model's arguments, and its body is the
run's output: it is a step, so a replay serves what it returned and does not run it again.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing

import pytest

from tests.frameworks._support import (
    Recording,
    assert_a_changed_system_prompt_diverges_at_the_first_call,
    record,
    replay_identically,
    spans,
    tool_spans,
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    return record(
        tmp_path_factory.mktemp("pydantic-ai-streaming"),
        "_pydantic_ai_streaming_agent.py",
        "r_pydantic_ai_streaming",
        OTEL_REPLAY_WRITE_TOOLS="refund_order,file_ticket",
        OTEL_REPLAY_READ_TOOLS="lookup_order",
    )


def tickets(recording: Recording) -> list[str]:
    with closing(sqlite3.connect(recording.database)) as db, db:
        return [row[0] for row in db.execute("SELECT ticket_id FROM tickets")]


def test_structured_and_streamed_runs_replay_identically(recorded: Recording) -> None:
    printed = recorded.printed
    assert "agent (OrderStatus)> OrderStatus(order_id='A-1234', status='shipped'" in printed
    assert "agent (streamed OrderStatus)> OrderStatus(order_id='A-1234', status='issued'" in printed
    assert "  [partial outputs] True last=OrderStatus(" in printed
    assert '"clerk":"ada"' in printed  # the tool read ctx.deps
    assert "agent (streamed text)> " in printed and "agent (events)> " in printed
    assert "function_tool_call function_tool_result" in printed
    (filed,) = tickets(recorded)
    assert f"agent (Ticket)> Ticket(ticket_id='{filed}', order_id='A-1234'" in printed
    # The order still "shipped", the same refund and ticket ids, each output rebuilt as its class.
    replay_identically(recorded)


def test_an_output_function_is_a_step_and_its_write_does_not_repeat(recorded: Recording) -> None:
    (filed,) = tickets(recorded)
    replay_identically(recorded)  # printed the recorded ticket id ...
    assert tickets(recorded) == [filed]  # ... and filed no other ticket
    *_, ticket = tool_spans(recorded)
    assert ticket["gen_ai.tool.name"] == "file_ticket" and ticket["replay.tool.effect"] == "write"
    arguments = json.loads(ticket["gen_ai.tool.call.arguments"])
    assert arguments["order_id"] == "A-1234" and arguments["status"] == "refunded"
    assert json.loads(ticket["gen_ai.tool.call.result"])["ticket_id"] == filed
    assert (
        ticket["gen_ai.tool.description"]
        == "File a support ticket about an order (the run's output)."
    )
    # It answers the model's call of the output tool.
    (last_call,) = [
        s["attributes"]
        for s in spans(recorded)
        if s["attributes"].get("replay.step.index") == ticket["replay.step.index"] - 1
    ]
    (asked,) = json.loads(last_call["gen_ai.output.messages"])[0]["parts"]
    assert asked["name"] == "final_result" and asked["id"] == ticket["gen_ai.tool.call.id"]


def test_each_tool_call_is_one_step_and_each_model_call_one_complete_step(
    recorded: Recording,
) -> None:
    tools = tool_spans(recorded)
    assert [(t["gen_ai.tool.name"], t["replay.tool.effect"]) for t in tools] == [
        ("lookup_order", "read"),  # run_sync, output_type=OrderStatus
        ("refund_order", "write"),  # run_stream, output_type=OrderStatus
        ("lookup_order", "read"),  # run_stream of text
        ("lookup_order", "read"),  # run_stream_events
        ("lookup_order", "read"),  # run_sync, output_type=file_ticket
        ("file_ticket", "write"),
    ]
    assert json.loads(tools[1]["gen_ai.tool.call.arguments"]) == {
        "order_id": "A-1234",
        "reason": "item arrived damaged",
    }
    stored = spans(recorded)
    calls = [s["attributes"] for s in stored if s["attributes"].get("replay.step.kind") == "llm"]
    assert len(calls) == 10  # two per run: the tool call, then the answer or the output tool
    assert all(a["replay.response.complete"] is True and "error.type" not in a for a in calls)
    streamed = [a for a in calls if json.loads(a["replay.request.body"]).get("stream") is True]
    assert len(streamed) == 6  # the three streamed runs
    assert sum(s["name"].startswith("chat ") for s in stored) == len(calls)


def test_a_changed_system_prompt_diverges_at_the_first_call(recorded: Recording) -> None:
    assert_a_changed_system_prompt_diverges_at_the_first_call(recorded)
