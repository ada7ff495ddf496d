"""A fork live from step N (``replaying(..., live_from=N)``): the stand-in keeps running after
the recording, and counting what it receives proves that no step before N reached it and
every later one did.

The support agent (the real openai SDK, httpx for its HTTP tools, a streamed last answer) is
recorded once against the stand-in; every test replays it in-process against the same
stand-in, its log of requests cleared first.
"""

from __future__ import annotations

import asyncio
import io
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import anthropic
import httpx
import openai
import pytest
from rich.console import Console
from rich.text import Text

import otel_replay
from examples.standin import StandIn
from examples.support_agent import CONVERSATION, SupportAgent
from otel_replay.cli._replay_report import render
from otel_replay.errors import NetworkBlockedError, UnmatchedRequestError
from otel_replay.replay import ReplayResult, Run, ServedStep, WentLive
from otel_replay.replay._change import Change
from otel_replay.replay.sources import load_run
from tests.export._support import Pipeline
from tests.replay._recorded import recorded_step

RUN = "r_20261129T010000_11fe0001"


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn(event_delay=0) as running:
        yield running


@pytest.fixture(scope="module")
def recorded(standin: StandIn, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Run]:
    """The store and the support agent's run, recorded once."""
    store = tmp_path_factory.mktemp("live-from") / "store"
    with Pipeline(store), otel_replay.run(name="support", seed=7, run_id=RUN):
        _agent(standin)
    return store, load_run(RUN, store=str(store))


def _agent(standin: StandIn) -> None:
    with (
        openai.OpenAI(base_url=standin.openai_base_url, api_key="sk-test-not-a-secret") as client,
        httpx.Client(base_url=standin.tools_url) as tools,
    ):
        agent = SupportAgent(client, tools, "gpt-4o-mini")
        for number, question in enumerate(CONVERSATION, start=1):
            agent.ask(question, stream=number == len(CONVERSATION))


def _paths(run: Run, start: int) -> list[str]:
    """The paths the recorded steps from ``start`` on requested, in order."""
    return [httpx.URL(recorded.step.url or "").path for recorded in run.steps[start:]]


@pytest.mark.parametrize("live_from", [0, 4, 8])
def test_steps_before_n_never_reach_the_provider_and_every_later_one_does(
    standin: StandIn, recorded: tuple[Path, Run], live_from: int
) -> None:
    store, run = recorded
    assert len(run.steps) == 9  # model, tool, model; model, tool, model; model, tool, model
    standin.clear()
    with otel_replay.replaying(RUN, store=str(store), live_from=live_from) as result:
        _agent(standin)
    assert [r.path for r in standin.received] == _paths(run, live_from)
    served = [(s.recorded, s.how, s.live) for s in result.steps[:live_from]]
    assert served == [(index, "hash", False) for index in range(live_from)]
    # Every later call went live, each still named by the recorded step it stands for.
    assert [(s.recorded, s.live) for s in result.steps[live_from:]] == [
        (index, True) for index in range(live_from, len(run.steps))
    ]
    assert result.network_attempts == []
    assert result.live_network  # the live calls' own connections, counted
    found = result.went_live
    assert found == WentLive(order=live_from, step=live_from, early=False)
    assert found.describe(live_from) == f"live from step {live_from} (request {live_from})"
    document = result.to_json()
    assert (document["live_from"], document["went_live"]) == (
        live_from,
        {"request": live_from, "step": live_from, "early": False},
    )


def test_the_last_step_live_answers_as_recorded(
    standin: StandIn, recorded: tuple[Path, Run]
) -> None:
    """Live from the last step, the one request sent is the recorded one: identical."""
    store, _ = recorded
    with otel_replay.replaying(RUN, store=str(store), live_from=8) as result:
        _agent(standin)
    assert result.outcome == "identical", result.first_divergence
    assert result.steps[-1].live and result.steps[-1].identical


def test_the_clock_reads_the_recorded_time_until_the_live_point(
    standin: StandIn, recorded: tuple[Path, Run]
) -> None:
    store, run = recorded
    assert run.start_ns is not None
    started = time.time()
    with otel_replay.replaying(RUN, store=str(store), live_from=8):
        before = time.time()
        _agent(standin)
        after = time.time()
    assert before == pytest.approx(run.start_ns / 1e9, abs=0.5) and before < started
    assert after >= started


