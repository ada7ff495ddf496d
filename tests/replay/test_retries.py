"""Retry budgets (``@otel_replay.tool(retries=Budget(...))``): each attempt a step, recorded
through the real pipeline (instrumentor, SDK tracer provider, ``replay`` exporter, store) and
replayed in-process with its back-offs skipped; the overflow error and its label; the circuit
breaker opening, refusing and closing, and replayed from the recording.

The tool bodies count their runs: under replay they must not run at all. Each test has tools
of its own names: circuits are per tool name and per process.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_replay
from otel_replay import Budget, CircuitOpenError, ConfigError, RetryOverflowError
from otel_replay.store import Store
from tests.export._support import INSTRUMENT, ROOT, Pipeline, subprocess_env

RUNS: list[str] = []
OVERFLOW = {"replay.failure.category": "retry_overflow", "replay.failure.severity": "error"}


@dataclass
class Recorded:
    store: Path
    run_id: str
    seen: Any
    spans: list[ReadableSpan]

    def tool_spans(self) -> list[dict[str, Any]]:
        """The attributes of the tool steps' spans, in step order."""
        found = [dict(s.attributes or {}) for s in self.spans if s.name.startswith("execute_tool")]
        return sorted(found, key=lambda attrs: attrs["replay.step.index"])


def record(path: Path, agent: Callable[[], Any]) -> Recorded:
    RUNS.clear()
    memory = InMemorySpanExporter()
    with Pipeline(path) as pipeline:
        pipeline.provider.add_span_processor(SimpleSpanProcessor(memory))
        seen = agent()
        run_id = pipeline.run.run_id
    return Recorded(path, run_id, seen, list(memory.get_finished_spans()))


def _labels(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attrs.items() if k.startswith("replay.failure.")}


# A tool that fails twice, then answers. Recorded with short back-offs; replayed by the same
# tool (the same name) with back-offs of 30 s and 60 s: waited, they would fail the test.
FAILS = 2
FAST = Budget(max_attempts=3, backoff=0.2, multiplier=2.0)
SLOW = Budget(max_attempts=3, backoff=30.0, max_backoff=60.0)


def _forecast(city: str) -> dict[str, Any]:
    RUNS.append(otel_replay.idempotency_key())
    if len(RUNS) <= FAILS:
        raise ConnectionError(f"weather service refused attempt {len(RUNS)}")
    return {"city": city, "forecast": "rain"}


async def _forecast_async(city: str) -> dict[str, Any]:
    await asyncio.sleep(0)
    return _forecast(city)


FORECAST = {
    ("sync", "fast"): otel_replay.tool(name="forecast", effect="read", retries=FAST)(_forecast),
    ("sync", "slow"): otel_replay.tool(name="forecast", effect="read", retries=SLOW)(_forecast),
    ("async", "fast"): otel_replay.tool(name="forecast", effect="read", retries=FAST)(
        _forecast_async
    ),
    ("async", "slow"): otel_replay.tool(name="forecast", effect="read", retries=SLOW)(
        _forecast_async
    ),
}


def _ask_for_forecast(client: httpx.Client) -> None:
    """A model response asking for ``forecast(city="Oslo")`` (call ``call_7``), over HTTP."""
    client.post(
        "https://llm.test/v1/chat/completions",
        json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Oslo?"}]},
    )


def _model(request: httpx.Request) -> httpx.Response:
    call = {"name": "forecast", "arguments": json.dumps({"city": "Oslo"})}
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_7", "type": "function", "function": call}],
    }
    body = {
        "id": "chatcmpl-7",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
    }
    return httpx.Response(200, json=body)


