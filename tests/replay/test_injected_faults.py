"""``inject``: a fault served or raised at step N through the transport that made the call,
the program's retry then served step N's recorded answer.

One recording (``_faults_agent``: the real openai and anthropic SDKs, raw httpx sync and async,
aiohttp, requests, a tool) replayed in-process with one fault at a time: the SDKs retry on
their own, the agent retries everything else once, and the replay ends identical with both
attempts of step N among its requests, the first one marked as the fault.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

import otel_replay
from examples.standin import StandIn
from otel_replay import attributes as A
from otel_replay._canonical import sha256_tag
from otel_replay.errors import InjectedToolError
from otel_replay.replay import RecordedStep, ReplayResult, Run, ServedStep
from otel_replay.replay.sources import load_run
from tests.export._support import Pipeline, subprocess_env
from tests.replay import _faults_agent
from tests.replay._faults_agent import agent
from tests.replay._recorded import recorded_step
from tests.replay.conftest import run_pytest


@dataclass(frozen=True)
class Recorded:
    store: str
    run_id: str
    base: str
    seen: dict[str, Any]
    steps: dict[str, int]
    """The index of each call's step, by a short name."""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    store = tmp_path_factory.mktemp("faults") / "store"
    with StandIn(event_delay=0.001) as standin, Pipeline(store) as pipeline:
        seen = agent(standin.base_url)
        run_id = pipeline.run.run_id
        base = standin.base_url
    assert seen["failures"] == []
    run = load_run(run_id, store=str(store))
    names = {
        ("openai.chat_completions", 0): "openai",
        ("anthropic.messages", 0): "anthropic",
        ("GET /tools/orders/A-1234", 0): "httpx",
        ("openai.chat_completions", 1): "httpx-stream",
        ("openai.chat_completions", 2): "openai-async-stream",
        ("GET /tools/orders/A-2000", 0): "httpx-async",
        ("GET /tools/orders/A-3000", 0): "aiohttp",
        ("openai.chat_completions", 3): "aiohttp-stream",
        ("GET /tools/orders/A-4000", 0): "requests",
        ("tool:lookup", 0): "tool",
    }
    counts: dict[str, int] = {}
    steps: dict[str, int] = {}
    for recorded in run.steps:
        nth = counts.get(recorded.endpoint, 0)
        counts[recorded.endpoint] = nth + 1
        steps[names[(recorded.endpoint, nth)]] = recorded.step.index
    assert len(steps) == len(names)
    yield Recorded(str(store), run_id, base, seen, steps)


CASES = [
    # (call, fault, what the agent caught before its retry: nothing when the SDK retried)
    ("openai", "http:429", None),
    ("openai", "timeout", None),
    ("openai", "disconnect", None),
    ("anthropic", "http:429", None),
    ("anthropic", "stream-cut:60", "httpx2.RemoteProtocolError"),
    ("httpx", "http:503", "httpx.HTTPStatusError"),
    ("httpx", "timeout", "httpx.ReadTimeout"),
    ("httpx", "disconnect", "httpx.RemoteProtocolError"),
    ("httpx-stream", "stream-cut:40", "httpx.RemoteProtocolError"),
    ("openai-async-stream", "http:500", None),
    ("openai-async-stream", "stream-cut:300", "openai.APIConnectionError"),
    ("httpx-async", "timeout", "httpx.ReadTimeout"),
    ("aiohttp", "http:429", "aiohttp.client_exceptions.ClientResponseError"),
    ("aiohttp", "timeout", "aiohttp.client_exceptions.ServerTimeoutError"),
    ("aiohttp", "disconnect", None),  # aiohttp itself sends an idempotent request again
    ("aiohttp-stream", "stream-cut:40", "aiohttp.client_exceptions.ClientPayloadError"),
    ("requests", "timeout", "requests.exceptions.ReadTimeout"),
    ("requests", "disconnect", "requests.exceptions.ConnectionError"),
    ("requests", "stream-cut:20", "requests.exceptions.ChunkedEncodingError"),
    ("tool", "tool:error:out of stock", "otel_replay.errors.InjectedToolError"),
]