def test_a_network_attempt_before_the_live_point_is_refused_and_reported(
    standin: StandIn, recorded: tuple[Path, Run]
) -> None:
    store, _ = recorded
    address = (standin.host, standin.port)
    with otel_replay.replaying(RUN, store=str(store), live_from=4) as result:
        with pytest.raises(NetworkBlockedError):
            socket.create_connection(address, timeout=5).close()
        _agent(standin)
        socket.create_connection(address, timeout=5).close()  # live now: let through
    assert result.network_attempts == [f"{standin.host}:{standin.port}"]
    assert result.outcome == "diverged"  # a refused attempt is a divergence, as in strict
    assert result.live_network[-1] == f"{standin.host}:{standin.port}"


def test_a_request_that_differs_before_the_live_point_goes_live_there(
    standin: StandIn, recorded: tuple[Path, Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, run = recorded
    monkeypatch.setenv("SUPPORT_SYSTEM_PROMPT", "You are Bob. Answer in one line.")
    standin.clear()
    with otel_replay.replaying(RUN, store=str(store), live_from=4) as result:
        _agent(standin)
    assert [r.path for r in standin.received] == _paths(run, 0)
    first = result.steps[0]
    assert first.live and first.recorded == 0 and first.how != "hash"
    found = result.went_live
    assert found == WentLive(order=0, step=0, early=True)
    assert found.describe(4) == (
        "live from step 0 (request 0), before step 4: its request differs from the recording"
    )
    assert _first_changes(result) == ["prompt hash", "system instructions (message 0)"]


def _first_changes(result: ReplayResult) -> list[str]:
    divergence = result.first_divergence
    assert divergence is not None
    return sorted(change.field for change in divergence.changes)


# -- tools and values past the live point ------------------------------------------------------

TOOLS_RUN = "r_20261129T010500_11fe0002"
RUNS: dict[str, int] = {}


@otel_replay.tool(effect="read")
def stock(item: str) -> int:
    """How many are in stock."""
    RUNS["stock"] = RUNS.get("stock", 0) + 1
    return 3


@otel_replay.tool(effect="write")
def reserve(item: str) -> str:
    """Reserve one."""
    RUNS["reserve"] = RUNS.get("reserve", 0) + 1
    return f"reserved {item}"


def _desk(item: str = "lamp") -> tuple[str, int, str]:
    """Steps: 0 value:uuid4, 1 tool:stock (read), 2 tool:reserve (write)."""
    ticket = str(otel_replay.uuid4())
    return ticket, stock(item), reserve(item)


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[str, int, str]]:
    store = tmp_path_factory.mktemp("live-from-tools") / "store"
    with Pipeline(store), otel_replay.run(name="desk", run_id=TOOLS_RUN):
        done = _desk()
    RUNS.clear()
    return store, done


def test_past_the_live_point_values_and_read_tools_are_live_and_writes_served(
    desk: tuple[Path, tuple[str, int, str]],
) -> None:
    store, (ticket, _, reserved) = desk
    with otel_replay.replaying(TOOLS_RUN, store=str(store), live_from=0) as result:
        again = _desk()
    assert again[0] != ticket  # drawn live
    assert again[2] == reserved and RUNS == {"stock": 1}  # the write was served, not run
    assert [(s.recorded, s.live) for s in result.steps] == [(0, True), (1, True), (2, False)]
    assert result.identical, result.first_divergence  # asked as recorded, answered alike


def test_a_write_the_recording_cannot_serve_past_the_live_point_is_refused(
    desk: tuple[Path, tuple[str, int, str]],
) -> None:
    store, _ = desk
    RUNS.clear()
    with (
        pytest.raises(
            UnmatchedRequestError,
            match=r"tool 'reserve' \(step \d+\) has no recorded call.*--allow-writes",
        ),
        otel_replay.replaying(TOOLS_RUN, store=str(store), live_from=1) as result,
    ):
        _desk()
        reserve("desk")  # a second reservation: the recording has none left to serve
    assert RUNS == {"stock": 1}  # the read ran live; the write never ran
    assert [(s.recorded, s.live) for s in result.steps] == [
        (0, False),
        (1, True),
        (2, False),
        (None, False),
    ]


@pytest.mark.parametrize("live_from", [1, 2])
def test_a_write_called_with_other_arguments_past_the_live_point_is_refused(
    desk: tuple[Path, tuple[str, int, str]], live_from: int
) -> None:
    """The recorded ``reserve("lamp")`` is no answer to today's ``reserve("desk")``, though it
    matches it by position: serving it would tell a what-if that the desk was reserved."""
    store, _ = desk
    RUNS.clear()
    with (
        pytest.raises(UnmatchedRequestError) as refused,
        otel_replay.replaying(TOOLS_RUN, store=str(store), live_from=live_from) as result,
    ):
        _desk("desk")
    assert str(refused.value) == (
        "otel-replay: tool 'reserve' is a write (write: declared) and its recorded call "
        "(step 2) had other arguments (argument $.item: lamp → desk): past the live point a "
        "fork serves a write tool only the call it recorded, and runs none without "
        "--allow-writes"
    )
    assert RUNS == {"stock": 1}  # the read ran live (with today's argument); the write never ran
    assert [(s.recorded, s.how, s.live) for s in result.steps] == [
        (0, "hash", False),
        (1, "position", True),
        (2, "position", False),
    ]
    assert result.outcome == "diverged"


@otel_replay.tool(effect="write")
def grant(item: str, user: str) -> str:
    """Lend one to a user."""
    RUNS["grant"] = RUNS.get("grant", 0) + 1
    return f"{item} lent to {user}"


def test_a_write_whose_volatile_argument_differs_past_the_live_point_is_refused(
    tmp_path: Path,
) -> None:
    """Canonical matching sets a top-level ``user`` aside (it names the caller of a model
    call); a write tool's ``user`` argument is what it acts on, and it differs."""
    store, run_id = tmp_path / "store", "r_20261129T010700_11fe0004"
    with Pipeline(store), otel_replay.run(name="lend", run_id=run_id):
        grant("lamp", "alice")
    RUNS.clear()
    with (
        pytest.raises(UnmatchedRequestError, match=r"argument \$\.user: alice → bob"),
        otel_replay.replaying(run_id, store=str(store), live_from=0) as result,
    ):
        grant("lamp", "bob")
    assert RUNS == {}
    assert [(s.recorded, s.how) for s in result.steps] == [(0, "canonical")]


def test_a_write_called_again_past_the_live_point_is_refused(
    desk: tuple[Path, tuple[str, int, str]],
) -> None:
    """The recording reserved the lamp once: a second, identical call has nothing to serve."""
    store, (_, _, reserved) = desk
    RUNS.clear()
    with (
        pytest.raises(UnmatchedRequestError, match=r"tool 'reserve' .* was served already"),
        otel_replay.replaying(TOOLS_RUN, store=str(store), live_from=1),
    ):
        assert _desk()[2] == reserved  # the call it recorded is served
        reserve("lamp")
    assert RUNS == {"stock": 1}


def test_with_writes_allowed_a_write_past_the_live_point_runs(
    desk: tuple[Path, tuple[str, int, str]],
) -> None:
    store, _ = desk
    RUNS.clear()
    with otel_replay.replaying(
        TOOLS_RUN, store=str(store), live_from=1, allow_writes=True
    ) as result:
        _desk()
        assert reserve("desk") == "reserved desk"
    assert RUNS == {"stock": 1, "reserve": 2}  # each write ran once, the unrecorded one too
    assert [(s.recorded, s.live) for s in result.steps] == [
        (0, False),
        (1, True),
        (2, True),
        (None, True),
    ]


# -- async clients: anthropic (httpx2) and aiohttp --------------------------------------------

ASYNC_RUN = "r_20261129T011000_11fe0003"


async def _async_agent(standin: StandIn) -> None:
    """Steps: 0 a model call, 1 an aiohttp GET of a tool, 2 a streamed model call."""
    question = {"role": "user", "content": "Where is my order A-1234?"}
    async with anthropic.AsyncAnthropic(
        base_url=standin.anthropic_base_url, api_key="sk-test-not-a-secret"
    ) as client:
        first = await client.messages.create(
            model="claude-sonnet-4-6", max_tokens=100, messages=[question]
        )
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{standin.tools_url}/orders/A-1234") as response,
        ):
            order = await response.text()
        text = first.content[0].text if first.content[0].type == "text" else ""
        async with client.messages.stream(
            model="claude-sonnet-4-6",
            max_tokens=100,
            messages=[
                question,
                {"role": "assistant", "content": text},
                {"role": "user", "content": order},
            ],
        ) as stream:
            await stream.until_done()


