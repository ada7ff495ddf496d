"""LangGraph's ``ToolNode`` running the tool calls of one model turn at once (sync tools in its
thread pool, async ones gathered), and two graph runs at once whose tools are asked the same
thing: recorded under ``opentelemetry-instrument``, replayed through the CLI with the stand-in
gone, again and again. The calls reach the replay in an order of their own each time (a
tracing callback takes a random moment before each); every call must still get its own
recorded result."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.frameworks._support import (
    Recording,
    assert_a_changed_system_prompt_diverges_at_the_first_call,
    assert_tool_kit,
    record,
    replay_identically,
    run_ids,
    tool_spans,
)

REPLAYS = 3


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    return record(
        tmp_path_factory.mktemp("langgraph-parallel"),
        "_langgraph_parallel_agent.py",
        "r_langgraph_parallel",
        OTEL_REPLAY_WRITE_TOOLS="refund_*",
    )


def results_by_call(recording: Recording, run_id: str) -> dict[str, tuple[str, str, str]]:
    """Each tool call of a run by the model's call id: (tool, arguments, result)."""
    return {
        attrs["gen_ai.tool.call.id"]: (
            attrs["gen_ai.tool.name"],
            attrs["gen_ai.tool.call.arguments"],
            attrs["gen_ai.tool.call.result"],
        )
        for attrs in tool_spans(recording, run_id)
    }


def test_one_turn_asks_for_several_tools_and_each_call_is_a_step(recorded: Recording) -> None:
    printed = recorded.printed.splitlines()
    assert "  [asked] lookup_order, lookup_order, get_weather, get_weather" in printed
    assert "  [asked] refund_order, get_weather" in printed
    tools = tool_spans(recorded)
    assert Counter(t["gen_ai.tool.name"] for t in tools) == {
        "lookup_order": 4,  # two in the first turn, one per customer
        "get_weather": 5,  # Paris and Tokyo, Paris again, Paris for each customer
        "refund_order": 1,
    }
    assert len({t["gen_ai.tool.call.id"] for t in tools}) == len(tools)
    assert_tool_kit(tools)
    # The two customers' weather calls: the same tool, the same arguments, two model calls.
    at_once = [t for t in tools if t["gen_ai.tool.name"] == "get_weather"][-2:]
    assert {t["gen_ai.tool.call.arguments"] for t in at_once} == {'{"city":"Paris"}'}


def test_every_replay_serves_each_call_its_own_result(recorded: Recording) -> None:
    """Replayed several times, each identical, each with the recorded output; in each, the
    tool step answering a model call id got the result recorded for that call id (the same
    arguments asked twice at once included), and the refund was served, not written."""
    expected = results_by_call(recorded, recorded.run_id)
    for _ in range(REPLAYS):
        before = set(run_ids(recorded))
        replay_identically(recorded)
        (replayed,) = set(run_ids(recorded)) - before
        assert results_by_call(recorded, replayed) == expected


def test_a_changed_system_prompt_diverges_at_the_first_call(recorded: Recording) -> None:
    assert_a_changed_system_prompt_diverges_at_the_first_call(recorded)


def test_the_tool_messages_answer_their_own_calls(recorded: Recording) -> None:
    """What the agent printed pairs each call id with the result recorded for it."""
    expected = results_by_call(recorded, recorded.run_id)
    lines = recorded.printed.splitlines()
    shown = [line.strip().split(" ", 3) for line in lines if line.startswith("  [tool] ")]
    assert len(shown) == len(expected)
    for _, call_id, name, rest in shown:
        content = rest.removeprefix("-> ")
        assert expected[call_id][0] == name
        assert json.loads(expected[call_id][2]) == json.loads(content)
