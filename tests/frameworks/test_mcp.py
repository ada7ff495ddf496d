"""MCP: an agent whose tools live on an MCP server it starts over stdio (a real ``MCPServer``),
called through ``ClientSession.call_tool``: recorded under ``opentelemetry-instrument`` with no
otel-replay code, its database changed, replayed through the CLI with the stand-in gone. Each
tool's effect comes from the server's ``readOnlyHint`` when it gives one; the progress a tool
reports reaches the call's ``progress_callback`` in the replay too."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from examples.otlp_sink import OtlpSink
from tests.frameworks._support import Recording, record, refunds, replay, tool_spans


@pytest.fixture(scope="module")
def exported() -> Iterator[OtlpSink]:
    """Every span the recorded process exports over OTLP (the MCP SDK's own included)."""
    with OtlpSink() as sink:
        yield sink


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, exported: OtlpSink) -> Recording:
    return record(
        tmp_path_factory.mktemp("mcp"),
        "_mcp_agent.py",
        "r_mcp",
        OTEL_TRACES_EXPORTER="replay,otlp",
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
        OTEL_EXPORTER_OTLP_ENDPOINT=exported.grpc_endpoint,
        # get_weather's server says nothing of it: the setting makes it a writer.
        OTEL_REPLAY_WRITE_TOOLS="get_weather",
    )


def test_the_agent_replays_identically_and_its_write_does_not_repeat(
    recorded: Recording,
) -> None:
    assert '"status": "shipped"' in recorded.printed
    assert '[tool] refund_order -> {\n  "refund_id": "R-' in recorded.printed
    done = replay(recorded)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(recorded.printed)
    assert "): identical" in done.stdout and "network attempts: 0" in done.stdout
    assert refunds(recorded.database) == 0


def test_the_progress_a_tool_reported_reaches_the_callback_in_replay(
    recorded: Recording,
) -> None:
    # Recorded: the server's three reports reached the call's progress_callback, in order.
    reported = [line for line in recorded.printed.splitlines() if "[progress]" in line]
    assert reported[0] == "  [progress] 0.0/2.0: checking order A-1234"
    assert reported[1].startswith("  [progress] 1.0/2.0: refund R-")
    assert reported[2:] == ["  [progress] 2.0/2.0: None"]
    refund = tool_spans(recorded)[1]
    result = json.loads(refund["gen_ai.tool.call.result"])
    assert result["structuredContent"]["status"] == "issued"
    assert [note["progress"] for note in result["otel_replay.progress"]] == [0, 1, 2]
    done = replay(recorded)
    assert done.returncode == 0, done.stdout + done.stderr
    # Replayed: the same reports, to the same callback, before the call returned its result.
    again = [line for line in done.stdout.splitlines() if "[progress]" in line]
    assert again == reported
    assert done.stdout.startswith(recorded.printed)
    assert "): identical" in done.stdout


def test_the_effect_comes_from_the_servers_read_only_hint(recorded: Recording) -> None:
    tools = tool_spans(recorded)
    assert [(t["gen_ai.tool.name"], t["replay.tool.effect"]) for t in tools] == [
        ("lookup_order", "read"),  # readOnlyHint: true
        ("refund_order", "write"),  # readOnlyHint: false
        ("get_weather", "write"),  # no hint: OTEL_REPLAY_WRITE_TOOLS names it
    ]
    lookup = tools[0]
    assert json.loads(lookup["gen_ai.tool.call.arguments"]) == {"order_id": "A-1234"}
    result = json.loads(lookup["gen_ai.tool.call.result"])  # the CallToolResult on the wire
    assert result["structuredContent"]["status"] == "shipped"
    assert result["content"][0]["type"] == "text" and result.get("isError") in (None, False)
    for attrs in tools:
        assert attrs["gen_ai.tool.description"]  # from the server's listing
        assert attrs["replay.tool.schema.version"].startswith("sha256:")
        assert attrs["gen_ai.tool.call.id"].startswith("call_")  # the model's call it answers


def test_one_execute_tool_span_per_call_with_the_mcp_request_inside(
    recorded: Recording, exported: OtlpSink
) -> None:
    exported.wait_for_spans(
        lambda spans: sum(s["name"].startswith("MCP send tools/call") for s in spans) >= 3, 10
    )
    spans = exported.spans()
    steps = {s["span_id"]: s for s in spans if s["name"].startswith("execute_tool ")}
    assert sorted(s["name"] for s in steps.values()) == [
        "execute_tool get_weather",
        "execute_tool lookup_order",
        "execute_tool refund_order",
    ]
    requests = [s for s in spans if s["name"].startswith("MCP send tools/call")]
    assert len(requests) == 3
    for request in requests:  # the SDK's JSON-RPC span is the step's child, as HTTP is
        parent = steps[request["parent_span_id"]]
        assert request["name"] == f"MCP send tools/call {parent['attributes']['gen_ai.tool.name']}"
    # The agent listed the tools itself: the hook learnt the hints from that listing.
    assert [s["name"] for s in spans].count("MCP send tools/list") == 1


@pytest.fixture(scope="module")
def through_agents(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    return record(tmp_path_factory.mktemp("agents-mcp"), "_agents_mcp_agent.py", "r_agents_mcp")


def test_an_agents_sdk_tool_calling_an_mcp_tool_is_one_step(through_agents: Recording) -> None:
    tools = tool_spans(through_agents)
    # The SDK's function tool stands aside for the MCP call it makes: one step per call,
    # with the effect the server gave, not two steps of the same call.
    assert [(t["gen_ai.tool.name"], t["replay.tool.effect"]) for t in tools] == [
        ("lookup_order", "read"),
        ("refund_order", "write"),
    ]
    assert all("replay.step.within" not in t for t in tools)
    done = replay(through_agents)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(through_agents.printed)
    assert '\\n  "status": "shipped"' in through_agents.printed
    assert "): identical" in done.stdout and "network attempts: 0" in done.stdout
    assert refunds(through_agents.database) == 0
