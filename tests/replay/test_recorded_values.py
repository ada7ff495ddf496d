"""A recording is input: a step beyond HTTP (a tool, a value, a LangGraph checkpoint or store
read, an Agents SDK session read) whose recorded value is malformed or hostile ends the
replay at that step with one line naming the run, the step and what is wrong, exit 2 from
the ``replay`` verb, :class:`~otel_replay.RecordedValueError` from ``replaying()``; never a
TypeError from deep inside the agent, never an error a framework turns into a tool message.

Each family is recorded once by a small real agent (``_hostile_agent``) under the real
capture, exported as OTLP JSON, and one step's body changed in the file.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import multiprocessing
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_replay
from otel_replay.errors import RecordedValueError, RecordedValueInPoolError
from otel_replay.replay import BadValue
from tests.export._support import ROOT, Pipeline
from tests.replay import _hostile_agent as hostile
from tests.replay.conftest import collector_json

CLI = Path(sys.executable).parent / "otel-replay"
AGENT = Path(hostile.__file__)
SHAPE = "application/json; otel-replay-shape="


@dataclass(frozen=True)
class Recorded:
    run_id: str
    spans: list[ReadableSpan]
    printed: str


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Recorded]:
    """Each family's run, recorded in-process into a store of its own, its spans kept."""
    root = tmp_path_factory.mktemp("hostile")
    found = {}
    for family, agent in hostile.FAMILIES.items():
        memory = InMemorySpanExporter()
        with Pipeline(root / family) as pipeline:
            pipeline.provider.add_span_processor(SimpleSpanProcessor(memory))
            printed = agent()
            run_id = pipeline.run.run_id
        found[family] = Recorded(run_id, list(memory.get_finished_spans()), printed)
    return found


def _value(attribute: dict[str, Any]) -> Any:
    value = attribute["value"]
    return int(value["intValue"]) if "intValue" in value else value.get("stringValue")


