"""A LangGraph agent streamed rather than invoked: ``stream_mode="updates"`` (sync),
``"messages"`` (``astream``: the model's answer token by token) and both at once. Recorded
under ``opentelemetry-instrument``, its database changed, replayed through the CLI with the
stand-in gone: the same updates, the same tokens in the same pieces."""

from __future__ import annotations

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
def streamed(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    return record(
        tmp_path_factory.mktemp("langgraph-stream"),
        "_langgraph_stream_agent.py",
        "r_langgraph_stream",
        OTEL_REPLAY_WRITE_TOOLS="refund_*",
    )


def test_streamed_updates_and_tokens_replay_identically(streamed: Recording) -> None:
    printed = streamed.printed.splitlines()
    assert "  [update] agent: calls lookup_order({'order_id': 'A-1234'})" in printed
    assert any(line.startswith('  [update] tools: tool: {"order_id": "A-1234"') for line in printed)
    tokens = [line for line in printed if line.startswith("  [token agent] ")]
    assert len(tokens) > 3  # the answer came in pieces: ChatOpenAI streamed
    assert any(line.startswith('  [message tools] tool: {"refund_id": "R-') for line in printed)
    assert "  [update] tools" in printed  # both modes at once
    done = replay_identically(streamed)
    assert done.stdout.startswith(streamed.printed)  # every update and token, in its pieces


def test_the_model_calls_streamed_and_the_tools_are_steps(streamed: Recording) -> None:
    calls = [
        span["attributes"]
        for span in spans(streamed)
        if span["attributes"].get("replay.step.kind") == "llm"
    ]
    # The updates turn did not stream; the messages turns did (LangGraph asked the model to).
    streamed_calls = [attrs.get("gen_ai.request.stream", False) for attrs in calls]
    assert streamed_calls == [False, False, True, True, True, True]
    for attrs in calls[2:]:
        assert attrs["replay.response.content_type"].startswith("text/event-stream")
        assert len(attrs["replay.response.chunk.sizes"]) > 3
    assert [t["gen_ai.tool.name"] for t in tool_spans(streamed)] == [
        "lookup_order",
        "refund_order",
        "lookup_order",
    ]


def test_a_changed_system_prompt_diverges_at_the_first_call(streamed: Recording) -> None:
    assert_a_changed_system_prompt_diverges_at_the_first_call(streamed)
