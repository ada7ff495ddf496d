"""Framework tools recorded and replayed in-process (the real pipeline into a store, spans kept
in memory, ``otel_replay.replaying``): what the agent scripts do not show."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import operator
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import pytest
from langchain_core.callbacks import CallbackManagerForToolRun
from langchain_core.tools import BaseTool, ToolException, tool
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from typing_extensions import TypedDict

import otel_replay
from otel_replay.envelope.frameworks import _langchain
from otel_replay.store import Store
from tests.export._support import ROOT, Pipeline
from tests.frameworks._orders import open_database

RUNS: list[str] = []
LANGCHAIN_READS = "read_*,flaky_supplier,ship_and_report"  # inventory is declared nowhere


@tool
def read_stock(sku: str) -> dict[str, Any]:
    """How many of an item are in stock."""
    RUNS.append("read_stock")
    return {"sku": sku, "in_stock": 3}


@tool
def reserve_stock(sku: str, count: int) -> str:
    """Reserve items."""
    RUNS.append("reserve_stock")
    return f"reserved {count} x {sku}"


@tool
def flaky_supplier(sku: str) -> str:
    """Ask the supplier."""
    RUNS.append("flaky_supplier")
    raise ToolException(f"supplier has no {sku}")


flaky_supplier.handle_tool_error = True  # the exception becomes the tool's text


@otel_replay.tool(effect="write")
def ship(order_id: str) -> dict[str, str]:
    """Ship an order (declared a write tool by its author)."""
    RUNS.append("ship")
    return {"order_id": order_id, "status": "shipped"}


shipping = tool(ship)  # a LangChain tool made of an @otel_replay.tool function


@tool
def ship_and_report(order_id: str) -> str:
    """Ship, then report (a LangChain tool whose body calls a recorded tool)."""
    RUNS.append("ship_and_report")
    return f"report: {ship(order_id)['status']}"


class Inventory(BaseTool):
    """A tool class of its own with a sync body only: ``ainvoke`` runs it in an executor."""

    name: str = "inventory"
    description: str = "Count an item in the warehouse."

    def _run(self, sku: str, run_manager: CallbackManagerForToolRun | None = None) -> int:
        RUNS.append(f"inventory with run manager: {run_manager is not None}")
        return 7


def langchain_agent() -> list[Any]:
    return [
        read_stock.invoke(
            {"type": "tool_call", "id": "call_1", "name": "read_stock", "args": {"sku": "KB-101"}}
        ),
        reserve_stock.invoke({"sku": "KB-101", "count": 2}),
        flaky_supplier.invoke({"sku": "KB-101"}),
        asyncio.run(shipping.ainvoke({"order_id": "A-1"})),
        ship_and_report.invoke({"order_id": "A-2"}),
        asyncio.run(Inventory().ainvoke({"sku": "KB-101"})),
    ]


class Recorded:
    def __init__(self, store: Path, run_id: str, seen: Any, spans: list[ReadableSpan]) -> None:
        self.store, self.run_id, self.seen, self.spans = store, run_id, seen, spans

    def tools(self) -> list[dict[str, Any]]:
        found = [dict(s.attributes or {}) for s in self.spans if s.name.startswith("execute_tool")]
        return sorted(found, key=lambda attrs: attrs["replay.step.index"])


def _record(path: Path, agent: Any, **env: str) -> Recorded:
    memory = InMemorySpanExporter()
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        with Pipeline(path) as pipeline:
            pipeline.provider.add_span_processor(SimpleSpanProcessor(memory))
            seen = agent()
            run_id = pipeline.run.run_id
    return Recorded(path, run_id, seen, list(memory.get_finished_spans()))


@pytest.fixture(scope="module")
def langchain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    RUNS.clear()
    recorded = _record(
        tmp_path_factory.mktemp("langchain") / "store",
        langchain_agent,
        OTEL_REPLAY_WRITE_TOOLS="reserve_*",
        OTEL_REPLAY_READ_TOOLS=LANGCHAIN_READS,
    )
    assert RUNS == [
        "read_stock",
        "reserve_stock",
        "flaky_supplier",
        "ship",
        "ship_and_report",
        "ship",
        "inventory with run manager: True",  # LangChain still hands the body its callbacks
    ]
    yield recorded


def test_langchain_tools_are_steps_with_effects_and_nesting(langchain: Recorded) -> None:
    steps = [
        (
            t["gen_ai.tool.name"],
            t["replay.tool.effect"],
            t["replay.tool.effect_reason"],
            t.get("replay.step.within"),
        )
        for t in langchain.tools()
    ]
    assert steps == [
        ("read_stock", "read", "setting", None),  # OTEL_REPLAY_READ_TOOLS=read_*,...
        ("reserve_stock", "write", "setting", None),  # OTEL_REPLAY_WRITE_TOOLS=reserve_*
        ("flaky_supplier", "read", "setting", None),
        ("ship", "write", "declared", None),  # one step, the decorator's, its declared effect
        ("ship_and_report", "read", "setting", None),
        ("ship", "write", "declared", 4),  # made inside ship_and_report's body
        ("inventory", "write", "default", None),  # declared nowhere
    ]
    tools = langchain.tools()
    assert tools[0]["gen_ai.tool.call.id"] == "call_1"
    assert tools[2]["error.type"] == "langchain_core.tools.base.ToolException"
    assert langchain.seen[2] == "supplier has no KB-101"  # handle_tool_error made it text


def test_langchain_tools_replay_without_running(langchain: Recorded) -> None:
    RUNS.clear()
    with otel_replay.replaying(langchain.run_id, store=str(langchain.store)) as result:
        again = langchain_agent()
    assert RUNS == []
    assert again == langchain.seen  # the ToolMessage, the handled ToolException's text...
    assert result.identical, result.first_divergence


def test_a_named_write_tool_never_runs_while_read_tools_run_live(
    langchain: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    RUNS.clear()
    monkeypatch.setenv("OTEL_REPLAY_WRITE_TOOLS", "reserve_*")
    monkeypatch.setenv("OTEL_REPLAY_READ_TOOLS", LANGCHAIN_READS)
    with otel_replay.replaying(langchain.run_id, store=str(langchain.store), live_tools="read"):
        langchain_agent()
    assert "read_stock" in RUNS and "reserve_stock" not in RUNS and "ship" not in RUNS
    assert not any(run.startswith("inventory") for run in RUNS)  # declared nowhere: a write
    RUNS.clear()
    # Not named a writer where the replay runs, even (wrongly) named a reader: the
    # recording's word that it writes is enough.
    monkeypatch.delenv("OTEL_REPLAY_WRITE_TOOLS")
    monkeypatch.setenv("OTEL_REPLAY_READ_TOOLS", f"{LANGCHAIN_READS},reserve_*")
    with otel_replay.replaying(
        langchain.run_id, store=str(langchain.store), live_tools="read"
    ) as result:
        langchain_agent()
    assert "read_stock" in RUNS and "reserve_stock" not in RUNS and "ship" not in RUNS
    (reserved,) = result.tool_calls("reserve_stock")
    assert (reserved.live, reserved.effect, reserved.effect_reason) == (False, "write", "recorded")


def test_hooks_come_off_when_nobody_holds_them() -> None:
    import mcp.client.session
    from langchain_core.tools import BaseTool

    assert not hasattr(vars(BaseTool)["run"], "__wrapped__")
    assert not hasattr(vars(mcp.client.session.ClientSession)["call_tool"], "__wrapped__")
    RUNS.clear()
    read_stock.invoke({"sku": "x"})  # runs as if we were not there
    assert RUNS == ["read_stock"]


# MCP, in-process: the server over stdio, no model.

SERVER = Path(__file__).with_name("_mcp_server.py")


async def mcp_agent(database: Path) -> list[Any]:
    params = StdioServerParameters(
        command=sys.executable, args=[str(SERVER), str(database)], env={"PYTHONPATH": str(ROOT)}
    )
    with open(os.devnull, "w") as quiet:  # the server logs the failed lookup's traceback
        async with (
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            # No listing first: the hook lists the tools once itself, to learn their hints.
            return [
                await session.call_tool("lookup_order", {"order_id": "A-1234"}),
                await session.call_tool("lookup_order", {"order_id": "Z-9999"}),
                await session.call_tool("refund_order", {"order_id": "A-1234", "reason": "late"}),
            ]


@pytest.fixture(scope="module")
def mcp_run(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    root = tmp_path_factory.mktemp("mcp")
    database = root / "orders.sqlite"
    open_database(str(database)).close()
    recorded = _record(root / "store", lambda: asyncio.run(mcp_agent(database)))
    with closing(sqlite3.connect(database)) as db, db:
        db.execute("UPDATE orders SET status = 'delivered'")
        db.execute("DELETE FROM refunds")
    recorded.database = database  # type: ignore[attr-defined]
    return recorded


def test_mcp_calls_are_steps_whose_effect_the_server_gave(mcp_run: Recorded) -> None:
    effects = [
        (t["gen_ai.tool.name"], t["replay.tool.effect"], t["replay.tool.effect_reason"])
        for t in mcp_run.tools()
    ]
    assert effects == [
        ("lookup_order", "read", "hint"),  # readOnlyHint: true
        ("lookup_order", "read", "hint"),
        ("refund_order", "write", "hint"),  # readOnlyHint: false, from the hook's own listing
    ]
    found, missing, refunded = mcp_run.seen
    assert found.structured_content["status"] == "shipped"
    assert missing.is_error and missing.content[0].text == "Error executing tool lookup_order"
    assert refunded.structured_content["status"] == "issued"


@pytest.mark.parametrize(
    ("name", "declared", "read_only", "expected"),
    [
        ("get_weather", None, None, ("write", "default")),  # declared nowhere: a write
        ("get_weather", None, True, ("read", "hint")),
        ("get_weather", None, False, ("write", "hint")),
        ("get_weather", "read", None, ("read", "declared")),
        ("get_weather", "write", None, ("write", "declared")),
        ("read_stock", None, None, ("read", "setting")),  # OTEL_REPLAY_READ_TOOLS=read_*
        ("read_stock", "write", None, ("write", "declared")),  # a word that it writes wins
        ("read_stock", None, False, ("write", "hint")),
        ("lookup_order", None, True, ("write", "setting")),  # OTEL_REPLAY_WRITE_TOOLS wins
        ("lookup_order", "read", None, ("write", "setting")),  # over a declared read too
        ("lookup_both", None, None, ("write", "setting")),  # named in both lists
        ("Read_stock", None, None, ("write", "default")),  # names match case-sensitively
    ],
)
def test_a_tool_reads_only_when_said_so_and_a_word_that_it_writes_wins(
    name: str, declared: Any, read_only: bool | None, expected: tuple[str, str]
) -> None:
    from otel_replay.envelope._effect import ToolEffect, effect_of, use_tool_lists

    use_tool_lists(write=("lookup_*",), read=("read_*", "lookup_both"))
    try:
        assert effect_of(name, declared=declared, read_only=read_only) == ToolEffect(*expected)
    finally:
        use_tool_lists((), ())


def test_a_recorded_write_outweighs_todays_read_unless_it_was_the_default() -> None:
    from otel_replay.envelope._effect import ToolEffect, in_replay

    read = ToolEffect("read", "setting")
    assert in_replay(read, "write", "setting") == ToolEffect("write", "recorded")
    assert in_replay(read, "write", None) == ToolEffect("write", "recorded")  # an old run's
    assert in_replay(read, "write", "default") == read  # nobody said it writes: today decides
    assert in_replay(read, "read", "hint") == read
    assert in_replay(read, None, None) == read
    written = ToolEffect("write", "default")
    assert in_replay(written, "read", "declared") == written  # a recorded read never loosens


def test_mcp_calls_replay_from_the_recording(mcp_run: Recorded) -> None:
    database = mcp_run.database  # type: ignore[attr-defined]
    with otel_replay.replaying(mcp_run.run_id, store=str(mcp_run.store)) as result:
        again = asyncio.run(mcp_agent(database))
    assert [r.model_dump() for r in again] == [r.model_dump() for r in mcp_run.seen]
    assert again[0].structured_content["status"] == "shipped"  # not today's "delivered"
    assert type(again[0]) is type(mcp_run.seen[0])
    assert result.identical, result.first_divergence
    with closing(sqlite3.connect(database)) as db, db:
        assert db.execute("SELECT count(*) FROM refunds").fetchone()[0] == 0


def test_an_mcp_result_flagged_is_error_is_a_failed_step_given_back_as_a_result(
    mcp_run: Recorded,
) -> None:
    # The MCP semantic conventions: a CallToolResult with isError sets error.type tool_error.
    missing = next(s for s in mcp_run.spans if s.attributes["replay.step.index"] == 1)
    assert missing.attributes["error.type"] == "tool_error"
    assert missing.status.status_code is StatusCode.ERROR
    assert missing.attributes["replay.response.complete"] is True
    assert '"isError":true' in missing.attributes["gen_ai.tool.call.result"]
    with Store.open(mcp_run.store) as store:
        assert [s.error_type for s in store.steps(mcp_run.run_id)] == [None, "tool_error", None]
        assert store.run(mcp_run.run_id).error_steps == 1  # `runs` and `show` count it failed
    # Served again as the result it was, not raised (test_mcp_calls_replay_from_the_recording).


def test_a_framework_version_we_do_not_know_is_left_alone(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from otel_replay.envelope import frameworks

    # An mcp whose ClientSession is not the one we know; the other frameworks are as usual.
    monkeypatch.setitem(sys.modules, "mcp.client.session", ModuleType("mcp.client.session"))
    monkeypatch.setattr(frameworks, "_warned", set())  # one warning per process: this one
    RUNS.clear()
    with caplog.at_level("WARNING", logger="otel_replay"):
        frameworks.attach()
        try:
            assert hasattr(vars(BaseTool)["run"], "__wrapped__")  # LangChain is hooked
        finally:
            frameworks.detach()
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [
        "otel-replay: the tools of mcp.client.session are not recorded (its version is not "
        "supported: module 'mcp.client.session' has no attribute 'ClientSession')"
    ]
    assert not hasattr(vars(BaseTool)["run"], "__wrapped__")


# The OpenAI Agents SDK's own helper for calling a function tool, no model: failures.


class OutOfStock(Exception):
    """A tool's own exception: replay raises this very class again."""


