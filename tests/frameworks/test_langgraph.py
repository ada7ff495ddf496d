"""LangGraph with langchain-openai's ChatOpenAI, its tools plain LangChain ``@tool`` functions:
recorded under ``opentelemetry-instrument`` with no otel-replay code in the agent, its database
changed, replayed through the CLI with the stand-in gone."""

from __future__ import annotations

import json

import pytest

from tests.frameworks._support import (
    Recording,
    assert_tool_kit,
    record,
    refunds,
    replay,
    spans,
    tool_spans,
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    return record(
        tmp_path_factory.mktemp("langgraph"),
        "_langgraph_agent.py",
        "r_langgraph",
        OTEL_REPLAY_WRITE_TOOLS="refund_*",
    )


def test_the_agent_replays_identically_and_its_write_does_not_repeat(
    recorded: Recording,
) -> None:
    assert '"status": "shipped"' in recorded.printed
    assert '[tool] refund_order -> {"refund_id": "R-' in recorded.printed
    done = replay(recorded)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(recorded.printed)  # the order still "shipped", same refund id
    assert "replay of run r_langgraph" in done.stdout and "): identical" in done.stdout
    assert "network attempts: 0" in done.stdout
    assert refunds(recorded.database) == 0


def test_each_tool_call_is_one_tool_step_with_its_effect(recorded: Recording) -> None:
    tools = tool_spans(recorded)
    assert [(t["gen_ai.tool.name"], t["replay.tool.effect"]) for t in tools] == [
        ("lookup_order", "read"),
        ("refund_order", "write"),  # OTEL_REPLAY_WRITE_TOOLS=refund_*
    ]
    lookup, refund = tools
    assert json.loads(lookup["gen_ai.tool.call.arguments"]) == {"order_id": "A-1234"}
    assert json.loads(lookup["gen_ai.tool.call.result"])["status"] == "shipped"
    assert json.loads(refund["gen_ai.tool.call.arguments"]) == {
        "order_id": "A-1234",
        "reason": "item arrived damaged",
    }
    assert json.loads(refund["gen_ai.tool.call.result"])["refund_id"].startswith("R-")
    assert_tool_kit(tools)
    names = [span["name"] for span in spans(recorded)]
    assert names.count("execute_tool lookup_order") == names.count("execute_tool refund_order") == 1


def test_a_named_write_tool_never_runs_even_when_read_tools_run_live(
    recorded: Recording,
) -> None:
    done = replay(recorded, "--live-tools", "read", OTEL_REPLAY_WRITE_TOOLS="refund_*")
    assert done.returncode == 1, done.stdout + done.stderr  # today's read changed the run
    assert '"status": "delivered"' in done.stdout  # lookup_order read today's database
    assert "network attempts: 0" in done.stdout
    assert refunds(recorded.database) == 0  # refund_order was served, not run