@pytest.mark.parametrize(("call", "fault", "caught"), CASES, ids=[f"{c}-{f}" for c, f, _ in CASES])
def test_the_fault_is_met_where_the_call_was_made_and_the_retry_is_served(
    recorded: Recorded, call: str, fault: str, caught: str | None
) -> None:
    index = recorded.steps[call]
    with otel_replay.replaying(
        recorded.run_id, store=recorded.store, inject={index: fault}
    ) as result:
        again = agent(recorded.base)
    assert again["outputs"] == recorded.seen["outputs"]
    assert again["failures"] == ([caught] if caught else [])
    assert result.identical, result.first_divergence
    attempts = [s for s in result.steps if s.recorded == index]
    assert [s.forked for s in attempts] == [f"inject {fault}", None]
    assert len(result.steps) == len(recorded.steps) + 1
    (injected,) = result.faults
    assert (injected.step, injected.request, injected.retry) == (
        index,
        attempts[0].order,
        attempts[1].order,
    )


def test_a_fault_the_program_does_not_get_over_is_its_failure_not_an_unused_step(
    recorded: Recorded,
) -> None:
    """The step was asked for and got the fault: the program failing on it is the outcome,
    not a step "never requested"."""
    index = recorded.steps["tool"]
    with (
        pytest.raises(InjectedToolError, match=f"at step {index}"),
        otel_replay.replaying(
            recorded.run_id, store=recorded.store, inject={index: "tool:error"}
        ) as result,
    ):
        agent(recorded.base, retry=False)
    assert result.unused == []
    assert result.outcome == "agent_failed", result.first_divergence
    (injected,) = result.faults
    assert injected.retry is None
    assert injected.describe() == (
        f"inject tool:error at step {index} (tool:lookup): request {len(recorded.steps) - 1} "
        "got it; the program never asked for the recorded answer again"
    )


def _met_the_fault(url: str) -> None:
    try:
        httpx.get(url)
    except httpx.ReadTimeout:
        os._exit(0)
    os._exit(1)


@pytest.mark.subprocess
def test_a_fault_fires_once_in_the_whole_program(recorded: Recorded) -> None:
    """A worker process meets the fault; the program's retry in its parent is served."""
    index = recorded.steps["httpx"]
    url = f"{recorded.base}/tools/orders/A-1234"
    with otel_replay.replaying(
        recorded.run_id, store=recorded.store, inject={index: "timeout"}
    ) as result:
        worker = multiprocessing.get_context("fork").Process(target=_met_the_fault, args=(url,))
        worker.start()
        worker.join()
        assert worker.exitcode == 0
        assert httpx.get(url).json() == recorded.seen["outputs"][2]
    attempts = [s.forked for s in result.steps if s.recorded == index]
    assert attempts == [None]  # the parent's own: the worker's is in its process


def test_an_injected_tool_error_is_raised_even_where_read_tools_run_live(
    recorded: Recorded,
) -> None:
    index = recorded.steps["tool"]
    with otel_replay.replaying(
        recorded.run_id, store=recorded.store, inject={index: "tool:error"}, live_tools="read"
    ) as result:
        again = agent(recorded.base)
    assert again["failures"] == ["otel_replay.errors.InjectedToolError"]
    assert result.identical, result.first_divergence


