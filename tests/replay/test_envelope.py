"""Tools, values and checkpoints as steps: recorded through the real pipeline (instrumentor,
SDK tracer provider, ``replay`` exporter, store, plus an in-memory exporter for the spans),
then replayed in-process from the store and from the OTLP spans alone.

The tool bodies count their runs: under replay they must not run at all.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import random
import re
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_replay
from otel_replay._canonical import sha256_tag
from otel_replay.errors import ConfigError, ToolContractError, UnmatchedRequestError
from otel_replay.replay._change import Change
from otel_replay.store import Store
from tests.cli._checks import run_cli
from tests.export._support import Pipeline, echo_client
from tests.replay.conftest import collector_json

RUNS: dict[str, int] = {}
PRICE = 129.0


class OutOfStock(Exception):
    """A tool's own exception: replay must raise this very class again."""


@dataclasses.dataclass
class Order:
    order_id: str
    total: float
    placed: dt.datetime


@otel_replay.tool(effect="read")
def lookup_order(order_id: str, verbose: bool = False) -> Order:
    """Get an order."""
    RUNS["lookup_order"] = RUNS.get("lookup_order", 0) + 1
    if order_id == "A-0000":
        raise OutOfStock(f"order {order_id} is out of stock")
    return Order(order_id, PRICE, dt.datetime(2026, 11, 1, 9, 30, tzinfo=dt.timezone.utc))


@otel_replay.tool(effect="write", name="refund")
async def refund_order(order_id: str, amount: float) -> dict[str, Any]:
    RUNS["refund"] = RUNS.get("refund", 0) + 1
    key = otel_replay.idempotency_key()
    assert key == otel_replay.idempotency_key()  # stable within the call
    return {"refund_id": f"R-{order_id}", "amount": amount, "key": key}


@otel_replay.tool(output_schema={"type": "object", "required": ["ok"]})
def flaky_contract(value: int) -> dict[str, Any]:
    return {"ok": True} if value > 0 else {"nope": value}


def agent() -> dict[str, Any]:
    """Everything the world hands an agent, in one function."""
    seen: dict[str, Any] = {
        "ticket": otel_replay.uuid4(),
        "opened": otel_replay.now(),
        "order": lookup_order("A-1234"),
        "config": otel_replay.side_effect("read_config", lambda path: {"path": path}, "a.toml"),
    }
    with pytest.raises(OutOfStock, match="order A-0000 is out of stock"):
        lookup_order("A-0000")
    seen["refund"] = asyncio.run(refund_order("A-1234", 129.0))
    seen["state"] = otel_replay.checkpoint("done", {"turns": 3})
    return seen


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[tuple[Path, str, dict[str, Any], list[Any]]]:
    """``agent()`` recorded: the store, the run id, what the agent saw, the spans."""
    RUNS.clear()
    memory = InMemorySpanExporter()
    with Pipeline(tmp_path / "store") as pipeline:
        pipeline.provider.add_span_processor(SimpleSpanProcessor(memory))
        seen = agent()
        run_id = pipeline.run.run_id
    assert RUNS == {"lookup_order": 2, "refund": 1}
    RUNS.clear()
    yield tmp_path / "store", run_id, seen, list(memory.get_finished_spans())


