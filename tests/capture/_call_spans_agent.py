"""A script that asks a model three questions with no span of its own around the calls: the
SDK's (or an instrumentation's) call span is the outermost span of each call. The second
question is refused twice with a 429 before it is answered (``x-standin-fail-first``), so the
call has three attempts on the wire.

    python _call_spans_agent.py anthropic|openai [stream]

``anthropic``: the anthropic SDK 2.x, its own OpenTelemetry tracing on (its default).
``openai``: the openai SDK, under ``opentelemetry-instrumentation-openai-v2`` when
``opentelemetry-instrument`` loads it. Environment: STANDIN_URL, the stand-in.
"""

from __future__ import annotations

import os
import sys

import anthropic
import openai

QUESTIONS = ("Where is my order A-1234?", "Is order B-77 delayed?", "Hello there")
FAIL_TWICE = {"x-standin-fail-first": "2"}
BASE = os.environ["STANDIN_URL"].rstrip("/")
STREAM = "stream" in sys.argv[2:]


def ask_claude(client: anthropic.Anthropic, number: int, question: str) -> str:
    request = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 200,
        "messages": [{"role": "user", "content": question}],
        "extra_headers": FAIL_TWICE if number == 1 else None,
    }
    if STREAM:
        with client.messages.stream(**request) as events:  # type: ignore[arg-type]
            return events.get_final_text()
    reply = client.messages.create(**request)  # type: ignore[arg-type]
    return "".join(block.text for block in reply.content if block.type == "text")


def ask_gpt(client: openai.OpenAI, number: int, question: str) -> str:
    result = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": question}],
        stream=STREAM,
        extra_headers=FAIL_TWICE if number == 1 else None,
    )
    if STREAM:
        return "".join(c.choices[0].delta.content or "" for c in result if c.choices)
    return result.choices[0].message.content or ""


def main() -> None:
    if sys.argv[1] == "anthropic":
        claude = anthropic.Anthropic(base_url=BASE, api_key="sk-ant-not-a-secret", max_retries=2)
        for number, question in enumerate(QUESTIONS):
            print(ask_claude(claude, number, question))
    else:
        gpt = openai.OpenAI(base_url=f"{BASE}/v1", api_key="sk-not-a-secret", max_retries=2)
        for number, question in enumerate(QUESTIONS):
            print(ask_gpt(gpt, number, question))


if __name__ == "__main__":
    main()
