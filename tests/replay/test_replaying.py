"""``otel_replay.replaying``: record real SDK calls in-process, then replay them with the
provider gone, and assert what the comparison says.

Recordings go through the real pipeline (instrumentor → batch processor → ``replay`` exporter
→ store) against the stand-in; replays read the run back from that store.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

import examples.support_agent as support
import otel_replay
from examples.standin import StandIn
from otel_replay.errors import ConfigError, UnmatchedRequestError
from otel_replay.replay import ReplayResult, Run, ServedStep
from tests.export._support import Pipeline
from tests.replay._recorded import recorded_step

KEY = "sk-replaying-not-a-secret"
SYSTEM = "You are a support agent for Acme."
DEAD_URL = "http://127.0.0.1:9/v1"  # nothing listens there: any live request would fail

_CONNECTS: list[str] = []
_WATCHING: list[bool] = [False]


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect" and _WATCHING[0]:
        _CONNECTS.append(str(args[1]))


sys.addaudithook(_audit)


@pytest.fixture
def no_connections() -> Iterator[list[str]]:
    """Every real ``socket.connect`` made during the test (seen below any patching)."""
    _CONNECTS.clear()
    _WATCHING[0] = True
    try:
        yield _CONNECTS
    finally:
        _WATCHING[0] = False


Recording = Callable[..., tuple[str, str, Any]]


@pytest.fixture
def record(tmp_path: Path) -> Recording:
    """``record(work, event_delay=0.002)`` runs ``work(openai_base_url)`` against a fresh
    stand-in (``event_delay``: seconds between its stream events) under the recording
    pipeline; returns ``(store, run_id, work's result)``."""

    def go(work: Callable[[str], Any], event_delay: float = 0.002) -> tuple[str, str, Any]:
        store = tmp_path / "store"
        with StandIn(event_delay=event_delay) as standin, Pipeline(store) as pipe:
            result = work(standin.openai_base_url)
            run_id = pipe.run.run_id
        return str(store), run_id, result

    return go


def _chat(question: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": question},
        ],
        **extra,
    }


def _ask(base_url: str, question: str, **extra: Any) -> str:
    with openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0) as client:
        if extra.get("stream"):
            chunks = client.chat.completions.create(**_chat(question, **extra))
            return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        reply = client.chat.completions.create(**_chat(question, **extra))
        return f"{reply.id} {reply.choices[0].message.content}"


def test_a_run_replays_in_process_without_the_provider(
    record: Recording, no_connections: list[str]
) -> None:
    def work(url: str) -> list[str]:
        return [_ask(url, "Where is A-1?"), _ask(url, "Where is A-2?", stream=True)]

    store, run_id, recorded = record(work)
    no_connections.clear()
    with otel_replay.replaying(run_id, store=store) as result:
        replayed = work(DEAD_URL)
    assert replayed == recorded
    assert result.identical
    assert result.first_divergence is None
    assert dict(result.matched()) == {"hash": 2}
    assert dict(result.fidelity()) == {"exact": 2}
    assert [(s.order, s.recorded, s.how) for s in result.steps] == [(0, 0, "hash"), (1, 1, "hash")]
    assert result.network_attempts == []
    assert no_connections == []
    assert result.to_json()["identical"] is True


def test_a_block_that_raises_is_the_agent_failing(record: Recording) -> None:
    store, run_id, _ = record(lambda url: _ask(url, "Where is A-1?"))
    with (
        pytest.raises(KeyError, match="no-such-field"),
        otel_replay.replaying(run_id, store=store) as result,
    ):
        _ask(DEAD_URL, "Where is A-1?")
        raise KeyError("no-such-field")
    # Every step as recorded: the agent failed after, without diverging.
    assert result.identical
    assert result.outcome == "agent_failed"
    assert result.agent.error == "KeyError: 'no-such-field'"
    assert result.agent.exit_code is None
    assert result.to_json()["agent"] == {
        "exit_code": None,
        "signal": None,
        "error": "KeyError: 'no-such-field'",
    }
    with otel_replay.replaying(run_id, store=store) as again:
        _ask(DEAD_URL, "Where is A-1?")
    assert again.outcome == "identical" and not again.agent.failed
    # Raising before its first request, it failed; nothing of it was compared.
    with pytest.raises(ImportError), otel_replay.replaying(run_id, store=store) as early:
        raise ImportError("no module named agent_tools")
    assert early.failed_before_any_request and early.outcome == "agent_failed"
    assert not early.identical


