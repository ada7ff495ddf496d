"""The OpenAI Agents SDK, over Chat Completions and over Responses, its tools plain
``@function_tool`` functions: recorded under ``opentelemetry-instrument`` with no otel-replay
code in the agent, its database changed, replayed through the CLI with the stand-in gone.

With the official OpenTelemetry bridge of the SDK's tracing installed, the SDK's own
``execute_tool`` span is the step's span: enriched, not doubled. A tool that raises, its error
made the tool's output by the SDK's failure handler, replays through that handler.
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from collections.abc import Iterator

import pytest

from examples.otlp_sink import OtlpSink
from tests.frameworks._support import (
    Recording,
    record,
    refunds,
    replay,
    run_ids,
    spans,
    tool_spans,
)


@pytest.fixture(scope="module", params=["chat", "responses"])
def recorded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Recording:
    api = request.param
    return record(
        tmp_path_factory.mktemp(f"agents-{api}"),
        "_agents_sdk_agent.py",
        f"r_agents_{api}",
        api,
        OTEL_REPLAY_WRITE_TOOLS="refund_order",
        OTEL_REPLAY_READ_TOOLS="lookup_order",
    )


@pytest.fixture(scope="module")
def exported() -> Iterator[OtlpSink]:
    """Every span the bridged recording exports over OTLP (the bridge's own included)."""
    with OtlpSink() as sink:
        yield sink


@pytest.fixture(scope="module")
def bridged(tmp_path_factory: pytest.TempPathFactory, exported: OtlpSink) -> Recording:
    return record(
        tmp_path_factory.mktemp("agents-bridge"),
        "_agents_sdk_agent.py",
        "r_agents_bridge",
        "chat",
        "bridge",
        OTEL_REPLAY_WRITE_TOOLS="refund_order",
        OTEL_REPLAY_READ_TOOLS="lookup_order",
        OTEL_TRACES_EXPORTER="replay,otlp",
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
        OTEL_EXPORTER_OTLP_ENDPOINT=exported.grpc_endpoint,
    )


def test_the_agent_replays_identically_and_its_write_does_not_repeat(
    recorded: Recording,
) -> None:
    assert "'status': 'shipped'" in recorded.printed  # str() of the dict the tool returned
    assert "[tool] -> refund_id='R-" in recorded.printed  # str() of the pydantic model
    done = replay(recorded)
    assert done.returncode == 0, done.stdout + done.stderr
    # The same objects came back: str() of the restored dict and Refund print as recorded.
    assert done.stdout.startswith(recorded.printed)
    assert "): identical" in done.stdout and "network attempts: 0" in done.stdout
    assert refunds(recorded.database) == 0


def test_each_function_tool_call_is_one_tool_step_with_its_effect(recorded: Recording) -> None:
    tools = tool_spans(recorded)
    assert [(t["gen_ai.tool.name"], t["replay.tool.effect"]) for t in tools] == [
        ("lookup_order", "read"),
        ("refund_order", "write"),
    ]
    lookup, refund = tools
    assert json.loads(lookup["gen_ai.tool.call.arguments"]) == {"order_id": "A-1234"}
    assert json.loads(lookup["gen_ai.tool.call.result"])["total"] == 129.0
    assert json.loads(refund["gen_ai.tool.call.result"])["status"] == "issued"
    for attrs in tools:
        assert attrs["gen_ai.tool.call.id"].startswith(("call_", "fc_"))
        assert attrs["gen_ai.tool.description"]
        assert attrs["replay.tool.schema.version"].startswith("sha256:")
    names = [span["name"] for span in spans(recorded)]
    assert names.count("execute_tool lookup_order") == names.count("execute_tool refund_order") == 1


def test_the_sdks_own_execute_tool_span_is_enriched_not_doubled(bridged: Recording) -> None:
    tool_calls = [s for s in spans(bridged) if s["name"].startswith("execute_tool ")]
    assert sorted(s["name"] for s in tool_calls) == [
        "execute_tool lookup_order",
        "execute_tool refund_order",
    ]
    for span in tool_calls:
        attrs = span["attributes"]
        # The bridge's span (its agent attributes) carries the step (ours).
        assert attrs["gen_ai.agent.name"] and attrs["gen_ai.operation.name"] == "execute_tool"
        assert attrs["replay.step.kind"] == "tool" and "replay.response.hash" in attrs
    effects = {t["gen_ai.tool.name"]: t["replay.tool.effect"] for t in tool_spans(bridged)}
    assert effects == {"lookup_order": "read", "refund_order": "write"}
    done = replay(bridged)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(bridged.printed)
    assert "): identical" in done.stdout and "network attempts: 0" in done.stdout
    assert refunds(bridged.database) == 0
    printed = bridged.printed.splitlines()[1].split("-> ", 1)[1]
    assert ast.literal_eval(printed)["status"] == "shipped"


def test_a_bridged_run_is_one_trace_under_one_root_of_ours(
    bridged: Recording, exported: OtlpSink
) -> None:
    spans = exported.spans()
    assert len({s["trace_id"] for s in spans}) == 1
    (root,) = [s for s in spans if s["parent_span_id"] is None]
    assert (root["scope"], root["name"]) == ("otel_replay", "invoke_agent _agents_sdk_agent.py")
    agents = [s for s in spans if s["attributes"].get("gen_ai.operation.name") == "invoke_agent"]
    # Ours (the root), then the bridge's: a workflow span per Runner.run, beneath the root,
    # and its agent span; none doubled.
    assert Counter((s["scope"] == "otel_replay", s["name"]) for s in agents) == {
        (True, "invoke_agent _agents_sdk_agent.py"): 1,
        (False, "Agent workflow"): 2,
        (False, "invoke_agent desk"): 2,
    }
    workflows = [s for s in agents if s["name"] == "Agent workflow"]
    assert {s["parent_span_id"] for s in workflows} == {root["span_id"]}
    steps = Counter(
        (s["attributes"]["replay.step.index"], s["attributes"]["replay.step.kind"])
        for s in spans
        if "replay.step.index" in s["attributes"]
    )
    # Every step once: 4 model calls, 2 tools and the refund's uuid.uuid4() draw.
    assert sorted(index for index, _ in steps) == list(range(7))
    assert Counter(kind for _, kind in steps) == {"llm": 4, "tool": 2, "value": 1}


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    return record(
        tmp_path_factory.mktemp("agents-failing"),
        "_agents_sdk_agent.py",
        "r_agents_failing",
        "responses",
        "failing",
        OTEL_REPLAY_WRITE_TOOLS="refund_order",
    )


def test_a_tool_failure_the_sdk_handled_replays_through_the_same_handler(
    failing: Recording,
) -> None:
    failure = "the warehouse holding A-1234 is offline"
    printed = failing.printed.splitlines()
    # The lookup raised; the run's tool_error_formatter worded it and the model was told.
    assert f"  [failure] lookup_order: WarehouseOffline: {failure}" in printed
    assert f"  [tool] -> lookup_order failed: {failure}" in printed
    lookup, refund = tool_spans(failing)
    # The step is the body: what it raised, not the text the SDK made of it.
    assert lookup["gen_ai.tool.name"] == "lookup_order"
    assert lookup["error.type"] == "__main__.WarehouseOffline"
    assert "gen_ai.tool.call.result" not in lookup
    assert "error.type" not in refund
    assert json.loads(refund["gen_ai.tool.call.result"])["status"] == "issued"
    done = replay(failing)
    assert done.returncode == 0, done.stdout + done.stderr
    # The exception came back inside the SDK's failure handler: the formatter ran again and
    # worded it alike, and its text bypassed the tool's declared output schema as recorded
    # (else the SDK raises UserError: the text is not an Order).
    assert done.stdout.startswith(failing.printed)
    assert "): identical" in done.stdout and "network attempts: 0" in done.stdout
    assert refunds(failing.database) == 0
    (replayed,) = set(run_ids(failing)) - {failing.run_id}
    assert [t.get("error.type") for t in tool_spans(failing, replayed)] == [
        "__main__.WarehouseOffline",
        None,
    ]


def test_a_kept_session_replays_each_run_from_where_it_started(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A ``SQLiteSession`` on a file kept from run to run: each replay starts from the items
    its recording read, whatever the session holds by then, and adds none."""
    root = tmp_path_factory.mktemp("agents-session")
    first, second = (
        record(
            root,
            "_agents_sdk_agent.py",
            f"r_agents_session_{n}",
            "chat",
            "session",
            OTEL_REPLAY_WRITE_TOOLS="refund_order",
        )
        for n in (1, 2)
    )
    held = int(first.printed.splitlines()[-1].split()[1])
    assert second.printed.splitlines()[-1] == f"[session] {2 * held} items"
    sessions = root / "orders.sqlite.sessions"
    before = sessions.read_bytes()
    for recording in (first, second):
        done = replay(recording)
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.startswith(recording.printed)
        assert "): identical" in done.stdout
        assert refunds(recording.database) == 0
    assert sessions.read_bytes() == before
    reads = [
        span["attributes"]
        for span in spans(second)
        if span["attributes"].get("replay.value.name") == "agents.session.get_items"
    ]
    first_read = min(reads, key=lambda attrs: attrs["replay.step.index"])
    assert json.loads(first_read["replay.request.body"]) == {"session_id": "desk-7"}