def test_a_tool_call_is_a_genai_tool_span_and_a_stored_step(
    recorded: tuple[Path, str, dict[str, Any], list[Any]],
) -> None:
    store, run_id, seen, spans = recorded
    tool_spans = [s for s in spans if s.name == "execute_tool lookup_order"]
    assert len(tool_spans) == 2
    ok, failed = sorted(tool_spans, key=lambda s: s.attributes["replay.step.index"])
    attrs = dict(ok.attributes)
    arguments = b'{"order_id":"A-1234","verbose":false}'
    result = b'{"order_id":"A-1234","total":129.0,"placed":"2026-11-01T09:30:00Z"}'
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    assert attrs["gen_ai.tool.name"] == "lookup_order"
    assert attrs["gen_ai.tool.type"] == "function"
    assert attrs["gen_ai.tool.description"] == "Get an order."
    assert attrs["gen_ai.tool.call.arguments"] == arguments.decode()
    assert attrs["gen_ai.tool.call.result"] == result.decode()
    assert attrs["replay.step.kind"] == "tool" and attrs["replay.tool.effect"] == "read"
    assert attrs["replay.request.hash"] == sha256_tag(arguments)
    assert attrs["replay.response.hash"] == sha256_tag(result)
    assert attrs["replay.tool.schema.version"].startswith("sha256:")
    assert attrs["replay.run.id"] == run_id
    assert failed.attributes["error.type"] == f"{OutOfStock.__module__}.OutOfStock"
    assert failed.status.status_code.name == "ERROR"
    refund = next(s for s in spans if s.name == "execute_tool refund")
    assert refund.attributes["replay.tool.effect"] == "write"
    names = {s.name for s in spans}
    assert {"value uuid4", "value now", "value read_config", "checkpoint done"} <= names
    with Store.open(store, create=False) as opened:
        steps = opened.steps(run_id)
        kinds = [s.kind for s in steps]
        assert kinds == ["value", "value", "tool", "value", "tool", "tool", "checkpoint"]
        tool_step = opened.read_step(steps[2])
    assert (tool_step.method, tool_step.url) == ("TOOL", "tool:lookup_order")
    assert (tool_step.request_body, tool_step.response_body) == (arguments, result)
    assert seen["order"].total == 129.0


@pytest.mark.parametrize("source", ["store", "otlp"])
def test_replay_serves_every_step_without_running_a_tool(
    recorded: tuple[Path, str, dict[str, Any], list[Any]], tmp_path: Path, source: str
) -> None:
    store, run_id, seen, spans = recorded
    ref = run_id
    if source == "otlp":
        ref = str(tmp_path / "trace.json")
        Path(ref).write_text(json.dumps(collector_json(spans)))
    with otel_replay.replaying(ref, store=str(store)) as result:
        again = agent()
    assert RUNS == {}, "a tool body ran under replay"
    assert again == seen
    assert isinstance(again["order"], Order) and isinstance(again["ticket"], uuid.UUID)
    assert again["opened"].tzinfo is not None
    assert result.identical, result.first_divergence
    assert len(result.steps) == 7


def test_changed_arguments_are_a_divergence_and_the_write_still_does_not_run(
    recorded: tuple[Path, str, dict[str, Any], list[Any]],
) -> None:
    store, run_id, seen, _ = recorded
    with otel_replay.replaying(run_id, store=str(store)) as result:
        otel_replay.uuid4()
        otel_replay.now()
        lookup_order("A-1234")
        otel_replay.side_effect("read_config", lambda path: {"path": path}, "a.toml")
        with pytest.raises(OutOfStock):
            lookup_order("A-0000")
        served = asyncio.run(refund_order("A-1234", 5.0))  # not what was recorded
        otel_replay.checkpoint("done", {"turns": 3})
    assert RUNS == {}
    assert served == seen["refund"]
    assert not result.identical
    divergence = result.first_divergence
    assert divergence is not None and divergence.served is not None
    assert divergence.served.endpoint == "tool:refund"
    assert [(c.field, c.recorded, c.replayed) for c in divergence.changes] == [
        ("argument $.amount", "129", "5")  # canonical JSON: 129.0 is 129
    ]


def test_an_unmatched_tool_call_names_the_closest_recorded_and_the_differing_path(
    recorded: tuple[Path, str, dict[str, Any], list[Any]],
) -> None:
    store, run_id, _, _ = recorded
    with otel_replay.replaying(run_id, store=str(store)):
        lookup_order("A-1234")
        with pytest.raises(UnmatchedRequestError) as caught:
            flaky_contract(1)
    message = str(caught.value)
    assert "matches TOOL tool:flaky_contract" in message
    assert RUNS == {}