def test_a_replay_that_is_not_strict_counts_what_it_lets_through(record: Recording) -> None:
    store, run_id, _ = record(lambda url: _ask(url, "Where is A-1?"))
    with otel_replay.replaying(run_id, store=store, strict=False) as result:
        _ask(DEAD_URL, "Where is A-1?")
        with pytest.raises(socket.gaierror):  # fails locally: no such service anywhere
            socket.getaddrinfo("localhost", "no-such-service-otel-replay")
    assert result.live_network == ["name lookup localhost:no-such-service-otel-replay"]
    assert result.network_attempts == []  # nothing refused
    assert result.identical and result.outcome == "identical"
    assert result.to_json()["network_live"] == result.live_network


def test_concurrent_requests_match_by_content_not_arrival(record: Recording) -> None:
    questions = [f"Where is order B-{n}?" for n in range(6)]

    def sequential(url: str) -> dict[str, str]:
        return {q: _ask(url, q) for q in questions}

    store, run_id, recorded = record(sequential)

    async def concurrent() -> dict[str, str]:
        async with openai.AsyncOpenAI(base_url=DEAD_URL, api_key=KEY, max_retries=0) as client:
            replies = await asyncio.gather(
                *(client.chat.completions.create(**_chat(q)) for q in reversed(questions))
            )
        return {
            q: f"{r.id} {r.choices[0].message.content}"
            for q, r in zip(reversed(questions), replies, strict=True)
        }

    with otel_replay.replaying(run_id, store=store) as result:
        replayed = asyncio.run(concurrent())
    assert replayed == recorded
    assert dict(result.matched()) == {"hash": 6}
    assert result.identical


def test_a_changed_model_parameter_is_named(record: Recording) -> None:
    store, run_id, _ = record(lambda url: _ask(url, "Where is A-1?", temperature=0.2))
    with otel_replay.replaying(run_id, store=store) as result:
        _ask(DEAD_URL, "Where is A-1?", temperature=0.7, max_tokens=50)
    first = result.first_divergence
    assert first is not None
    assert (first.kind, first.step) == ("changed", 0)
    assert [c.describe() for c in first.changes] == [
        "parameter max_tokens: added 50",
        "parameter temperature: 0.2 → 0.7",
    ]
    assert not result.identical


def test_a_changed_tool_schema_is_named(record: Recording, monkeypatch: pytest.MonkeyPatch) -> None:
    def converse(url: str) -> str:
        with (
            openai.OpenAI(base_url=url, api_key=KEY, max_retries=0) as client,
            httpx.Client(base_url=url.removesuffix("/v1") + "/tools") as tools,
        ):
            return support.SupportAgent(client, tools, "gpt-4o-mini").ask(support.CONVERSATION[0])

    store, run_id, recorded = record(converse)
    changed = json.loads(json.dumps(support.TOOLS))
    changed[0]["function"]["description"] = "Look an order up (new wording)."
    monkeypatch.setattr(support, "TOOLS", changed)
    with otel_replay.replaying(run_id, store=store) as result:
        replayed = converse("http://127.0.0.1:9/v1")
    assert replayed == recorded  # the recorded answers are served all the same
    first = result.first_divergence
    assert first is not None and first.step == 0
    fields = [c.field for c in first.changes]
    name = changed[0]["function"]["name"]
    assert fields == ["tool schema version", f"tool {name} $.description"]
    # The old wording and the new, whole, each side of the arrow.
    assert first.changes[1].recorded == "Get an order's status, items and delivery date."
    assert first.changes[1].replayed == "Look an order up (new wording)."
    assert first.changes[1].describe() == (
        f"tool {name} $.description: Get an order's status, items and delivery date. → "
        "Look an order up (new wording)."
    )
    # Tool HTTP calls are unchanged and matched exactly.
    http = [s for s in result.steps if s.endpoint.startswith("GET ")]
    assert http and all(s.how == "hash" and s.identical for s in http)


def test_equal_json_with_other_key_order_and_volatile_fields_matches_canonically(
    record: Recording,
) -> None:
    body = _chat("Where is A-1?")

    def post(url: str, payload: bytes) -> bytes:
        response = httpx.post(
            url + "/chat/completions",
            content=payload,
            headers={"content-type": "application/json", "authorization": f"Bearer {KEY}"},
        )
        return response.content

    store, run_id, recorded = record(lambda url: post(url, json.dumps(body).encode()))
    reordered = dict(reversed(list(body.items()))) | {"user": "someone-else"}
    with otel_replay.replaying(run_id, store=store) as result:
        replayed = post(DEAD_URL, json.dumps(reordered, indent=2).encode())
    assert replayed == recorded
    assert [s.how for s in result.steps] == ["canonical"]
    assert result.identical


