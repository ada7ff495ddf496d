"""LiteLLM streaming every answer, tool calls included: ``completion(..., stream=True)`` (sync)
for the lookup and ``await acompletion(..., stream=True)`` for the refund, the deltas put
together with ``stream_chunk_builder``; recorded under ``opentelemetry-instrument``, its
database changed, replayed through the CLI with the stand-in gone.
"""

from __future__ import annotations

import json

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
        tmp_path_factory.mktemp("litellm-streaming"),
        "_litellm_streaming_agent.py",
        "r_litellm_streaming",
    )


def test_the_streamed_agent_replays_identically(recorded: Recording) -> None:
    lines = recorded.printed.splitlines()
    assert '  [tool] lookup_order -> {"order_id": "A-1234", "status": "shipped",' in lines[1]
    assert '  [tool] refund_order -> {"refund_id": "R-' in lines[5]
    for streamed, answer in ((lines[2], lines[3]), (lines[6], lines[7])):
        # The text as it streamed is the answer the chunks make together.
        assert streamed.removeprefix("  [streamed] ") == answer.removeprefix("agent> ")
    replay_identically(recorded)  # "shipped", the same refund id, the same streamed text


def test_each_streamed_call_is_one_complete_step_with_its_tool_calls(recorded: Recording) -> None:
    stored = spans(recorded)
    calls = sorted(
        (s["attributes"] for s in stored if s["attributes"].get("replay.step.kind") == "llm"),
        key=lambda attrs: attrs["replay.step.index"],
    )
    assert [a["gen_ai.response.finish_reasons"] for a in calls] == [
        ["tool_calls"],
        ["stop"],
        ["tool_calls"],
        ["stop"],
    ]
    for attrs in calls:
        assert json.loads(attrs["replay.request.body"])["stream"] is True
        assert attrs["replay.response.complete"] is True and "error.type" not in attrs
        assert attrs["gen_ai.usage.output_tokens"] > 0  # the usage chunk was read
    assert sum(s["name"].startswith("chat ") for s in stored) == len(calls)  # one span each
    tools = tool_spans(recorded)
    assert [(t["gen_ai.tool.name"], t["replay.tool.effect"]) for t in tools] == [
        ("lookup_order", "read"),
        ("refund_order", "write"),
    ]
    for call, tool in ((calls[0], tools[0]), (calls[2], tools[1])):
        (asked,) = json.loads(call["gen_ai.output.messages"])[0]["parts"]
        # The streamed tool call, put together, is the call the tool step answers.
        assert asked["type"] == "tool_call" and asked["id"] == tool["gen_ai.tool.call.id"]
        assert asked["arguments"] == json.loads(tool["gen_ai.tool.call.arguments"])


def test_a_changed_system_prompt_diverges_at_the_first_call(recorded: Recording) -> None:
    assert_a_changed_system_prompt_diverges_at_the_first_call(recorded)
