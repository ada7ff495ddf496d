"""LangGraph with langchain-openai's ChatOpenAI, its tools plain LangChain ``@tool`` functions:
recorded under ``opentelemetry-instrument`` with no otel-replay code in the agent, its database
changed, replayed through the CLI with the stand-in gone. A human in the loop too: a graph
paused by ``interrupt()`` (in a node and in a tool) and resumed with ``Command(resume=...)``."""

from __future__ import annotations

import json

import pytest

from tests.frameworks._support import (
    Recording,
    assert_tool_kit,
    record,
    refunds,
    replay,
    run_ids,
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
        OTEL_REPLAY_READ_TOOLS="lookup_order",
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
    done = replay(
        recorded,
        "--live-tools",
        "read",
        OTEL_REPLAY_WRITE_TOOLS="refund_*",
        OTEL_REPLAY_READ_TOOLS="lookup_order",
    )
    assert done.returncode == 1, done.stdout + done.stderr  # today's read changed the run
    assert '"status": "delivered"' in done.stdout  # lookup_order read today's database
    assert "network attempts: 0" in done.stdout
    assert refunds(recorded.database) == 0  # refund_order was served, not run


def test_a_tool_recorded_as_a_write_never_runs_though_the_replay_forgot_the_setting(
    recorded: Recording,
) -> None:
    # Recorded with OTEL_REPLAY_WRITE_TOOLS=refund_*, replayed on a machine without it, that
    # even says every tool only reads: the recording's word that refund_order writes is enough.
    done = replay(recorded, "--live-tools", "read", OTEL_REPLAY_READ_TOOLS="*")
    assert '"status": "delivered"' in done.stdout  # read tools did run live
    assert refunds(recorded.database) == 0, "a tool recorded as a write ran in a replay"
    assert "network attempts: 0" in done.stdout


@pytest.fixture(scope="module")
def paused(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    return record(
        tmp_path_factory.mktemp("langgraph-hitl"),
        "_langgraph_hitl_agent.py",
        "r_langgraph_hitl",
        OTEL_REPLAY_WRITE_TOOLS="refund_*",
    )


def test_a_graph_paused_by_interrupt_and_resumed_replays_identically(paused: Recording) -> None:
    printed = paused.printed.splitlines()
    asked = [line for line in printed if line.startswith("  [paused] ")]
    assert asked == [  # the review node's interrupt, then the refund tool's own
        "  [paused] {'approve': ['refund_order']} -> {'approved': True}",
        "  [paused] {'confirm_refund': 'A-1234', 'amount': 129.0} -> {'confirmed': True}",
    ]
    assert any(line.startswith('  [tool] refund_order -> {"refund_id": "R-') for line in printed)
    done = replay(paused)
    assert done.returncode == 0, done.stdout + done.stderr
    # Paused at the same two places (the tool's pause made again by LangGraph's interrupt(),
    # resumed by its id in the replayed graph), the refund served, not repeated.
    assert done.stdout.startswith(paused.printed)
    assert "replay of run r_langgraph_hitl" in done.stdout and "): identical" in done.stdout
    assert "network attempts: 0" in done.stdout
    assert refunds(paused.database) == 0
    (replayed,) = set(run_ids(paused)) - {paused.run_id}
    for run_id in (paused.run_id, replayed):
        lookup, asking, refunded = tool_spans(paused, run_id)
        assert lookup["gen_ai.tool.name"] == "lookup_order"
        # The paused call: not a failure, its result what it asked; the resumed call (the
        # tool run again by LangGraph) a step of its own answering the same model call.
        assert (asking["gen_ai.tool.name"], refunded["gen_ai.tool.name"]) == ("refund_order",) * 2
        assert "error.type" not in asking
        (interrupt,) = json.loads(asking["gen_ai.tool.call.result"])["otel_replay.interrupt"]
        assert interrupt["value"] == {"confirm_refund": "A-1234", "amount": 129.0}
        assert json.loads(refunded["gen_ai.tool.call.result"])["status"] == "issued"
        assert asking["gen_ai.tool.call.id"] == refunded["gen_ai.tool.call.id"]
    assert_tool_kit(tool_spans(paused))
