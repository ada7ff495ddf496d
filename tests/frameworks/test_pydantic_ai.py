"""Pydantic AI over Chat Completions, its tools plain ``@agent.tool_plain``/``@agent.tool``
functions: recorded under ``opentelemetry-instrument`` with no otel-replay code in the agent,
its database changed, replayed through the CLI with the stand-in gone; ``run_sync``, ``run``
and ``run_stream``.

With Pydantic AI's own instrumentation on, its ``execute_tool`` span is the step's span
(enriched, not doubled) and its ``chat`` span is each call's span, our attempts ``POST``
spans beneath it.
"""

from __future__ import annotations

import json

import pytest

from tests.frameworks._support import (
    Recording,
    assert_a_changed_system_prompt_diverges_at_the_first_call,
    assert_tool_kit,
    record,
    refunds,
    replay,
    replay_identically,
    spans,
    tool_spans,
)


def _record(tmp_path_factory: pytest.TempPathFactory, *args: str) -> Recording:
    how = "-".join(args) or "plain"
    return record(
        tmp_path_factory.mktemp(f"pydantic-ai-{how}"),
        "_pydantic_ai_agent.py",
        f"r_pydantic_ai_{how}",
        *args,
        OTEL_REPLAY_WRITE_TOOLS="refund_*",
        OTEL_REPLAY_READ_TOOLS="lookup_order",
    )


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    return _record(tmp_path_factory)


@pytest.fixture(scope="module")
def instrumented(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    return _record(tmp_path_factory, "instrumented")


@pytest.fixture(params=["plain", "instrumented"])
def recorded(request: pytest.FixtureRequest) -> Recording:
    """Each recording: Pydantic AI's own instrumentation off, then on."""
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


def test_the_agent_replays_identically_and_its_write_does_not_repeat(
    recorded: Recording,
) -> None:
    assert '[tool] lookup_order -> dict {"order_id":"A-1234","status":"shipped"' in recorded.printed
    assert '[tool] refund_order -> Refund {"refund_id":"R-' in recorded.printed
    assert "agent (streamed)> " in recorded.printed
    # The order still "shipped", the same refund id, the Refund rebuilt as a Refund.
    replay_identically(recorded)


def test_each_tool_call_is_one_tool_step_with_its_effect(recorded: Recording) -> None:
    tools = tool_spans(recorded)
    assert [(t["gen_ai.tool.name"], t["replay.tool.effect"]) for t in tools] == [
        ("lookup_order", "read"),
        ("refund_order", "write"),  # OTEL_REPLAY_WRITE_TOOLS=refund_*
        ("lookup_order", "read"),  # the streamed run
    ]
    lookup, refund, _ = tools
    assert json.loads(lookup["gen_ai.tool.call.arguments"]) == {"order_id": "A-1234"}
    assert json.loads(refund["gen_ai.tool.call.arguments"]) == {
        "order_id": "A-1234",
        "reason": "item arrived damaged",
    }
    assert json.loads(refund["gen_ai.tool.call.result"])["refund_id"].startswith("R-")
    assert_tool_kit(tools)
    names = [span["name"] for span in spans(recorded)]
    assert names.count("execute_tool lookup_order") == 2
    assert names.count("execute_tool refund_order") == 1


def test_a_changed_system_prompt_diverges_at_the_first_call(plain: Recording) -> None:
    assert_a_changed_system_prompt_diverges_at_the_first_call(plain)


def test_a_named_write_tool_never_runs_even_when_read_tools_run_live(plain: Recording) -> None:
    done = replay(
        plain,
        "--live-tools",
        "read",
        OTEL_REPLAY_WRITE_TOOLS="refund_*",
        OTEL_REPLAY_READ_TOOLS="lookup_order",
    )
    assert done.returncode == 1, done.stdout + done.stderr  # today's read changed the run
    assert '"status":"delivered"' in done.stdout  # lookup_order read today's database
    assert "network attempts: 0" in done.stdout
    assert refunds(plain.database) == 0  # refund_order was served, not run


def test_under_its_own_instrumentation_its_spans_carry_the_steps(
    instrumented: Recording,
) -> None:
    stored = spans(instrumented)
    by_id = {span["span_id"]: span for span in stored}
    tools = [span for span in stored if span["name"].startswith("execute_tool ")]
    assert [span["scope"] for span in tools] == ["pydantic-ai"] * 3  # its span, enriched
    assert all(span["attributes"]["replay.step.kind"] == "tool" for span in tools)
    calls = [span for span in stored if span["name"] == "chat gpt-4o-mini"]
    assert len(calls) == 6 and {span["scope"] for span in calls} == {"pydantic-ai"}
    assert all(span["attributes"]["replay.run.id"] == instrumented.run_id for span in calls)
    attempts = [span for span in stored if span["attributes"].get("replay.step.kind") == "llm"]
    assert len(attempts) == 6
    for attempt in attempts:  # one POST span of ours per attempt, beneath Pydantic AI's chat
        assert attempt["name"] == "POST" and attempt["scope"] == "otel_replay"
        assert by_id[attempt["parent_span_id"]]["name"] == "chat gpt-4o-mini"
        assert not any(key.startswith("gen_ai.") for key in attempt["attributes"])