def test_an_unmatched_request_fails_with_the_closest_recorded_ones(record: Recording) -> None:
    store, run_id, _ = record(lambda url: _ask(url, "Where is A-1?"))
    with (
        pytest.raises(UnmatchedRequestError) as raised,
        otel_replay.replaying(run_id, store=store) as result,
    ):
        _ask(DEAD_URL, "Where is A-1?")
        _ask(DEAD_URL, "And A-2?")
    message = str(raised.value)
    assert f"no recorded step of run {run_id!r} matches POST http://127.0.0.1:9/v1/chat" in message
    assert "step 0 openai.chat_completions, served 1 time(s): differs in $.messages[1].content" in (
        message
    )
    assert [s.how for s in result.steps] == ["hash", "none"]
    assert result.extra and result.extra[0].order == 1


def test_strict_replay_refuses_other_sockets_and_lets_go_after(record: Recording) -> None:
    store, run_id, _ = record(lambda url: _ask(url, "Where is A-1?"))
    original = socket.socket.connect
    with otel_replay.replaying(run_id, store=store) as result:
        with pytest.raises(urllib.error.URLError) as raised:
            urllib.request.urlopen("http://example.invalid/", timeout=1)
        assert "refused network access to name lookup example.invalid:80" in str(raised.value)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", 9), timeout=1)
    assert result.network_attempts == ["name lookup example.invalid:80", "127.0.0.1:9"]
    assert not result.identical
    assert socket.socket.connect is original


def test_errors_are_replayed_as_recorded(record: Recording) -> None:
    def failing(url: str) -> list[str]:
        seen: list[str] = []
        with openai.OpenAI(base_url=url, api_key=KEY, max_retries=0) as client:
            for model in ("standin-error", "standin-cut"):
                try:
                    stream = client.chat.completions.create(
                        model=model, messages=[{"role": "user", "content": "hi"}], stream=True
                    )
                    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
                    seen.append(f"ok {text}")
                except (openai.APIError, httpx.HTTPError) as exc:
                    cause = exc.__cause__ or exc.__context__
                    seen.append(f"{type(exc).__name__} {type(cause).__name__ if cause else ''}")
        return seen

    store, run_id, recorded = record(failing)
    assert recorded[0].startswith("RateLimitError")
    with otel_replay.replaying(run_id, store=store) as result:
        replayed = failing(DEAD_URL)
    assert replayed == recorded
    assert result.identical


def test_recorded_timing_paces_streams(record: Recording) -> None:
    def stream(url: str) -> float:
        """Seconds from the stream's first chunk to its last (the client's set-up aside)."""
        with openai.OpenAI(base_url=url, api_key=KEY, max_retries=0) as client:
            chunks = client.chat.completions.create(
                **_chat("Tell me a long story about A-1.", stream=True)
            )
            rest = iter(chunks)
            next(rest)
            first = time.perf_counter()
            for _ in rest:
                pass
            return time.perf_counter() - first

    # Chunks far enough apart that a replay from memory is far quicker on a loaded machine.
    store, run_id, _ = record(stream, event_delay=0.1)
    with otel_replay.replaying(run_id, store=store, timing="fast"):
        fast_s = stream(DEAD_URL)
    with otel_replay.replaying(run_id, store=store, timing="recorded") as result:
        paced_s = stream(DEAD_URL)
    chunks = result.run.steps[0].step.chunks
    spread_s = (chunks[-1][1] - chunks[0][1]) / 1e9
    assert spread_s > 0.6, spread_s
    assert paced_s >= spread_s * 0.9
    assert fast_s < spread_s / 2, (fast_s, spread_s)  # served from memory, not paced


def test_the_recorded_seed_makes_the_code_draw_the_same_numbers(record: Recording) -> None:
    questions = [f"Where is order R-{n}?" for n in range(10_000)]

    def work(url: str) -> tuple[str, int, str]:
        with otel_replay.run("seeded") as block:
            question = random.choice(questions)
            return block.run_id, block.seed, _ask(url, question)

    store, _, (run_id, seed, answer) = record(work)
    with otel_replay.replaying(run_id, store=store) as result:
        _, replayed_seed, replayed = work(DEAD_URL)
    assert result.run.seed == seed == replayed_seed
    assert replayed == answer
    assert result.identical