def test_async_clients_go_live_after_the_served_steps(standin: StandIn, tmp_path: Path) -> None:
    store = tmp_path / "store"
    with Pipeline(store), otel_replay.run(name="async", run_id=ASYNC_RUN):
        asyncio.run(_async_agent(standin))
    standin.clear()
    with otel_replay.replaying(ASYNC_RUN, store=str(store), live_from=1) as result:
        asyncio.run(_async_agent(standin))
    assert [r.path for r in standin.received] == ["/tools/orders/A-1234", "/v1/messages"]
    assert [(s.recorded, s.live) for s in result.steps] == [(0, False), (1, True), (2, True)]
    assert result.outcome == "identical", result.first_divergence


def test_a_fork_that_changes_an_answer_refuses_a_write_called_with_other_arguments(
    desk: tuple[Path, tuple[str, int, str]],
) -> None:
    """Without a live point too: after ``--override``, the recorded ``reserve("lamp")`` is no
    answer to the what-if's ``reserve("desk")``."""
    store, (ticket, _, _) = desk
    RUNS.clear()
    with (
        pytest.raises(UnmatchedRequestError) as refused,
        otel_replay.replaying(TOOLS_RUN, store=str(store), override={1: 0}) as result,
    ):
        assert _desk("desk")[:2] == (ticket, 0)  # the recorded draw, the overridden stock
    assert str(refused.value) == (
        "otel-replay: tool 'reserve' is a write (write: declared) and its recorded call "
        "(step 2) had other arguments (argument $.item: lamp → desk): a fork serves a write "
        "tool only the call it recorded, and runs none without --allow-writes"
    )
    assert RUNS == {}  # neither tool ran: the read was overridden, the write refused
    assert [(s.recorded, s.how, s.refused) for s in result.steps] == [
        (0, "hash", False),
        (1, "position", False),
        (2, "position", True),
    ]
    # The report says the write was refused, not served with other arguments.
    assert result.to_json()["served"] == 2
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(*render(result, kept="recorded"))
    lines = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    (row,) = [line for line in lines if line.startswith("2 ")]
    assert "refused, differs: arguments" in row, row
    assert any(line.startswith("3 requests, 2 served from 3 recorded steps;") for line in lines)