@pytest.mark.subprocess
def test_the_cli_injects_a_429_and_the_fork_records_both_attempts(
    recorded: Recorded, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    shutil.copytree(recorded.store, store)  # the fork's recording goes in
    index = recorded.steps["openai"]
    env = {k: v for k, v in subprocess_env(store).items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "otel-replay"),
            "replay",
            recorded.run_id,
            "--store",
            str(store),
            "--inject",
            f"{index}=http:429",
            "--json",
            "--",
            sys.executable,
            _faults_agent.__file__,
            recorded.base,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["outcome"] == "identical"
    fork = load_run(report["replay_run_id"], store=str(store))
    attempts = [s for s in fork.steps if s.endpoint == "openai.chat_completions"][:2]
    assert [s.step.status_code for s in attempts] == [429, 200]
    assert [s.attributes.get(A.REPLAY_FORK_CHANGE) for s in attempts] == ["inject http:429", None]
    assert b"rate_limit_error" in attempts[0].step.response_body
    assert (
        attempts[1].step.response_body
        == load_run(recorded.run_id, store=str(store)).steps[index].step.response_body
    )


MARKED = """
import httpx
import pytest
from tests.replay._faults_agent import agent

STORE, RUN, BASE, MODEL, TOOL = {store!r}, {run!r}, {base!r}, {model}, {tool}

@pytest.mark.otel_replay(RUN, store=STORE, inject={{MODEL: "http:429"}})
def test_rate_limited_the_agent_still_answers(replay_result):
    assert agent(BASE)["failures"] == []
    assert replay_result.identical, replay_result.first_divergence

@pytest.mark.otel_replay(RUN, store=STORE, inject={{TOOL: "tool:error:out of stock"}})
def test_a_tool_failure_without_retries(replay_result):
    agent(BASE, retry=False)
"""


@pytest.mark.subprocess
def test_the_pytest_marker_takes_inject(recorded: Recorded, tmp_path: Path) -> None:
    tests = MARKED.format(
        store=recorded.store,
        run=recorded.run_id,
        base=recorded.base,
        model=recorded.steps["openai"],
        tool=recorded.steps["tool"],
    )
    (tmp_path / "test_marked.py").write_text(tests)
    session = run_pytest(tmp_path)
    out = session.stdout
    assert "PASSED test_marked.py::test_rate_limited_the_agent_still_answers" in out, out
    assert (
        "FAILED test_marked.py::test_a_tool_failure_without_retries - "
        "otel_replay.errors.InjectedToolError: out of stock"
    ) in out, out


def _poll(index: int, answer: bytes = b'{"status":"pending"}') -> RecordedStep:
    return recorded_step(
        index=index,
        kind="http",
        endpoint="GET /jobs/7",
        method="GET",
        url="http://jobs.test/jobs/7",
        request_hash="sha256:" + "ab" * 32,
        status_code=200,
        response_body=answer,
        response_hash=sha256_tag(answer),
    )


def _asked(order: int, step: int, forked: str | None = None) -> ServedStep:
    return ServedStep(
        order, "GET", "http://jobs.test/jobs/7", "GET /jobs/7", "sha256:" + "ab" * 32, "hash",
        step, False, "exact", (), forked=forked,
    )  # fmt: skip


def test_a_loop_that_goes_on_after_the_fault_asked_what_the_recording_asked() -> None:
    """The recording polled twice, alike. The fork's timeout at the first poll is caught and
    the loop polls again: that poll takes the faulted step's answer (as a retry would), and
    the twin it stands for is no "recorded step never requested": the program asked what
    the recording asked, as often, and got the same answers, as it does when the fault is
    injected at the second poll."""
    run = Run("r_poll", "test", (_poll(0), _poll(1)))
    at_first = ReplayResult(run, [_asked(0, 0, "inject timeout"), _asked(1, 0)], [])
    assert at_first.unused == [] and at_first.identical, at_first.first_divergence
    at_second = ReplayResult(run, [_asked(0, 0), _asked(1, 1, "inject timeout")], [])
    assert at_second.unused == [] and at_second.identical
    # The loop gave up after the fault: the second poll was never asked for.
    gave_up = ReplayResult(run, [_asked(0, 0, "inject timeout")], [])
    assert [s.step.index for s in gave_up.unused] == [1]
    # A later poll that was answered otherwise is no twin: the program did not get it.
    done = Run("r_done", "test", (_poll(0), _poll(1, b'{"status":"done"}')))
    other = ReplayResult(done, [_asked(0, 0, "inject timeout"), _asked(1, 0)], [])
    assert [s.step.index for s in other.unused] == [1] and not other.identical