def test_contract_violations_raise_with_code_and_path(tmp_path: Path) -> None:
    memory = InMemorySpanExporter()
    with Pipeline(tmp_path / "store") as pipeline:
        pipeline.provider.add_span_processor(SimpleSpanProcessor(memory))
        with pytest.raises(ToolContractError) as wrong_in:
            lookup_order(1234)  # type: ignore[arg-type]
        with pytest.raises(ToolContractError) as wrong_out:
            flaky_contract(-1)
    assert (wrong_in.value.code, wrong_in.value.path) == ("invalid_arguments", "$.order_id")
    assert "is not of type 'string'" in wrong_in.value.message
    assert (wrong_out.value.code, wrong_out.value.path) == ("invalid_result", "$")
    assert "'ok' is a required property" in wrong_out.value.message
    assert RUNS.get("lookup_order", 0) == 0  # the body never ran with bad arguments
    steps = [s for s in memory.get_finished_spans() if "replay.step.index" in s.attributes]
    errors = [s.attributes.get("error.type") for s in steps]
    assert errors == ["otel_replay.errors.ToolContractError"] * 2
    # Replayed, the same violations come back from the recording.
    with otel_replay.replaying(pipeline.run.run_id, store=str(tmp_path / "store")) as result:
        with pytest.raises(ToolContractError, match=r"invalid_arguments at \$\.order_id"):
            lookup_order(1234)  # type: ignore[arg-type]
        with pytest.raises(ToolContractError, match=r"invalid_result at \$"):
            flaky_contract(-1)
    assert result.identical


def test_a_schema_that_is_not_json_schema_is_refused_when_declared() -> None:
    with pytest.raises(ConfigError, match="tool 'bad': input_schema is not a valid JSON Schema"):

        @otel_replay.tool(name="bad", input_schema={"type": "objekt"})
        def bad(x: int) -> int:
            return x


def test_the_schema_comes_from_the_type_hints() -> None:
    contract = lookup_order.__otel_replay_contract__  # type: ignore[attr-defined]
    assert contract.input_schema["required"] == ["order_id"]
    assert contract.input_schema["properties"]["order_id"] == {"type": "string"}
    assert contract.output_schema["properties"]["placed"]["format"] == "date-time"
    assert contract.definition()["description"] == "Get an order."


def test_idempotency_key_outside_a_tool_call_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="inside a tool call"):
        otel_replay.idempotency_key()


def test_keys_differ_per_call_and_follow_the_run_and_step(tmp_path: Path) -> None:
    with Pipeline(tmp_path / "store") as pipeline:
        first = asyncio.run(refund_order("A-1", 1.0))
        second = asyncio.run(refund_order("A-1", 1.0))
        run_id = pipeline.run.run_id
    assert first["key"] != second["key"]
    namespace = uuid.UUID("6f1c1f0e-7c2b-4f4e-9a57-0a7e9d5f3b21")
    assert first["key"] == str(uuid.uuid5(namespace, f"{run_id}\0{0}"))
    assert orjson.loads(orjson.dumps(second))["key"] == str(uuid.uuid5(namespace, f"{run_id}\0{1}"))


@otel_replay.tool
def order_with_weather(order_id: str) -> dict[str, Any]:
    """A tool whose body makes steps of its own: an HTTP call, a nested tool, a clock read."""
    RUNS["order_with_weather"] = RUNS.get("order_with_weather", 0) + 1
    with echo_client() as client:
        size = client.post("https://weather.example/v1/chat/completions", content=b"{}").json()
    order = lookup_order(order_id)
    return {"order": order.order_id, "weather": size["id"], "at": otel_replay.now().isoformat()}


def test_steps_made_inside_a_served_tool_are_not_expected_again(tmp_path: Path) -> None:
    RUNS.clear()
    memory = InMemorySpanExporter()
    with Pipeline(tmp_path / "store") as pipeline:
        pipeline.provider.add_span_processor(SimpleSpanProcessor(memory))
        first = order_with_weather("A-1234")
        run_id = pipeline.run.run_id
    finished = memory.get_finished_spans()  # the steps, and the process run's root span
    spans = {s.attributes["replay.step.index"]: s for s in finished if s.parent is not None}
    assert [spans[i].attributes.get("replay.step.within") for i in range(4)] == [None, 0, 0, 0]
    # In a trace viewer the steps a tool made sit under the tool's span.
    tool_span = spans[0].context.span_id
    assert [spans[i].parent.span_id for i in range(1, 4)] == [tool_span] * 3
    with Store.open(tmp_path / "store", create=False) as opened:
        assert [opened.read_step(s).within for s in opened.steps(run_id)] == [None, 0, 0, 0]
    RUNS.clear()
    trace_file = tmp_path / "trace.json"
    trace_file.write_text(json.dumps(collector_json(list(memory.get_finished_spans()))))
    for source in (run_id, str(trace_file)):
        with otel_replay.replaying(source, store=str(tmp_path / "store")) as result:
            assert order_with_weather("A-1234") == first
        assert RUNS == {}
        assert result.identical, result.first_divergence
        assert [s.recorded for s in result.steps] == [0]