def test_a_fork_that_changes_an_answer_serves_a_write_its_own_recorded_call(
    desk: tuple[Path, tuple[str, int, str]],
) -> None:
    store, (ticket, _, reserved) = desk
    RUNS.clear()
    with otel_replay.replaying(TOOLS_RUN, store=str(store), override={1: 0}) as result:
        assert _desk() == (ticket, 0, reserved)
    assert RUNS == {}
    assert [(s.recorded, s.how, s.forked is not None) for s in result.steps] == [
        (0, "hash", False),
        (1, "hash", True),
        (2, "hash", False),
    ]


def test_a_live_call_sent_again_is_not_said_to_be_served() -> None:
    """Past the live point nothing is served: the SDK's retry of a live call the provider
    failed (down, or a 429) asks for the step the first call stood for, and the report says
    so instead of "it was already served"."""
    recorded = recorded_step(
        index=0, kind="llm", endpoint="openai.chat_completions", method="POST", url="http://x/v1"
    )
    run = Run("r_live", "test", (recorded,))

    def sent(order: int, repeat: bool, live: bool) -> ServedStep:
        return ServedStep(
            order, "POST", "http://x/v1", recorded.endpoint, "sha256:00", "hash", 0, repeat,
            "exact", (), live,
        )  # fmt: skip

    live = ReplayResult(run, [sent(0, False, True), sent(1, True, True)], [])
    lines = [r.plain for r in render(live, kept="recorded") if isinstance(r, Text)]
    said = "  the recorded step was requested again (a live call already stood for it: this "
    assert said + "one was sent live again)" in lines
    assert "sent live again" in repr(live.first_divergence)
    assert "already served" not in "\n".join(lines)
    served = ReplayResult(run, [sent(0, False, False), sent(1, True, False)], [])
    lines = [r.plain for r in render(served, kept="recorded") if isinstance(r, Text)]
    assert "  the recorded step was requested again (it was already served)" in lines