def forecast_agent(mode: str, speed: str) -> dict[str, Any]:
    tool = FORECAST[mode, speed]
    with httpx.Client(transport=httpx.MockTransport(_model)) as client:
        _ask_for_forecast(client)
    if mode == "async":
        return asyncio.run(tool("Oslo"))  # type: ignore[no-any-return]
    return tool("Oslo")  # type: ignore[no-any-return]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_each_attempt_is_a_step_and_a_replay_skips_the_backoffs(tmp_path: Path, mode: str) -> None:
    recorded = record(tmp_path / "store", lambda: forecast_agent(mode, "fast"))
    assert recorded.seen == {"city": "Oslo", "forecast": "rain"}
    assert len(RUNS) == 3 and len(set(RUNS)) == 1, "one idempotency key for every attempt"
    tools = recorded.tool_spans()
    assert [(t["replay.tool.attempt"], t.get("error.type")) for t in tools] == [
        (1, "ConnectionError"),
        (2, "ConnectionError"),
        (3, None),
    ]
    # Every attempt answers the model's one tool call; none is labelled a failure.
    assert {t.get("gen_ai.tool.call.id") for t in tools} == {"call_7"}
    assert not any(_labels(t) for t in tools)
    with Store.open(recorded.store, create=False) as store:
        steps = [s for s in store.steps(recorded.run_id) if s.kind == "tool"]
    assert [s.error_type for s in steps] == ["ConnectionError", "ConnectionError", None]
    # The back-offs were waited when recorded: 0.2 s, then 0.4 s.
    waits = [(b.start_ns - a.end_ns) / 1e9 for a, b in itertools.pairwise(steps)]
    assert waits[0] >= 0.2 and waits[1] >= 0.4, waits

    RUNS.clear()
    started = time.monotonic()
    with otel_replay.replaying(recorded.run_id, store=str(recorded.store)) as result:
        inside = time.monotonic()
        again = forecast_agent(mode, "slow")  # back-offs of 30 s, then 60 s
        waited = time.monotonic() - inside  # the application's clock: moved by them
    took = time.monotonic() - started  # the real one
    assert RUNS == [], "a tool body ran under replay"
    assert again == recorded.seen
    assert result.identical, result.first_divergence
    assert len(result.tool_calls(tools[0]["gen_ai.tool.name"])) == 3
    assert waited >= 90, "the skipped back-offs move the application's clocks on"
    assert took < 30, f"the replay waited the back-offs ({took:.0f} s)"


DOWN = Budget(max_attempts=3, backoff=0.01, retry_on=(ConnectionError, TimeoutError))


@otel_replay.tool(effect="read", retries=DOWN)
def stock_level(sku: str) -> int:
    RUNS.append(sku)
    if sku == "broken":
        raise KeyError(sku)  # not in retry_on: raised at once
    raise TimeoutError(f"warehouse did not answer for {sku}")


def overflow_agent() -> None:
    with otel_replay.run("stock-check"):
        with pytest.raises(KeyError):
            stock_level("broken")
        with pytest.raises(otel_replay.ToolContractError):
            stock_level(123)  # type: ignore[arg-type]
        stock_level("KB-101")


def test_past_the_budget_a_named_error_fails_the_run_labelled_retry_overflow(
    tmp_path: Path,
) -> None:
    with pytest.raises(RetryOverflowError) as raised:
        record(tmp_path / "store", overflow_agent)
    error = raised.value
    assert str(error) == (
        "tool 'stock_level' failed all 3 attempts its retry budget allows; "
        "last error: TimeoutError: warehouse did not answer for KB-101"
    )
    assert (error.tool, error.attempts) == ("stock_level", 3)
    assert isinstance(error.__cause__, TimeoutError)
    # The KeyError and the contract violation (the program's bug) were not retried.
    assert RUNS == ["broken", "KB-101", "KB-101", "KB-101"]
    with Store.open(tmp_path / "store", create=False) as store:
        (run,) = store.runs()
        spans = store.spans(run.run_id)
    tools = sorted(
        (s["attributes"] for s in spans if s["name"] == "execute_tool stock_level"),
        key=lambda attrs: attrs["replay.step.index"],
    )
    assert [(t["replay.tool.attempt"], t["error.type"], _labels(t)) for t in tools] == [
        (1, "KeyError", {}),
        (1, "otel_replay.errors.ToolContractError", {}),
        (1, "TimeoutError", {}),
        (2, "TimeoutError", {}),
        (3, "TimeoutError", OVERFLOW),  # the attempt past which the budget ran out
    ]
    (agent,) = [s["attributes"] for s in spans if s["name"] == "invoke_agent stock-check"]
    assert agent["error.type"] == "otel_replay.errors.RetryOverflowError"
    assert _labels(agent) == {
        "replay.failure.category": "retry_overflow",
        "replay.failure.severity": "critical",
    }

    RUNS.clear()
    with (
        pytest.raises(RetryOverflowError) as again,
        otel_replay.replaying(run.run_id, store=str(tmp_path / "store")) as result,
    ):
        overflow_agent()
    assert RUNS == []
    assert str(again.value) == str(error)
    assert isinstance(again.value.__cause__, TimeoutError)
    assert result.identical, result.first_divergence