def agents_tools() -> list[Any]:
    from agents import function_tool

    @function_tool
    def count_stock(sku: str) -> int:
        """Count an item (fails: the SDK makes its failure the tool's text)."""
        RUNS.append("count_stock")
        raise OutOfStock(f"no {sku} left")

    @function_tool(failure_error_function=None)
    def order_stock(sku: str) -> int:
        """Order an item (fails: the failure propagates)."""
        RUNS.append("order_stock")
        raise OutOfStock(f"cannot order {sku}")

    def told(context: Any, error: Exception) -> str:
        RUNS.append(f"told: {type(error).__name__}: {error}")  # application code: runs again
        return f"the supplier said: {error}"

    @function_tool(failure_error_function=told)
    def ask_supplier(sku: str) -> int:
        """Ask the supplier (fails: the tool's own handler words it)."""
        RUNS.append("ask_supplier")
        raise OutOfStock(f"supplier has no {sku}")

    @function_tool(timeout=0.05)
    async def slow_count(sku: str) -> int:
        """Count slowly (cut off by its timeout: the SDK's message)."""
        RUNS.append("slow_count")
        await asyncio.sleep(5)
        return 1

    @function_tool(timeout=0.05, timeout_behavior="raise_exception")
    async def slow_order(sku: str) -> int:
        """Order slowly (cut off by its timeout: ToolTimeoutError)."""
        RUNS.append("slow_order")
        await asyncio.sleep(5)
        return 1

    return [count_stock, order_stock, ask_supplier, slow_count, slow_order]


