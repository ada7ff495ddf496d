"""``interrupt()`` in a LangGraph tool with a typed value (a dataclass, a pydantic model): on
replay the caller gets that type back, as when recorded, and reads its attributes. Recorded
under ``opentelemetry-instrument``, replayed through the CLI with the stand-in gone. The value
is recorded as JSON with its shape (envelope/_jsonable), whose classes replay finds only among
modules already loaded."""

from __future__ import annotations

import json

import pytest

from tests.frameworks._support import (
    Recording,
    assert_a_changed_system_prompt_diverges_at_the_first_call,
    record,
    replay_identically,
    run_ids,
    tool_spans,
)


@pytest.fixture(scope="module")
def paused(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    return record(
        tmp_path_factory.mktemp("langgraph-typed-interrupt"),
        "_langgraph_typed_interrupt_agent.py",
        "r_langgraph_typed_interrupt",
        OTEL_REPLAY_WRITE_TOOLS="refund_*",
    )


def test_typed_interrupt_values_come_back_as_their_types(paused: Recording) -> None:
    asked = [line for line in paused.printed.splitlines() if line.startswith("  [paused] ")]
    assert asked == [
        "  [paused] Verify(order_id='A-1234', question='Is the caller the customer?') -> True",
        "  [paused] RefundAsk(order_id='A-1234', amount=129.0, currency='EUR')"
        " -> {'confirmed': True, 'note': '129.0 EUR approved'}",
    ]
    assert "  [tool] lookup_order -> order_id='A-1234' status='shipped' total=129.0" in (
        paused.printed.splitlines()
    )  # an unannotated tool's pydantic result, as ToolNode writes it for the model
    before = set(run_ids(paused))
    # The caller read ask.amount and ask.currency on replay too (a dict has no .amount).
    replay_identically(paused)
    (replayed,) = set(run_ids(paused)) - before
    for run_id in (paused.run_id, replayed):
        names = [t["gen_ai.tool.name"] for t in tool_spans(paused, run_id)]
        assert names == ["lookup_order", "lookup_order", "refund_order", "refund_order"]
        verify, _, ask, _ = tool_spans(paused, run_id)
        (interrupt,) = json.loads(ask["gen_ai.tool.call.result"])["otel_replay.interrupt"]
        assert interrupt["value"] == {"order_id": "A-1234", "amount": 129.0, "currency": "EUR"}
        (interrupt,) = json.loads(verify["gen_ai.tool.call.result"])["otel_replay.interrupt"]
        assert interrupt["value"]["question"] == "Is the caller the customer?"


def test_a_changed_system_prompt_diverges_at_the_first_call(paused: Recording) -> None:
    # Step 0 is the checkpointer's read of the thread, the model's call comes next.
    assert_a_changed_system_prompt_diverges_at_the_first_call(paused, first_call=1)


def test_the_types_travel_in_the_recorded_shape(paused: Recording) -> None:
    verify, _, ask, _ = tool_spans(paused)
    assert "__main__:Verify" in verify["replay.response.content_type"]
    assert "__main__:RefundAsk" in ask["replay.response.content_type"]