def _one_customer(order_id: str, seen: dict[str, Any]) -> None:
    """A thread's share of an agent: its own lookup, then an id and a time of its own."""
    lookup_order(order_id)
    seen[order_id] = (otel_replay.uuid4(), otel_replay.now(), uuid.uuid4())


def _customers_in_turn(order_ids: list[str]) -> dict[str, Any]:
    """Each customer in a thread of its own, one thread after the other, in this order."""
    seen: dict[str, Any] = {}
    for order_id in order_ids:
        worker = threading.Thread(target=_one_customer, args=(order_id, seen))
        worker.start()
        worker.join()
    return seen


def _customers_interleaved(order_ids: list[str]) -> dict[str, Any]:
    """Each customer in a thread of its own, their steps taking turns: every lookup, then
    every customer's values, in this order."""
    seen: dict[str, Any] = {}
    looked = [threading.Event() for _ in order_ids]

    def customer(n: int, order_id: str) -> None:
        if n:
            looked[n - 1].wait()
        lookup_order(order_id)
        looked[n].set()
        looked[-1].wait()
        if n:
            while order_ids[n - 1] not in seen:
                looked[-1].wait(0.01)
        seen[order_id] = (otel_replay.uuid4(), otel_replay.now(), uuid.uuid4())

    workers = [
        threading.Thread(target=customer, args=(n, order_id))
        for n, order_id in enumerate(order_ids)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return seen


@pytest.mark.parametrize("recorded_as", [_customers_in_turn, _customers_interleaved])
def test_each_thread_is_served_the_values_its_own_thread_drew(
    tmp_path: Path, recorded_as: Any
) -> None:
    """Values with no arguments (ids, the clock) match every draw of their name alike: a
    thread that comes first in a replay, though it drew second when recorded, still gets its
    own, not the other thread's (the replay said identical while each customer got the
    other's ticket), whether the threads took turns when recorded or not."""
    with Pipeline(tmp_path / "store") as pipeline:
        seen = recorded_as(["A-1111", "B-2222", "C-3333"])
        run_id = pipeline.run.run_id
    assert len({str(values) for values in seen.values()}) == 3
    RUNS.clear()
    with otel_replay.replaying(run_id, store=str(tmp_path / "store")) as result:
        again = _customers_in_turn(["C-3333", "B-2222", "A-1111"])
    assert again == seen
    assert result.identical, result.first_divergence


@otel_replay.tool(effect="read")
def shuffled(items: list[str]) -> list[str]:
    """A tool whose body draws from the global ``random``."""
    RUNS["shuffled"] = RUNS.get("shuffled", 0) + 1
    picked = list(items)
    random.shuffle(picked)
    return picked


def lucky_agent() -> list[Any]:
    """Draws of the seeded ``random`` after steps whose bodies drew from it too."""
    with otel_replay.run("lucky", seed=7):
        first = shuffled(["a", "b", "c", "d", "e"])
        after_tool = [random.random() for _ in range(3)]
        chosen = otel_replay.side_effect("pick", random.choice, ["x", "y", "z"])
        return [first, after_tool, chosen, random.random(), random.getrandbits(64)]


def test_draws_after_a_served_body_that_drew_are_the_recorded_draws(tmp_path: Path) -> None:
    """A served tool's or side effect's body does not run, so it draws nothing: the program's
    later draws of the seeded generator came out otherwise, the replay saying identical. The
    step records how far its body moved the generator, and a replay moves it as far."""
    RUNS.clear()
    memory = InMemorySpanExporter()
    with Pipeline(tmp_path / "store") as pipeline:
        pipeline.provider.add_span_processor(SimpleSpanProcessor(memory))
        seen = lucky_agent()
    (run_id,) = {s.attributes["replay.run.id"] for s in memory.get_finished_spans()} - {
        pipeline.run.run_id
    }
    draws = {
        s.name: s.attributes.get("replay.random.draws")
        for s in memory.get_finished_spans()
        if "replay.step.index" in (s.attributes or {})
    }
    assert draws["execute_tool shuffled"] > 0 and draws["value pick"] > 0
    assert RUNS == {"shuffled": 1}
    RUNS.clear()
    with otel_replay.replaying(run_id, store=str(tmp_path / "store")) as result:
        again = lucky_agent()
    assert RUNS == {}
    assert again == seen
    assert result.identical, result.first_divergence


_TOGETHER = threading.Barrier(2)


@otel_replay.tool(effect="read")
def dealt(hand: str) -> list[int]:
    """A tool whose body draws from the global ``random`` while another thread's does."""
    _TOGETHER.wait(10)
    cards = random.sample(range(52), 5)
    _TOGETHER.wait(10)
    return cards


def card_table() -> list[Any]:
    """Two hands dealt at once by tools in two threads, then draws of the seeded ``random``."""
    with otel_replay.run("cards", seed=11):
        hands = [threading.Thread(target=dealt, args=(hand,)) for hand in ("north", "south")]
        for hand in hands:
            hand.start()
        for hand in hands:
            hand.join()
        return [random.random(), random.getrandbits(64)]


def test_draws_after_bodies_that_drew_at_once_are_the_recorded_draws(tmp_path: Path) -> None:
    """Each of two bodies running at once saw the other's draws too: counted apart, the
    replay drew them twice, and the program's later draws were not the recorded ones."""
    with Pipeline(tmp_path / "store") as pipeline:
        seen = card_table()
        run_id = pipeline.run.run_id
    with Store.open(tmp_path / "store", create=False) as store:
        (run,) = [r for r in store.runs() if r.run_id != run_id and r.step_count == 2]
    with otel_replay.replaying(run.run_id, store=str(tmp_path / "store")) as result:
        _TOGETHER.reset()
        again = card_table()
    assert again == seen
    assert result.identical, result.first_divergence


def test_show_lists_tools_values_and_checkpoints(
    recorded: tuple[Path, str, dict[str, Any], list[Any]],
) -> None:
    store, run_id, _, _ = recorded
    shown = run_cli("show", run_id, "--store", str(store), env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.stderr
    rows = shown.stdout.splitlines()[3:]
    assert re.search(
        r"^2\s+tool\s+lookup_order \(read: declared\)\s+\{\"order_id\":\"A-1234\"", rows[2]
    )
    assert rows[2].rstrip().endswith(" ok")
    assert re.search(r"^3\s+value\s+read_config\s", rows[3])
    assert rows[4].rstrip().endswith("OutOfStock")
    assert re.search(r"^5\s+tool\s+refund \(write: declared\)", rows[5])
    assert re.search(r"^6\s+checkpoint\s+done\s+\{\}\s+\{\"turns\":3\}", rows[6])
    listed = json.loads(run_cli("show", run_id, "--store", str(store), "--json").stdout)
    tools = [step for step in listed["steps"] if step["kind"] == "tool"]
    assert [(step.get("effect"), step.get("effect_reason")) for step in tools] == [
        ("read", "declared"),
        ("read", "declared"),
        ("write", "declared"),
    ]


def test_live_read_tools_run_and_write_tools_still_do_not(
    recorded: tuple[Path, str, dict[str, Any], list[Any]],
) -> None:
    store, run_id, seen, _ = recorded
    with otel_replay.replaying(run_id, store=str(store), live_tools="read") as result:
        again = agent()
    assert RUNS == {"lookup_order": 2}  # read tools ran live; the write tool did not
    assert again["refund"] == seen["refund"]
    assert result.identical, result.first_divergence
    # Each live call is marked live and compared with its recorded answer (here: the same).
    assert [(s.live, s.identical) for s in result.tool_calls("lookup_order")] == [(True, True)] * 2
    assert [s.live for s in result.tool_calls("refund")] == [False]


@otel_replay.tool
def brand_new(order_id: str) -> str:
    """A tool the recording never saw, declared nowhere: a write."""
    RUNS["brand_new"] = RUNS.get("brand_new", 0) + 1
    return order_id


@otel_replay.tool(effect="read")
def brand_new_read(order_id: str) -> str:
    RUNS["brand_new_read"] = RUNS.get("brand_new_read", 0) + 1
    return order_id


def test_a_tool_the_recording_never_saw_runs_in_a_lax_replay_only_if_declared_a_read(
    recorded: tuple[Path, str, dict[str, Any], list[Any]],
) -> None:
    store, run_id, _, _ = recorded
    with otel_replay.replaying(run_id, store=str(store), strict=False) as result:
        agent()
        with pytest.raises(UnmatchedRequestError) as refused:
            brand_new("A-1")
        assert brand_new_read("A-2") == "A-2"
    # The step is the call's in the replay's own run (the process's, in pytest).
    assert re.fullmatch(
        r"otel-replay: tool 'brand_new' \(step \d+\) has no recorded call to serve, and a write "
        r"tool never runs in replay or a fork without --allow-writes \(write: declared nowhere; "
        r"OTEL_REPLAY_READ_TOOLS names the tools that only read\)",
        str(refused.value),
    )
    assert RUNS == {"brand_new_read": 1}
    (new,), (read,) = result.tool_calls("brand_new"), result.tool_calls("brand_new_read")
    assert (new.recorded, new.live, new.effect, new.effect_reason) == (
        None,
        False,
        "write",
        "default",
    )
    assert (read.recorded, read.live, read.effect, read.effect_reason) == (
        None,
        True,
        "read",
        "declared",
    )


def test_a_live_read_tool_that_answers_otherwise_diverges_at_its_own_step(
    recorded: tuple[Path, str, dict[str, Any], list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, run_id, _, _ = recorded
    monkeypatch.setattr(sys.modules[__name__], "PRICE", 139.0)  # today's data
    with otel_replay.replaying(run_id, store=str(store), live_tools="read") as result:
        agent()
    first = result.first_divergence
    assert first is not None and first.kind == "changed" and first.step == 2
    assert first.describe() == "step 2 ran live and differs from the recording"
    assert first.changes == (Change("result $.total", "changed", "129.0", "139.0"),)
    changed, raised = result.tool_calls("lookup_order")
    assert changed.live and changed.recorded == 2 and not changed.identical
    assert raised.live and raised.identical  # raised OutOfStock again, as recorded
    assert result.outcome == "diverged"


@otel_replay.tool(effect="read")
def echo_text(text: str) -> str:
    RUNS["echo_text"] = RUNS.get("echo_text", 0) + 1
    return text


def test_a_lone_surrogate_in_a_tool_call_is_recorded_and_replayed(tmp_path: Path) -> None:
    """JSON may escape a lone surrogate, and a model's tool arguments can hold one: the tool
    runs as it would unrecorded, and its step keeps and serves back the very string."""
    half = json.loads('"half an emoji \\ud83d"')
    RUNS.clear()
    with Pipeline(tmp_path / "store") as pipeline:
        seen = echo_text(half)
        drawn = otel_replay.side_effect("draw", lambda: half)
        run_id = pipeline.run.run_id
    assert seen == drawn == half and RUNS == {"echo_text": 1}
    with Store.open(tmp_path / "store", create=False) as opened:
        tool = opened.read_step(opened.steps(run_id)[0])
    assert tool.request_body == b'{"text":"half an emoji \\ud83d"}'
    RUNS.clear()
    with otel_replay.replaying(run_id, store=str(tmp_path / "store")) as result:
        again = (echo_text(half), otel_replay.side_effect("draw", lambda: "live"))
    assert again == (seen, half) and RUNS == {}
    assert result.identical, result.first_divergence
