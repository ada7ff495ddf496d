"""Haystack over Chat Completions, its tools plain ``@tool`` functions (one sync, one async)
run by an ``Agent``, sync and streamed, and async: recorded under ``opentelemetry-instrument``
with no otel-replay code in the agent, its database changed, replayed through the CLI with
the stand-in gone.

Before the hook a replay ran every Haystack tool live: it read today's database (the
replayed run diverged at the call after the lookup) and issued the refund again.
"""

from __future__ import annotations

import json

import pytest

from tests.frameworks._support import (
    Recording,
    assert_a_changed_system_prompt_diverges_at_the_first_call,
    assert_tool_kit,
    record,
    replay_identically,
    tool_spans,
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    return record(
        tmp_path_factory.mktemp("haystack"),
        "_haystack_agent.py",
        "r_haystack",
        OTEL_REPLAY_WRITE_TOOLS="refund_*",
        OTEL_REPLAY_READ_TOOLS="lookup_order",
    )


def test_the_agent_replays_identically_and_its_write_does_not_repeat(
    recorded: Recording,
) -> None:
    printed = recorded.printed
    assert '[tool] lookup_order -> {"order_id": "A-1234", "status": "shipped"' in printed
    assert "(streamed in " in printed and "(streamed in 0 text chunks)" not in printed
    assert (
        "[tool] lookup_order (error) -> Failed to invoke Tool `lookup_order` with parameters "
        "{'order_id': 'Z-9999'}. Error: no order Z-9999"
    ) in printed
    assert '[tool] refund_order -> {"refund_id": "R-' in printed
    # "shipped" though the database now says "delivered", the same error text, the same
    # refund id, the same number of streamed chunks. The refund's uuid4() is a step within
    # the write tool, which is served, not run: not requested again.
    done = replay_identically(recorded)
    assert "12 requests, 12 served from 13 recorded steps" in done.stdout


def test_each_tool_call_is_one_tool_step_with_its_effect(recorded: Recording) -> None:
    tools = tool_spans(recorded)
    assert [
        (t["gen_ai.tool.name"], t["replay.tool.effect"], t.get("error.type")) for t in tools
    ] == [
        ("lookup_order", "read", None),  # streamed
        ("lookup_order", "read", "haystack.tools.errors.ToolInvocationError"),
        ("refund_order", "write", None),  # async, OTEL_REPLAY_WRITE_TOOLS=refund_*
        ("lookup_order", "read", None),  # sync, run by run_async in a worker thread
    ]
    assert_tool_kit(tools)
    lookup, missing, refund, threaded = tools
    assert json.loads(lookup["gen_ai.tool.call.arguments"]) == {"order_id": "A-1234"}
    assert json.loads(missing["gen_ai.tool.call.arguments"]) == {"order_id": "Z-9999"}
    assert json.loads(refund["gen_ai.tool.call.arguments"]) == {
        "order_id": "A-1234",
        "reason": "item arrived damaged",
    }
    assert json.loads(threaded["gen_ai.tool.call.arguments"]) == {"order_id": "A-1234"}
    assert json.loads(lookup["gen_ai.tool.call.result"])["status"] == "shipped"
    # The model's call ids, each claimed once.
    assert len({t["gen_ai.tool.call.id"] for t in tools}) == 4


def test_a_changed_system_prompt_diverges_at_the_first_call(recorded: Recording) -> None:
    assert_a_changed_system_prompt_diverges_at_the_first_call(recorded)