# The circuit: two attempts a call; three failures in a row open it for two seconds.
CIRCUIT = Budget(max_attempts=2, backoff=0, circuit_open_after=3, circuit_cooldown=2.0)
WAREHOUSE = {"up": False}


@otel_replay.tool(effect="read", retries=CIRCUIT)
def inventory(sku: str) -> int:
    RUNS.append(sku)
    if not WAREHOUSE["up"]:
        raise ConnectionError("warehouse down")
    return 7


def circuit_agent() -> list[str]:
    seen: list[str] = []

    def ask(sku: str) -> None:
        try:
            seen.append(str(inventory(sku)))
        except RetryOverflowError as exc:
            seen.append(f"{type(exc).__name__}: {exc}")

    WAREHOUSE["up"] = False
    ask("A")  # fails twice: past the budget
    ask("B")  # fails once (the third in a row: the circuit opens), then is refused
    ask("C")  # refused at once
    WAREHOUSE["up"] = True
    time.sleep(CIRCUIT.circuit_cooldown)  # skipped under replay
    ask("D")  # the trial call: it answers, the circuit closes
    ask("E")
    return seen


def test_the_circuit_opens_fails_fast_and_closes_and_a_replay_repeats_it(
    tmp_path: Path,
) -> None:
    recorded = record(tmp_path / "store", circuit_agent)
    assert RUNS == ["A", "A", "B", "D", "E"], "a refused call does not run the tool"
    refused = "CircuitOpenError: tool 'inventory' is failing fast: its circuit opened after 3"
    assert recorded.seen[0] == (
        "RetryOverflowError: tool 'inventory' failed all 2 attempts its retry budget allows; "
        "last error: ConnectionError: warehouse down"
    )
    assert recorded.seen[1].startswith(refused) and recorded.seen[2].startswith(refused)
    assert recorded.seen[3:] == ["7", "7"]
    tools = recorded.tool_spans()
    assert [
        (t["gen_ai.tool.call.arguments"], t["replay.tool.attempt"], t.get("error.type"))
        for t in tools
    ] == [
        ('{"sku":"A"}', 1, "ConnectionError"),
        ('{"sku":"A"}', 2, "ConnectionError"),
        ('{"sku":"B"}', 1, "ConnectionError"),
        ('{"sku":"B"}', 2, "otel_replay.errors.CircuitOpenError"),  # a refusal is a step
        ('{"sku":"C"}', 1, "otel_replay.errors.CircuitOpenError"),
        ('{"sku":"D"}', 1, None),
        ('{"sku":"E"}', 1, None),
    ]
    assert [bool(_labels(t)) for t in tools] == [False, True, False, True, True, False, False]

    # The process's circuit is open now (three failures, outside any replay)...
    WAREHOUSE["up"] = False
    for _ in range(2):
        with pytest.raises(RetryOverflowError):
            inventory("Z")
    with pytest.raises(CircuitOpenError):
        inventory("Z")
    # ...and two replays in a row take their decisions from the recording, not from it,
    # nor from each other: no cool-down waited, no body run.
    for _ in range(2):
        RUNS.clear()
        started = time.monotonic()
        with otel_replay.replaying(recorded.run_id, store=str(recorded.store)) as result:
            again = circuit_agent()
        assert time.monotonic() - started < CIRCUIT.circuit_cooldown
        assert RUNS == []
        assert again == recorded.seen
        assert result.identical, result.first_divergence
    WAREHOUSE["up"] = True
    with pytest.raises(CircuitOpenError):
        inventory("Z")  # the process's circuit, still open


PROBE = Budget(max_attempts=1, circuit_open_after=2, circuit_cooldown=1.0, retry_on=OSError)
ANSWER = threading.Event()


@otel_replay.tool(effect="read", retries=PROBE)
def probe(how: str) -> str:
    RUNS.append(how)
    if how == "down":
        raise ConnectionError("down")
    if how == "bad":
        raise ValueError("not a transient failure")
    if how == "slow":
        ANSWER.wait(timeout=30)
    return "ok"


def _outcome(how: str) -> str:
    try:
        return probe(how)
    except Exception as exc:
        return type(exc).__name__