def agents_agent() -> list[Any]:
    from agents.exceptions import ToolTimeoutError
    from agents.tool import _invoke_function_tool_with_metadata
    from agents.tool_context import ToolContext

    async def call(tool: Any, arguments: str, call_id: str) -> Any:
        context = ToolContext(
            None, tool_name=tool.name, tool_call_id=call_id, tool_arguments=arguments
        )
        # The runner's own call: the output and whether the SDK made it of a failure.
        invoked = await _invoke_function_tool_with_metadata(
            function_tool=tool, context=context, arguments=arguments
        )
        return (invoked.output, invoked.is_sdk_generated_error)

    count_stock, order_stock, ask_supplier, slow_count, slow_order = agents_tools()
    seen: list[Any] = [asyncio.run(call(count_stock, '{"sku": "KB-101"}', "call_a"))]
    with pytest.raises(OutOfStock, match="cannot order KB-101") as raised:
        asyncio.run(call(order_stock, '{"sku":"KB-101"}', "call_b"))
    seen.append(type(raised.value))
    seen.append(asyncio.run(call(ask_supplier, '{"sku":"KB-101"}', "call_c")))
    seen.append(asyncio.run(call(slow_count, '{"sku":"KB-101"}', "call_d")))
    with pytest.raises(ToolTimeoutError) as timed_out:
        asyncio.run(call(slow_order, '{"sku":"KB-101"}', "call_e"))
    seen.append(str(timed_out.value))
    return seen


