"""Concurrent calls through one instrumented SDK client: every span keeps its own request and
response, and step indices stay unique and contiguous.

50 calls run at once (``asyncio.gather`` on an ``AsyncOpenAI`` client, or 50 threads sharing
one sync ``OpenAI`` client), plain and streamed. Each call asks about its own order id, so a
span that picked up another call's request or response bytes shows it immediately.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai
import pytest

from examples.standin import StandIn
from examples.standin import server as standin_server
from otel_replay.testing import CaptureKit

N = 50
KEY = "sk-test-concurrency-0123456789"
MODEL = "gpt-4o-mini"
ORDER = re.compile(r"A-1\d{3}")
QUESTIONS = [f"Order A-1{i:03d}: where is it?" for i in range(N)]


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def params(question: str, stream: bool) -> dict[str, Any]:
    extra: dict[str, Any] = (
        {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
    )
    return {"model": MODEL, "messages": [{"role": "user", "content": question}], **extra}


def answer_of(result: Any, stream: bool, chunks: list[Any] | None = None) -> tuple[str, str]:
    """(response id, answer text) of a completion, or of a stream's chunks."""
    if not stream:
        return result.id, result.choices[0].message.content or ""
    assert chunks is not None
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return chunks[0].id, text


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[StandIn]:
    """The stand-in with a listen backlog that takes N simultaneous connects.

    ``ThreadingHTTPServer`` listens with a backlog of 5: 50 simultaneous connects overflow
    it and clients see ``ConnectionResetError``/``ReadError`` even without any
    instrumentation. Widen it for this test until the stand-in does so itself.
    """
    if standin_server._Server.request_queue_size < N:
        monkeypatch.setattr(standin_server._Server, "request_queue_size", 2 * N)
    with StandIn(event_delay=0.001) as server:
        yield server


@pytest.fixture
def kit() -> Iterator[CaptureKit]:
    with CaptureKit() as capture:
        yield capture


async def _ask_async(client: openai.AsyncOpenAI, question: str, stream: bool) -> tuple[str, str]:
    result = await client.chat.completions.create(**params(question, stream))
    if not stream:
        return answer_of(result, stream)
    async with result:
        chunks = [chunk async for chunk in result]
    return answer_of(result, stream, chunks)


def _ask_sync(client: openai.OpenAI, question: str, stream: bool) -> tuple[str, str]:
    result = client.chat.completions.create(**params(question, stream))
    if not stream:
        return answer_of(result, stream)
    with result:
        chunks = list(result)
    return answer_of(result, stream, chunks)


def run_async(standin: StandIn, stream: bool) -> list[tuple[str, str]]:
    async def main() -> list[tuple[str, str]]:
        async with openai.AsyncOpenAI(
            base_url=standin.openai_base_url, api_key=KEY, max_retries=0
        ) as client:
            return list(await asyncio.gather(*(_ask_async(client, q, stream) for q in QUESTIONS)))

    return asyncio.run(main())


def run_threads(standin: StandIn, stream: bool) -> list[tuple[str, str]]:
    start = threading.Barrier(N)

    def ask(question: str) -> tuple[str, str]:
        start.wait(timeout=30)  # release all 50 at once
        return _ask_sync(client, question, stream)

    with (
        openai.OpenAI(base_url=standin.openai_base_url, api_key=KEY, max_retries=0) as client,
        ThreadPoolExecutor(max_workers=N) as pool,
    ):
        return list(pool.map(ask, QUESTIONS))


def only_order(text: str) -> str:
    """The single order id ``text`` mentions (fails if it mentions none or several)."""
    found = set(ORDER.findall(text))
    assert len(found) == 1, f"expected exactly one order id in {text!r}, found {found}"
    return found.pop()


def texts(messages: list[dict[str, Any]]) -> str:
    return " ".join(
        part["content"] for m in messages for part in m["parts"] if part["type"] == "text"
    )


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("mode", ["asyncio", "threads"])
def test_concurrent_calls_keep_their_own_request_and_response(
    standin: StandIn, kit: CaptureKit, mode: str, stream: bool
) -> None:
    results = run_async(standin, stream) if mode == "asyncio" else run_threads(standin, stream)
    answers = {only_order(q): r for q, r in zip(QUESTIONS, results, strict=True)}
    assert len(answers) == N

    received = standin.received
    assert len(received) == N
    body_hash_by_order = {only_order(r.body.decode()): sha(r.body) for r in received}
    assert len(body_hash_by_order) == N

    spans = kit.spans()
    assert len(spans) == N
    assert {s["name"] for s in spans} == {f"chat {MODEL}"}
    attrs = [s["attributes"] for s in spans]

    # The set of request hashes is exactly the set of bodies the stand-in received ...
    assert {a["replay.request.hash"] for a in attrs} == set(body_hash_by_order.values())
    # ... and step indices are 0..N-1, each used once.
    assert sorted(a["replay.step.index"] for a in attrs) == list(range(N))
    assert len({a["replay.run.id"] for a in attrs}) == 1

    for a in attrs:
        order = only_order(texts(a["gen_ai.input.messages"]))
        # Its request hash is the hash of *its* body, not another call's.
        assert a["replay.request.hash"] == body_hash_by_order[order], order
        response_id, answer_text = answers[order]
        (output,) = a["gen_ai.output.messages"]
        assert output["role"] == "assistant"
        assert texts([output]) == answer_text, order
        assert only_order(texts([output])) == order
        assert a["gen_ai.response.id"] == response_id, order
        assert a["replay.response.complete"] is True, order
        assert a["replay.response.hash"].startswith("sha256:")
    # Every call got a distinct response and distinct response bytes.
    assert len({a["gen_ai.response.id"] for a in attrs}) == N
    assert len({a["replay.response.hash"] for a in attrs}) == N