def test_a_failed_trial_opens_the_circuit_again_and_one_trial_runs_at_a_time() -> None:
    """Not recorded: the circuit of a process that only runs its tools."""
    RUNS.clear()
    # An exception the budget does not retry is an answer: the count starts again after it.
    assert [_outcome(h) for h in ("down", "bad", "down", "down", "ok")] == [
        "RetryOverflowError",
        "ValueError",
        "RetryOverflowError",
        "RetryOverflowError",  # the second failure in a row: open
        "CircuitOpenError",
    ]
    time.sleep(PROBE.circuit_cooldown)
    assert [_outcome(h) for h in ("down", "ok")] == ["RetryOverflowError", "CircuitOpenError"]
    time.sleep(PROBE.circuit_cooldown)
    trial = threading.Thread(target=lambda: RUNS.append(_outcome("slow")))
    trial.start()
    while "slow" not in RUNS:
        time.sleep(0.01)
    assert _outcome("ok") == "CircuitOpenError"  # while the trial runs
    ANSWER.set()
    trial.join()
    assert _outcome("ok") == "ok"  # the trial answered: closed
    assert RUNS == ["down", "bad", "down", "down", "down", "slow", "ok", "ok"]


STALLS = Budget(max_attempts=1, circuit_open_after=2, circuit_cooldown=60)


@otel_replay.tool(effect="read", retries=STALLS)
async def stalled(how: str) -> str:
    RUNS.append(how)
    if how == "down":
        raise ConnectionError("down")
    await asyncio.sleep(30)
    return how


def test_a_cancelled_attempt_is_not_retried_nor_counted() -> None:
    async def calls() -> list[str]:
        seen = []
        for how in ("down", "stall", "down", "down"):
            task = asyncio.create_task(stalled(how))
            if how == "stall":
                for _ in range(500):  # until the attempt runs (at most 5 s)
                    await asyncio.sleep(0.01)
                    if RUNS[-1] == "stall":
                        break
                task.cancel()
            try:
                seen.append(await task)
            except (asyncio.CancelledError, RetryOverflowError) as exc:
                seen.append(type(exc).__name__)
        return seen

    RUNS.clear()
    # Two failures in a row, the cancellation between them counted for nothing: open.
    assert asyncio.run(calls()) == [
        "RetryOverflowError",
        "CancelledError",  # not retried
        "RetryOverflowError",
        "CircuitOpenError",
    ]
    assert RUNS == ["down", "stall", "down"]


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"max_attempts": 0}, "max_attempts=0"),
        ({"max_attempts": 2.5}, "max_attempts=2.5"),
        ({"max_attempts": True}, "max_attempts=True"),
        ({"backoff": -1}, "backoff=-1"),
        ({"backoff": float("nan")}, "backoff=nan"),
        ({"backoff": "1s"}, "backoff='1s'"),
        ({"backoff": 5, "max_backoff": 2}, "max_backoff=2"),
        ({"multiplier": 0.5}, "multiplier=0.5"),
        ({"jitter": 1.5}, "jitter=1.5"),
        ({"retry_on": (ConnectionError, "TimeoutError")}, "'TimeoutError'"),
        ({"retry_on": KeyboardInterrupt}, "KeyboardInterrupt"),
        ({"retry_on": otel_replay.ToolContractError}, "ToolContractError"),
        ({"circuit_open_after": 0}, "circuit_open_after=0"),
        ({"circuit_cooldown": float("inf")}, "circuit_cooldown=inf"),
    ],
)
def test_a_budget_that_cannot_be_used_is_one_clear_error(given: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigError) as raised:
        Budget(**given)
    assert isinstance(raised.value, ValueError)
    assert str(raised.value).startswith("Budget: ") and named in str(raised.value)
    assert "\n" not in str(raised.value)


def test_retries_take_a_budget() -> None:
    with pytest.raises(ConfigError, match=r"tool\(retries=3\): give a Budget"):
        otel_replay.tool(retries=3)  # type: ignore[arg-type]
    assert Budget(retry_on=TimeoutError).retry_on == (TimeoutError,)


def test_the_waits_grow_to_their_cap_and_jitter_only_shortens_them() -> None:
    budget = Budget(max_attempts=10, backoff=0.5, multiplier=3.0, max_backoff=10.0)
    assert [budget.wait(n) for n in range(1, 6)] == [0.5, 1.5, 4.5, 10.0, 10.0]
    assert Budget(max_attempts=5000).wait(4999) == 30.0  # no overflow far out
    jittered = Budget(backoff=8.0, max_backoff=8.0, jitter=0.5)
    assert all(4.0 <= jittered.wait(1) <= 8.0 for _ in range(200))