def test_agents_sdk_tool_failures_replay_as_they_happened(tmp_path: Path) -> None:
    RUNS.clear()
    recorded = _record(tmp_path / "store", agents_agent)
    assert RUNS == [
        "count_stock",
        "order_stock",
        "ask_supplier",
        "told: OutOfStock: supplier has no KB-101",
        "slow_count",
        "slow_order",
    ]
    assert recorded.seen == [
        ("An error occurred while running the tool. Please try again.", True),
        OutOfStock,
        ("the supplier said: supplier has no KB-101", False),
        ("Tool 'slow_count' timed out after 0.05 seconds.", True),
        "Tool 'slow_order' timed out after 0.05 seconds.",
    ]
    tools = recorded.tools()
    assert [(t["gen_ai.tool.name"], t["gen_ai.tool.call.id"]) for t in tools] == [
        ("count_stock", "call_a"),
        ("order_stock", "call_b"),
        ("ask_supplier", "call_c"),
        ("slow_count", "call_d"),
        ("slow_order", "call_e"),
    ]
    # Each step is the tool's body: what it raised (a failure the SDK handled or not), or
    # that its timeout cut it off; never the text the SDK made of that.
    assert [t.get("error.type") for t in tools] == [
        f"{__name__}.OutOfStock",
        f"{__name__}.OutOfStock",
        f"{__name__}.OutOfStock",
        "asyncio.exceptions.CancelledError",
        "asyncio.exceptions.CancelledError",
    ]
    assert not any("gen_ai.tool.call.result" in t for t in tools)
    RUNS.clear()
    with otel_replay.replaying(recorded.run_id, store=str(recorded.store)) as result:
        started = time.monotonic()
        again = agents_agent()
        took = time.monotonic() - started
    # No body ran; the SDK's handlers did, the tool's own wording included, and the
    # timeouts' outcomes came at once.
    assert RUNS == ["told: OutOfStock: supplier has no KB-101"]
    assert again == recorded.seen
    assert took < 0.5
    assert result.identical, result.first_divergence