def test_without_strict_mode_an_unmatched_request_goes_live(record: Recording) -> None:
    store, run_id, _ = record(lambda url: _ask(url, "Where is A-1?"))
    with (
        StandIn(event_delay=0.001) as live,
        otel_replay.replaying(run_id, store=store, strict=False) as result,
    ):
        _ask(live.openai_base_url, "Where is A-1?")
        answer = _ask(live.openai_base_url, "Something new?")
        assert len(live.received) == 1  # only the unmatched request reached the provider
    assert answer.startswith("chatcmpl-")
    assert [(s.how, s.live) for s in result.steps] == [("hash", False), ("none", True)]
    assert result.network_attempts == []
    assert not result.identical


def test_a_streamed_request_body_replays_by_its_exact_bytes(record: Recording) -> None:
    """A generator body (sent chunked) is recorded as sent, so replay matches it by hash; a
    different body is a divergence, not a silent match."""

    def refund(url: str, reason: bytes) -> tuple[int, bytes]:
        def body() -> Iterator[bytes]:
            yield b'{"order_id": "A-1234", '
            yield b'"reason": "' + reason + b'"}'

        tools = url.removesuffix("/v1") + "/tools"
        response = httpx.post(tools + "/refunds", content=body())
        return response.status_code, response.content

    store, run_id, recorded = record(lambda url: refund(url, b"broken"))
    assert recorded[0] == 201
    with otel_replay.replaying(run_id, store=store) as result:
        replayed = refund(DEAD_URL, b"broken")
    assert replayed == recorded  # the random refund id comes back too
    assert result.identical
    assert dict(result.matched()) == {"hash": 1}

    with otel_replay.replaying(run_id, store=store) as changed:
        assert refund(DEAD_URL, b"late") == recorded  # served by position, flagged
    first = changed.first_divergence
    assert first is not None and first.step == 0
    assert [c.describe() for c in first.changes] == ["body $.reason: broken → late"]
    assert [s.how for s in changed.steps] == ["position"]


def test_a_changed_request_coming_after_its_successors_takes_the_step_left(
    record: Recording,
) -> None:
    """Two calls recorded in order, replayed in the other order with the first one changed:
    the second is served by hash, and the changed one, arriving after every step past its
    place was served, takes the one step left (a divergence), never an unmatched request."""
    store, run_id, recorded = record(
        lambda url: [_ask(url, "Where is A-1?"), _ask(url, "Where is A-2?")]
    )
    with otel_replay.replaying(run_id, store=store) as result:
        replayed = [_ask(DEAD_URL, "Where is A-2?"), _ask(DEAD_URL, "Where is parcel A-1?")]
    assert replayed == recorded[::-1]
    assert [(s.recorded, s.how) for s in result.steps] == [(1, "hash"), (0, "position")]
    first = result.first_divergence
    assert first is not None and first.step == 0
    assert "Where is A-1? → user: Where is parcel A-1?" in "\n".join(
        c.describe() for c in first.changes
    )


@pytest.mark.parametrize(
    ("option", "value"),
    [("strict", "yes"), ("timing", "slow"), ("clock", "now"), ("live_tools", "write")],
)
def test_an_option_that_means_nothing_is_refused_naming_it(option: str, value: str) -> None:
    options: dict[str, object] = {option: value}
    with (
        pytest.raises(ConfigError) as caught,
        otel_replay.replaying(Run("r_x", "test", ()), **options),  # type: ignore[arg-type]
    ):
        pass
    assert str(caught.value).startswith(f"replaying(): {option}={value!r} is not one of ")


def test_the_steps_inside_a_tool_never_asked_for_are_not_listed_apart() -> None:
    """A tool never called: its step is never requested, and so are the HTTP calls its body
    made; listing those too buried the steps that matter (an agent fixed to stop its loop
    listed every refund POST under every refund it no longer asked for)."""

    def step(index: int, kind: str, endpoint: str, within: int | None = None) -> Any:
        return recorded_step(
            index=index, kind=kind, endpoint=endpoint, method="POST", url="", within=within
        )

    run = Run(
        "r_within",
        "test",
        (
            step(0, "llm", "openai.chat_completions"),
            step(1, "tool", "tool:refund_order"),
            step(2, "http", "POST /tools/refunds", within=1),
            step(3, "tool", "tool:notify", within=1),
            step(4, "http", "POST /mail", within=3),
            step(5, "llm", "openai.chat_completions"),
        ),
    )
    asked = ServedStep(
        0, "POST", "http://x/v1", "openai.chat_completions", "sha256:00", "hash", 0, False,
        "exact", (),
    )  # fmt: skip
    result = ReplayResult(run, [asked], [])
    assert [s.step.index for s in result.unused] == [1, 5]
    assert result.first_divergence is not None
    assert result.first_divergence.describe() == "recorded step 1 was never requested"