def tampered(
    recorded: Recorded, index: int, body: bytes, path: Path, content_type: str | None = None
) -> Path:
    """The run as an OTLP JSON file at ``path``, step ``index``'s result replaced by
    ``body`` (its hash made to match, as a hostile file would), its content type by
    ``content_type`` when given."""
    data = collector_json(recorded.spans)
    for resource in data["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                attributes = span["attributes"]
                found = {a["key"]: a for a in attributes}
                if index != _value(found.get("replay.step.index", {"value": {}})):
                    continue
                key = next(
                    (k for k in ("replay.response.body", "gen_ai.tool.call.result") if k in found),
                    "replay.response.body",
                )
                found[key] = {"key": key, "value": {"stringValue": body.decode()}}
                digest = f"sha256:{hashlib.sha256(body).hexdigest()}"
                found["replay.response.hash"] = {
                    "key": "replay.response.hash",
                    "value": {"stringValue": digest},
                }
                if content_type is not None:
                    found["replay.response.content_type"] = {
                        "key": "replay.response.content_type",
                        "value": {"stringValue": content_type},
                    }
                attributes[:] = list(found.values())
    path.write_text(json.dumps(data))
    return path


DEEP = b"[" * 100_000 + b"]" * 100_000
HUGE = b"9" * 5_000

# family, step, recorded body, its content type, the step's name, what is wrong
CASES = [
    ("value", 0, b'"not a time"', None, "value now", "the recorded time is not an ISO 8601 text"),
    ("value", 0, b'"2026-11-02T08:00:00"', None, "value now", "the recorded time has no UTC"),
    ("value", 1, b"[1,2]", None, "value uuid4", "the recorded uuid is not a UUID's text: an array"),
    ("value", 2, b"{{{", None, "value big", "the recorded value is not JSON (unexpected"),
    ("tool", 0, DEEP, None, "tool lookup_order", "the recorded value is not JSON (depth limit"),
    ("tool", 0, HUGE, None, "tool lookup_order", "the recorded value is not JSON (Exceeds the"),
    (
        "checkpoint",
        1,
        b'[["not", "a", "tuple"]]',
        None,
        "checkpoint langgraph.get_tuple",
        "the recorded checkpoint is not a checkpoint tuple: an array",
    ),
    (
        "checkpoint",
        1,
        b'{"config": {"configurable": {}}, "checkpoint": {"id": "1"}, "metadata": {}}',
        None,
        "checkpoint langgraph.get_tuple",
        "the recorded checkpoint's channel_values is not an object",
    ),
    (
        "checkpoint",
        2,
        b'"history"',
        None,
        "checkpoint langgraph.list",
        "the recorded checkpoint list is not a list of checkpoints: a string",
    ),
    (
        "store",
        0,
        b'[[{"otel_replay.store_item": {"namespace": ["user-7"], "value": {}}}]]',
        None,
        "checkpoint langgraph.store",
        "a recorded store item of result 0 (SearchOp) has no key (a string)",
    ),
    (
        "store",
        1,
        b"[]",
        None,
        "checkpoint langgraph.store",
        "the recorded store batch answered 0 reads, this one asks 1",
    ),
    (
        "store",
        2,
        b"[[7]]",
        SHAPE + "null",
        "checkpoint langgraph.store",
        "the recorded result 0 (ListNamespacesOp) is not a list of namespaces",
    ),
    (
        "session",
        0,
        b'"hi hello"',
        None,
        "checkpoint agents.session.get_items",
        "the recorded session items are not a list: a string",
    ),
    (
        "session",
        1,
        b"3",
        None,
        "checkpoint agents.session.pop_item",
        "the recorded session item is neither an item (an object) nor null: a number",
    ),
]


@pytest.mark.parametrize(
    ("family", "step", "body", "content_type", "name", "what"),
    CASES,
    ids=[f"{c[0]}-{c[1]}-{c[5][13:40]}" for c in CASES],
)
def test_a_malformed_recorded_value_raises_naming_the_step(
    recorded: dict[str, Recorded],
    tmp_path: Path,
    family: str,
    step: int,
    body: bytes,
    content_type: str | None,
    name: str,
    what: str,
) -> None:
    run = recorded[family]
    source = tampered(run, step, body, tmp_path / "trace.json", content_type)
    replay = otel_replay.replaying(str(source))
    with replay as result, pytest.raises(RecordedValueError) as raised:
        hostile.FAMILIES[family]()
    error = raised.value
    assert (error.run_id, error.step_index, error.step_name) == (run.run_id, step, name)
    assert error.what.startswith(what), error.what
    assert str(error) == f"run {run.run_id} step {step} ({name}): {error.what}"
    assert "\n" not in str(error) and len(str(error)) < 400
    assert result.outcome == "bad_recording" and not result.identical
    assert result.bad_value == BadValue(run.run_id, step, name, error.what)
    assert isinstance(error, BaseException) and not isinstance(error, Exception)


def test_values_json_gives_back_as_they_were_are_served_so(
    recorded: dict[str, Recorded], tmp_path: Path
) -> None:
    """An integer beyond 64 bits comes back exact (orjson read it as a float), and a shape
    that does not fit its JSON (a set of objects, which cannot be hashed) serves the JSON."""
    run = recorded["value"]
    unfit = SHAPE + '["set",{}]'
    source = tampered(run, 3, b'[{"sku":"KB-101"}]', tmp_path / "trace.json", unfit)
    with otel_replay.replaying(str(source)) as result:
        again = hostile.values()
    assert again == run.printed and "1180591620717411303425 [{'sku': 'KB-101'}]" in again
    assert result.identical, result.first_divergence


def _replay_cli(
    source: Path, family: str, store: Path, *flags: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run(
        [
            *(str(CLI), "replay", str(source), "--store", str(store), "--no-isolate", *flags),
            *("--", sys.executable, str(AGENT), family),
        ],
        env=env | {"PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# One case per family through the real program: family, step, recorded body, name, what
CLI_CASES = [
    (
        "value",
        1,
        b'"not-a-uuid"',
        "value uuid4",
        "the recorded uuid is not a UUID's text: a string that is not one",
    ),
    (
        "tool",
        0,
        b"garbage",
        "tool lookup_order",
        "the recorded value is not JSON (unexpected character, expected a JSON value: "
        "line 1 column 1 (char 0))",
    ),
    (
        "checkpoint",
        1,
        b'{"config": {"configurable": {}}, "checkpoint": "gone", "metadata": {}}',
        "checkpoint langgraph.get_tuple",
        "the recorded checkpoint tuple's checkpoint is not an object: a string",
    ),
    (
        "store",
        1,
        b"[5]",
        "checkpoint langgraph.store",
        "the recorded result 0 (GetOp) holds a number that is no store item",
    ),
    (
        "session",
        0,
        b"[1, 2]",
        "checkpoint agents.session.get_items",
        "the recorded session item 0 is not an item (an object): a number",
    ),
]


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("family", "step", "body", "name", "what"), CLI_CASES, ids=[c[0] for c in CLI_CASES]
)
def test_the_replay_verb_stops_at_the_step_with_one_line_and_exit_2(
    recorded: dict[str, Recorded],
    tmp_path: Path,
    family: str,
    step: int,
    body: bytes,
    name: str,
    what: str,
) -> None:
    run = recorded[family]
    source = tampered(run, step, body, tmp_path / "trace.json")
    as_json = family == "checkpoint"
    done = _replay_cli(source, family, tmp_path / "store", *(["--json"] if as_json else []))
    line = f"run {run.run_id} step {step} ({name}): {what}"
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert run.printed not in done.stdout + done.stderr  # it stopped at that step
    if as_json:
        document = json.loads(done.stdout)
        assert document["outcome"] == "bad_recording" and document["exit_code"] == 2
        assert document["bad_value"] == {
            "run": run.run_id,
            "step": step,
            "name": name,
            "what": what,
            "message": line,
        }
    else:
        assert done.stderr == f"Error: {line}\n"


def test_a_framework_that_catches_exceptions_cannot_swallow_it(
    recorded: dict[str, Recorded], tmp_path: Path
) -> None:
    """LangGraph's ToolNode with ``handle_tool_errors=True`` and the Agents SDK's failure
    handler turn an ``Exception`` from a tool into a message for the model, and the replay
    would have gone on with a value the recording does not hold."""
    from agents import function_tool
    from agents.tool_context import ToolContext
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    @tool
    def stock(sku: str) -> int:
        """How many are in stock."""
        return 3

    @function_tool
    def reorder(sku: str) -> int:
        """Order more (the SDK makes its failure the tool's text)."""
        return 5

    asked = AIMessage("", tool_calls=[{"name": "stock", "args": {"sku": "KB"}, "id": "call_1"}])
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([stock], handle_tool_errors=True))
    graph.add_edge(START, "tools")
    app = graph.compile()

    async def reordered() -> Any:
        from agents.tool import _invoke_function_tool_with_metadata  # the runner's, as hooked

        context = ToolContext(None, tool_name="reorder", tool_call_id="c", tool_arguments="{}")
        return await _invoke_function_tool_with_metadata(
            function_tool=reorder, context=context, arguments='{"sku": "KB"}'
        )

    def agent() -> Any:
        return app.invoke({"messages": [asked]}), asyncio.run(reordered()).output

    memory = InMemorySpanExporter()
    with Pipeline(tmp_path / "store") as pipeline:
        pipeline.provider.add_span_processor(SimpleSpanProcessor(memory))
        agent()
        run = Recorded(pipeline.run.run_id, list(memory.get_finished_spans()), "")
    for step, name in ((0, "tool stock"), (1, "tool reorder")):
        source = tampered(run, step, b"not json", tmp_path / f"trace-{step}.json")
        with otel_replay.replaying(str(source)), pytest.raises(RecordedValueError) as raised:
            agent()
        assert raised.value.step_name == name and raised.value.step_index == step


@pytest.mark.subprocess
def test_in_a_pool_task_it_reaches_the_caller_instead_of_hanging_the_pool(
    recorded: dict[str, Recorded], tmp_path: Path
) -> None:
    """A Pool worker lets only an ``Exception`` through: in its tasks the error is also one."""
    source = tampered(recorded["tool"], 0, b"garbage", tmp_path / "trace.json")
    replay = otel_replay.replaying(str(source))
    with replay, multiprocessing.get_context("fork").Pool(1) as pool:
        task = pool.apply_async(hostile.tools)
        with pytest.raises(RecordedValueInPoolError, match=r"step 0 \(tool lookup_order\)"):
            task.get(timeout=30)