def checkpointed_agent() -> list[Any]:
    """A LangGraph graph on an ``InMemorySaver`` whose node calls a tool, invoked twice on one
    thread: the second invoke starts from the first's checkpoint."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    class Stock(TypedDict):
        sku: str
        seen: list[int]

    def count(state: Stock) -> dict[str, Any]:
        found = read_stock.invoke({"sku": state["sku"]})
        return {"seen": [*state.get("seen", []), found["in_stock"]]}

    graph = StateGraph(Stock)
    graph.add_node("count", count)
    graph.add_edge(START, "count")
    app = graph.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "stock-1"}}
    return [app.invoke({"sku": "KB-101"}, config), app.invoke({"sku": "KB-102"}, config)]


def test_a_recording_without_checkpoint_steps_replays_from_a_fresh_saver(tmp_path: Path) -> None:
    """A run that holds no checkpoint steps (as a foreign trace holds none) has its replay
    answer the reads from the replay's own saver (as a fresh in-memory one would), strict,
    identical."""
    from otel_replay.replay.sources import load_run

    RUNS.clear()
    recorded = _record(tmp_path / "store", checkpointed_agent)
    assert recorded.seen[1]["seen"] == [3, 3] and RUNS == ["read_stock"] * 2
    run = load_run(recorded.run_id, store=str(recorded.store))
    assert [s.step.kind for s in run.steps] == ["checkpoint", "tool", "checkpoint", "tool"]
    without = dataclasses.replace(
        run,
        steps=tuple(
            dataclasses.replace(kept, step=dataclasses.replace(kept.step, index=n))
            for n, kept in enumerate(s for s in run.steps if s.step.kind != "checkpoint")
        ),
    )
    for source in (run, without):
        RUNS.clear()
        with otel_replay.replaying(source) as result:
            again = checkpointed_agent()
        assert again == recorded.seen and RUNS == []
        assert result.identical, result.first_divergence


class Item(TypedDict):
    sku: str
    counts: Annotated[list[int], operator.add]


class Order(TypedDict):
    skus: list[str]
    counts: Annotated[list[int], operator.add]
    approved: bool


def fanned_out_agent(checkpoints: Path) -> list[Any]:
    """A LangGraph graph on a ``SqliteSaver`` file that ``Send``s each item to a subgraph
    (whose checkpoint namespace carries a task id LangGraph draws anew each run), then pauses
    on ``interrupt()`` and is resumed: what it returned, without the interrupt's own id."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import START, StateGraph
    from langgraph.types import Command, Send, interrupt

    def count(state: Item) -> dict[str, Any]:
        return {"counts": [read_stock.invoke({"sku": state["sku"]})["in_stock"]]}

    def approve(state: Order) -> dict[str, Any]:
        return {"approved": bool(interrupt({"total": sum(state["counts"])}))}

    item = StateGraph(Item)
    item.add_node("count", count)
    item.add_edge(START, "count")
    order = StateGraph(Order)
    order.add_node("item", item.compile())
    order.add_node("approve", approve)
    order.add_conditional_edges(
        START, lambda state: [Send("item", {"sku": s, "counts": []}) for s in state["skus"]]
    )
    order.add_edge("item", "approve")
    with SqliteSaver.from_conn_string(str(checkpoints)) as saver:
        app = order.compile(checkpointer=saver)
        config: Any = {"configurable": {"thread_id": "order-9"}}
        paused = app.invoke({"skus": ["A", "B", "C"], "counts": [], "approved": False}, config)
        asked = [pause.value for pause in paused.pop("__interrupt__")]
        done = app.invoke(Command(resume=True), config)
        return [paused, asked, done, len(list(app.get_state_history(config)))]


