"""smolagents over Chat Completions, its tools a plain ``@tool`` function and a ``Tool``
subclass run by a ``ToolCallingAgent`` (and one called by the agent's own code): recorded
under ``opentelemetry-instrument`` with no otel-replay code in the agent, its database
changed, replayed through the CLI with the stand-in gone.

Before the hook a replay ran every smolagents tool live: it read today's database (the
replayed run diverged at the first call after a lookup) and issued the refund again.
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
        tmp_path_factory.mktemp("smolagents"),
        "_smolagents_agent.py",
        "r_smolagents",
        OTEL_REPLAY_WRITE_TOOLS="refund_*",
        OTEL_REPLAY_READ_TOOLS="lookup_order",
    )


def test_the_agent_replays_identically_and_its_write_does_not_repeat(
    recorded: Recording,
) -> None:
    printed = recorded.printed
    assert "[observed] {'order_id': 'A-1234', 'status': 'shipped'" in printed
    assert '[observed] {"refund_id": "R-' in printed
    assert "[error] AgentToolExecutionError: Error executing tool 'lookup_order'" in printed
    assert "LookupError: no order Z-9999" in printed
    assert 'direct> dict {"order_id": "A-1234", "status": "refunded"' in printed
    # The order still "shipped" then "refunded" (the database now says "delivered"), the
    # same refund id, the same error worded by smolagents, a dict given back as a dict.
    done = replay_identically(recorded)
    # The refund's uuid4() is a step within the write tool, which is served, not run.
    assert "10 requests, 10 served from 11 recorded steps" in done.stdout


def test_each_tool_call_is_one_tool_step_with_its_effect(recorded: Recording) -> None:
    tools = tool_spans(recorded)
    assert [
        (t["gen_ai.tool.name"], t["replay.tool.effect"], t.get("error.type")) for t in tools
    ] == [
        ("lookup_order", "read", None),
        ("refund_order", "write", None),  # OTEL_REPLAY_WRITE_TOOLS=refund_*
        ("lookup_order", "read", "LookupError"),
        ("lookup_order", "read", None),  # the agent's own call
    ]
    assert_tool_kit(tools[:3])  # each answers the model's own call
    assert "gen_ai.tool.call.id" not in tools[3]  # no model asked for it
    lookup, refund, missing, direct = tools
    assert json.loads(lookup["gen_ai.tool.call.arguments"]) == {"order_id": "A-1234"}
    assert json.loads(refund["gen_ai.tool.call.arguments"]) == {
        "order_id": "A-1234",
        "reason": "item arrived damaged",
    }
    assert json.loads(missing["gen_ai.tool.call.arguments"]) == {"order_id": "Z-9999"}
    assert json.loads(direct["gen_ai.tool.call.arguments"]) == {"order_id": "A-1234"}
    assert json.loads(lookup["gen_ai.tool.call.result"])["status"] == "shipped"
    # The Tool subclass returned a text: recorded as that text.
    assert json.loads(json.loads(refund["gen_ai.tool.call.result"]))["refund_id"].startswith("R-")


def test_a_changed_system_prompt_diverges_at_the_first_call(recorded: Recording) -> None:
    assert_a_changed_system_prompt_diverges_at_the_first_call(recorded)
