"""Run by ``test_legacy_openai.py`` in a subprocess whose ``PYTHONPATH`` puts openai 2.x (the
last major version on plain ``httpx``) in front of the current one.

It checks it really got that SDK, records sync, async and streamed Chat Completions calls to a
stand-in with :class:`CaptureKit`, and prints one JSON document on the last line of stdout:
``{"openai_version", "spans", "received", "answers", "response_bodies"}``
(bodies base64). Usage: ``python _legacy_openai_script.py REPO_ROOT``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from typing import Any

sys.path.insert(0, sys.argv[1])

import httpx
import openai

assert openai.__version__.startswith("2."), f"expected openai 2.x, got {openai.__version__}"
assert "httpx2" not in sys.modules, "openai 2.x should not import httpx2"

from examples.standin import StandIn  # noqa: E402
from otel_replay.runs._handoff import handoff  # noqa: E402
from otel_replay.testing import CaptureKit  # noqa: E402

KEY = "sk-legacy-secret-0123456789"
SYSTEM = "You are a support agent for Acme."
MODEL = "gpt-4o-mini"
QUESTIONS = {
    "sync": "Tell me about order A-2001, please.",
    "async": "Tell me about order A-2002, please.",
    "sync-stream": "Tell me about order A-2003, please.",
    "async-stream": "Tell me about order A-2004, please.",
}


def params(question: str, stream: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": question},
        ],
        "seed": 7,
    }
    if stream:
        out |= {"stream": True, "stream_options": {"include_usage": True}}
    return out


def streamed_text(chunks: list[Any]) -> tuple[str, str]:
    return chunks[0].id, "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def sync_calls(standin: StandIn) -> dict[str, tuple[str, str]]:
    out = {}
    with openai.OpenAI(base_url=standin.openai_base_url, api_key=KEY) as client:
        assert isinstance(client._client, httpx.Client), type(client._client).__mro__
        result = client.chat.completions.create(**params(QUESTIONS["sync"], False))
        out["sync"] = (result.id, result.choices[0].message.content or "")
        with client.chat.completions.create(**params(QUESTIONS["sync-stream"], True)) as stream:
            out["sync-stream"] = streamed_text(list(stream))
    return out


async def async_calls(standin: StandIn) -> dict[str, tuple[str, str]]:
    out = {}
    async with openai.AsyncOpenAI(base_url=standin.openai_base_url, api_key=KEY) as client:
        assert isinstance(client._client, httpx.AsyncClient), type(client._client).__mro__
        result = await client.chat.completions.create(**params(QUESTIONS["async"], False))
        out["async"] = (result.id, result.choices[0].message.content or "")
        stream = await client.chat.completions.create(**params(QUESTIONS["async-stream"], True))
        async with stream:
            out["async-stream"] = streamed_text([chunk async for chunk in stream])
    return out


def main() -> None:
    consumer = handoff().attach()
    try:
        with StandIn(event_delay=0.001) as standin, CaptureKit() as kit:
            answers = sync_calls(standin)
            answers |= asyncio.run(async_calls(standin))
            received = standin.received
            spans = kit.spans()
            raw = sorted(kit.raw_spans(), key=lambda s: s.start_time or 0)
            handed = consumer.steps()
            fixtures = [handed.get(s.context.span_id) for s in raw if s.context is not None]
    finally:
        handoff().detach(consumer)
    print(
        json.dumps(
            {
                "openai_version": openai.__version__,
                "spans": spans,
                "received": [
                    {"path": r.path, "body": base64.b64encode(r.body).decode()} for r in received
                ],
                "answers": {k: list(v) for k, v in answers.items()},
                "response_bodies": [
                    base64.b64encode(f.response_body).decode() if f is not None else None
                    for f in fixtures
                ],
            }
        )
    )


if __name__ == "__main__":
    main()