@pytest.mark.parametrize("client", ["httpx", "requests", "aiohttp"])
def test_a_live_call_the_world_failed_is_no_identical_step(client: str, tmp_path: Path) -> None:
    """Live from the tool step with the tool server gone: the live call failed, where the
    recording got a 200. The step said "live, identical", only the agent's exception at the
    end telling why; it now differs there, naming the error and the status."""
    store = tmp_path / "store"
    with StandIn(event_delay=0) as gone:
        with Pipeline(store), otel_replay.run(name="gone", run_id="r_gone"):
            _get_order(client, gone.tools_url)
        url = gone.tools_url
    with (
        otel_replay.replaying("r_gone", store=str(store), live_from=0) as result,
        pytest.raises(Exception) as raised,
    ):
        _get_order(client, url)
    (step,) = result.steps
    assert step.live and not step.identical
    changes = {c.field: c.describe() for c in step.changes}
    assert changes["status"] == "status: removed (was 200)"
    # The error the live transport raised (requests' is urllib3's, under the one it raises).
    assert changes["error"].startswith("error: added ") and "Connect" in changes["error"]
    assert "Connect" in type(raised.value).__name__
    assert result.outcome == "diverged" and result.first_divergence is not None


def test_a_live_call_answered_otherwise_names_the_status(standin: StandIn, tmp_path: Path) -> None:
    store = tmp_path / "store"
    with Pipeline(store), otel_replay.run(name="status", run_id="r_status"):
        _get_order("httpx", standin.tools_url)
    with otel_replay.replaying("r_status", store=str(store), live_from=0) as result:
        _get_order("httpx", standin.tools_url, {"x-standin-fail-first": "1"})  # a 429 today
    (step,) = result.steps
    assert step.live and [c.describe() for c in step.changes] == ["status: 200 → 429"]


def _get_order(client: str, tools_url: str, headers: dict[str, str] | None = None) -> None:
    url = f"{tools_url}/orders/A-1234"
    if client == "httpx":
        httpx.get(url, headers=headers)
    elif client == "requests":
        import requests

        requests.get(url, timeout=5)
    else:

        async def get() -> None:
            async with aiohttp.ClientSession() as http, http.get(url) as response:
                await response.read()

        asyncio.run(get())


def test_a_refused_write_is_said_to_be_refused_where_it_is_the_first_divergence() -> None:
    """The program got neither the recorded answer nor a live one: the verdict, the first
    divergence and a test's assertion message say so."""
    recorded = recorded_step(
        index=0, kind="tool", endpoint="tool:reserve", method="TOOL", url="tool://reserve"
    )
    changed = Change("argument $.item", "changed", "lamp", "desk")
    refused = ServedStep(
        0, "TOOL", "tool://reserve", "tool:reserve", "sha256:00", "position", 0, False,
        "exact", (changed,), refused=True,
    )  # fmt: skip
    result = ReplayResult(Run("r_refused", "test", (recorded,)), [refused], [])
    first = result.first_divergence
    assert first is not None
    assert first.describe() == "step 0 differs from the recording and was refused"
    assert repr(first) == (
        "<Divergence: step 0 (tool:reserve), refused: argument $.item: lamp → desk>"
    )
    lines = [r.plain for r in render(result, kept="recorded") if isinstance(r, Text)]
    assert "first divergence: step 0 (tool:reserve), request 0, matched by position, refused" in (
        lines
    )
    assert result.to_json()["served"] == 0