def test_subgraphs_sends_and_interrupts_on_a_kept_checkpoint_file_replay(tmp_path: Path) -> None:
    pytest.importorskip("langgraph.checkpoint.sqlite")
    checkpoints = tmp_path / "checkpoints.sqlite"
    RUNS.clear()
    first, second = (
        _record(tmp_path / "store", lambda: fanned_out_agent(checkpoints)) for _ in range(2)
    )
    assert RUNS == ["read_stock"] * 6
    assert second.seen[1] == [{"total": 18}]  # the second run went on with the first's counts
    before = checkpoints.read_bytes()
    for recorded in (first, second):
        RUNS.clear()
        with otel_replay.replaying(recorded.run_id, store=str(recorded.store)) as result:
            again = fanned_out_agent(checkpoints)
        assert again == recorded.seen and RUNS == []
        assert result.identical, result.first_divergence
    assert checkpoints.read_bytes() == before


def approved_refund_agent(answer: str) -> list[Any]:
    """A LangGraph tool paused by ``interrupt()`` for a human's approval, resumed with
    ``answer``: what the tool's second run returned, as the graph's last message."""
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode
    from langgraph.types import Command, interrupt

    @tool
    def refund(order_id: str) -> str:
        """Refund an order once a human approves."""
        RUNS.append("refund")
        return "refunded" if interrupt({"approve": order_id}) == "yes" else "declined"

    def ask(state: MessagesState) -> dict[str, Any]:
        call = {"name": "refund", "args": {"order_id": "A-1"}, "id": "call_1"}
        return {"messages": [AIMessage("", tool_calls=[call])]}

    graph = StateGraph(MessagesState)
    graph.add_node("ask", ask)
    graph.add_node("tools", ToolNode([refund]))
    graph.add_edge(START, "ask")
    graph.add_edge("ask", "tools")
    app = graph.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "refund-1"}}
    app.invoke({"messages": [("user", "refund A-1")]}, config)
    done = app.invoke(Command(resume=answer), config)
    return [done["messages"][-1].content]


def test_a_graph_resumed_with_another_answer_diverges_at_the_resumed_tool(
    tmp_path: Path,
) -> None:
    """The human's answer is an input of the resumed tool's run: replayed with "no" where
    "yes" was recorded, the replay diverges at that step, naming the answer (it said
    identical, and the program was told the refund went through)."""
    RUNS.clear()
    recorded = _record(tmp_path / "store", lambda: approved_refund_agent("yes"))
    assert recorded.seen == ["refunded"] and RUNS == ["refund", "refund"]
    # The paused call was resumed: a long-lived process keeps no note of it.
    assert not _langchain._paused_calls
    arguments = [json.loads(t["gen_ai.tool.call.arguments"]) for t in recorded.tools()]
    assert arguments == [{"order_id": "A-1"}, {"order_id": "A-1", "otel_replay.resume": ["yes"]}]
    RUNS.clear()
    with otel_replay.replaying(recorded.run_id, store=str(recorded.store)) as result:
        assert approved_refund_agent("yes") == ["refunded"]
    assert result.identical, result.first_divergence
    assert not _langchain._paused_calls
    with otel_replay.replaying(recorded.run_id, store=str(recorded.store)) as result:
        approved_refund_agent("no")
    assert RUNS == []
    divergence = result.first_divergence
    assert divergence is not None and divergence.step == recorded.tools()[1]["replay.step.index"]
    (answer,) = divergence.changes
    assert answer.describe() == 'argument $["otel_replay.resume"][0]: yes → no'