def test_a_framework_tool_made_of_a_budgeted_function_retries_as_one(tmp_path: Path) -> None:
    from langchain_core.tools import tool as langchain_tool

    tries: list[int] = []

    @otel_replay.tool(effect="read", retries=Budget(backoff=0.01))
    def shipping_quote(order_id: str) -> float:
        """Quote shipping for an order."""
        tries.append(1)
        if len(tries) < 2:
            raise ConnectionError("carrier API refused")
        return 4.5

    quote = langchain_tool(shipping_quote)
    recorded = record(tmp_path / "store", lambda: quote.invoke({"order_id": "A-1"}))
    assert recorded.seen == 4.5
    tools = recorded.tool_spans()
    assert [(t["gen_ai.tool.name"], t["replay.tool.attempt"]) for t in tools] == [
        ("shipping_quote", 1),
        ("shipping_quote", 2),
    ]
    tries.clear()
    with otel_replay.replaying(recorded.run_id, store=str(recorded.store)) as result:
        assert quote.invoke({"order_id": "A-1"}) == 4.5
    assert tries == []
    assert result.identical, result.first_divergence


AGENT = Path(__file__).with_name("_retry_agent.py")
CLI = Path(sys.executable).parent / "otel-replay"


@dataclass(frozen=True)
class Overflowed:
    store: Path
    error: str
    """The last line of the recording's stderr: the overflow error."""


@pytest.fixture(scope="module")
def overflowed(tmp_path_factory: pytest.TempPathFactory) -> Overflowed:
    """``_retry_agent`` recorded as run ``r_retry``: three attempts, each refused."""
    store = tmp_path_factory.mktemp("retry") / "store"
    recorded = subprocess.run(
        [str(INSTRUMENT), sys.executable, str(AGENT)],
        env=subprocess_env(store, OTEL_REPLAY_RUN_ID="r_retry", RETRY_BACKOFF="0.05"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert recorded.returncode == 1, recorded.stderr
    return Overflowed(store, recorded.stderr.strip().splitlines()[-1])


def replay_retry_agent(store: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """``otel-replay replay r_retry [flags]`` of ``_retry_agent``, its back-offs 30 s then 60
    s: waited, they would pass the timeout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    verb = [str(CLI), "replay", "r_retry", "--store", str(store), *flags]
    return subprocess.run(
        [*verb, "--", sys.executable, str(AGENT)],
        env=env | {"PYTHONPATH": str(ROOT), "RETRY_BACKOFF": "30", "COLUMNS": "400"},
        capture_output=True,
        text=True,
        timeout=75,
        check=False,
    )


@pytest.mark.subprocess
def test_the_replay_verb_reproduces_the_overflow_without_waiting(overflowed: Overflowed) -> None:
    error = overflowed.error
    assert error == (
        "otel_replay.errors.RetryOverflowError: tool 'fetch_forecast' failed all 3 attempts "
        "its retry budget allows; last error: ConnectionError: weather service refused the "
        "forecast for Oslo"
    )
    with Store.open(overflowed.store, create=False) as opened:
        spans = opened.spans("r_retry")
    (run,) = [s["attributes"] for s in spans if s["name"] == "invoke_agent forecaster"]
    assert run["replay.failure.category"] == "retry_overflow"

    replayed = replay_retry_agent(overflowed.store)
    assert replayed.returncode == 3, replayed.stdout + replayed.stderr  # the agent failed
    assert replayed.stderr.strip().splitlines()[-1] == error
    assert "identical steps, but the agent failed" in replayed.stdout
    assert "3 requests, 3 served from 3 recorded steps" in replayed.stdout


@pytest.mark.subprocess
def test_a_fault_injected_at_an_attempt_takes_one_of_the_budget_and_says_so(
    overflowed: Overflowed,
) -> None:
    """The fault is an attempt more than the recording made: the retries get the recorded
    attempts one later each, and the budget is spent before the last one, which the replay
    names as never requested, and why."""
    replayed = replay_retry_agent(overflowed.store, "--inject", "0=tool:error")
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    out = replayed.stdout
    assert (
        "diverged — recorded step 2 was never requested: the fault injected at step 0 took an "
        "attempt of its call's retry budget"
    ) in out
    assert (
        "inject tool:error at step 0 (tool:fetch_forecast): request 0 got it, its retry "
        "(request 1) the recorded answer; the fault took attempt 1 of the tool's retry "
        "budget, an attempt more than the recording made"
    ) in out
    assert "recorded steps never requested: 2 (tool:fetch_forecast)\n" in out
    assert "failed all 3 attempts" in replayed.stderr.strip().splitlines()[-1]
