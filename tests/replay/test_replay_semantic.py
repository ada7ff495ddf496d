"""A trace made by the official OpenTelemetry openai instrumentation alone (no otel-replay at
record time, so no bytes) replays semantically: the SDK gets provider-format responses
synthesised from the spans, equal in content to what the provider answered."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import openai
import pytest

import otel_replay
from tests.replay.conftest import KEY, Recorded, collector_json
from tests.replay.test_replay_cli import replay
from tests.replay.test_sources_url import Jaeger

DEAD_URL = "http://127.0.0.1:9/v1"


def _sse_text(body: bytes) -> str:
    text = ""
    for line in body.decode().splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:]).get("choices", []):
                text += choice.get("delta", {}).get("content") or ""
    return text


def test_an_official_instrumentation_trace_replays_semantically(
    recorded: Recorded, tmp_path: Path
) -> None:
    source = tmp_path / "official.jsonl"
    source.write_text(json.dumps(collector_json(recorded.official)) + "\n")
    plain, streamed = recorded.exchanges["official"]

    with (
        otel_replay.replaying(str(source)) as result,
        openai.OpenAI(base_url=DEAD_URL, api_key=KEY, max_retries=0) as client,
    ):
        reply = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Where is my order A-1234?"}],
        )
        chunks = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Hello there"}],
            stream=True,
        )
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    answer = json.loads(plain.response)["choices"][0]["message"]
    assert reply.choices[0].message.content == answer["content"]
    assert text == _sse_text(bytes(streamed.response))
    assert dict(result.fidelity()) == {"semantic": 2}
    assert dict(result.matched()) == {"messages": 2}
    assert [s.changes for s in result.steps] == [(), ()]
    assert result.identical


def test_semantic_steps_match_by_their_messages_not_their_order(
    recorded: Recorded, tmp_path: Path
) -> None:
    """Asked concurrently and in the other order, each question still gets its own recorded
    answer: steps without bytes are matched on model and conversation before position."""
    source = tmp_path / "official.jsonl"
    source.write_text(json.dumps(collector_json(recorded.official)) + "\n")
    plain, streamed = recorded.exchanges["official"]

    async def ask_both() -> tuple[str, str]:
        async with openai.AsyncOpenAI(base_url=DEAD_URL, api_key=KEY, max_retries=0) as client:

            async def hello() -> str:
                chunks = await client.chat.completions.create(
                    model="gpt-4o-mini",
                    messages=[{"role": "user", "content": "Hello there"}],
                    stream=True,
                )
                return "".join([c.choices[0].delta.content or "" async for c in chunks])

            order = client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": "Where is my order A-1234?"}],
            )
            greeting, reply = await asyncio.gather(hello(), order)
            return greeting, reply.choices[0].message.content or ""

    with otel_replay.replaying(str(source)) as result:
        greeting, answer = asyncio.run(ask_both())

    assert greeting == _sse_text(bytes(streamed.response))
    assert answer == json.loads(plain.response)["choices"][0]["message"]["content"]
    assert [(s.order, s.recorded, s.how) for s in result.steps] == [
        (0, 1, "messages"),
        (1, 0, "messages"),
    ]
    assert result.identical


def test_a_changed_prompt_against_an_official_trace_is_named(
    recorded: Recorded, tmp_path: Path
) -> None:
    source = tmp_path / "official.jsonl"
    source.write_text(json.dumps(collector_json(recorded.official)) + "\n")
    with (
        otel_replay.replaying(str(source)) as result,
        openai.OpenAI(base_url=DEAD_URL, api_key=KEY, max_retries=0) as client,
    ):
        client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "Where is my order B-1?"}]
        )
    first = result.first_divergence
    assert first is not None and first.step == 0
    # No prompt hash: the span's messages are another producer's, compared by what they say.
    assert [c.field for c in first.changes] == ["model", "message 0"]
    assert first.changes[0].describe() == "model: gpt-4o-mini → gpt-4o"
    assert first.changes[1].describe() == (
        "message 0: user: Where is my order A-1234? → user: Where is my order B-1?"
    )


@pytest.mark.subprocess
def test_the_cli_replays_an_official_trace_from_a_jaeger_url(
    recorded: Recorded, tmp_path: Path
) -> None:
    context = recorded.official[0].context
    assert context is not None
    trace_id = f"{context.trace_id:032x}"
    plain, streamed = recorded.exchanges["official"]
    script = (
        "import openai\n"
        f"client = openai.OpenAI(base_url={DEAD_URL!r}, api_key='sk-x', max_retries=0)\n"
        "q = [{'role': 'user', 'content': 'Where is my order A-1234?'}]\n"
        "print(client.chat.completions.create(model='gpt-4o-mini', messages=q)"
        ".choices[0].message.content)\n"
        "q = [{'role': 'user', 'content': 'Hello there'}]\n"
        "chunks = client.chat.completions.create(model='gpt-4o-mini', messages=q, stream=True)\n"
        "print(''.join(c.choices[0].delta.content or '' for c in chunks if c.choices))\n"
    )
    with Jaeger({trace_id: collector_json(recorded.official)}) as jaeger:
        done = replay(tmp_path / "store", jaeger.url(trace_id), sys.executable, "-c", script)
        assert len(jaeger.requests) == 1  # fetched once, by the parent
    assert done.returncode == 0, done.stdout + done.stderr
    answer = json.loads(plain.response)["choices"][0]["message"]["content"]
    assert done.stdout.splitlines()[:2] == [answer, _sse_text(bytes(streamed.response))]
    assert "identical" in done.stdout
    assert "matched: messages 2; fidelity: semantic 2" in done.stdout
    assert "network attempts: 0" in done.stdout
