"""An agent-shaped script for the record/replay SDK matrix, run in a subprocess twice: once
recorded against the stand-in, once under ``otel-replay replay`` with the stand-in stopped.

Usage: ``python _sdk_script.py REPO_ROOT SUITE OPENAI_BASE_URL ANTHROPIC_BASE_URL`` with SUITE
``openai`` (Chat Completions and Responses; sync, async, streaming, concurrent) or
``anthropic`` (Messages; sync, async, streaming). The last line of stdout is JSON:
``{"sdk": version, "outputs": [...], "connects": [addresses]}``; ``connects`` lists every real
``socket.connect`` the process made (seen by an audit hook, below any patching).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

CONNECTS: list[str] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect":
        CONNECTS.append(str(args[1]))


sys.addaudithook(_audit)
sys.path.insert(0, sys.argv[1])

KEY = "sk-matrix-not-a-secret"
MODEL = "gpt-4o-mini"


def _chat(question: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": "You are a support agent for Acme."},
            {"role": "user", "content": question},
        ],
        "seed": 7,
        **extra,
    }


def openai_suite(base_url: str) -> tuple[str, list[str]]:
    import openai

    out: list[str] = []
    with openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0) as client:
        reply = client.chat.completions.create(**_chat("Where is order A-1?"))
        out.append(f"{reply.id} {reply.choices[0].message.content}")
        stream = client.chat.completions.create(
            **_chat("Where is order A-2?", stream=True, stream_options={"include_usage": True})
        )
        out.append("".join(c.choices[0].delta.content or "" for c in stream if c.choices))
        response = client.responses.create(model=MODEL, input="Summarise order A-3.")
        out.append(f"{response.id} {response.output_text}")

    async def concurrent() -> list[str]:
        async with openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0) as client:
            plain = await client.chat.completions.create(**_chat("Where is order A-4?"))
            streamed = await client.chat.completions.create(
                **_chat("Where is order A-5?", stream=True)
            )
            text = "".join([c.choices[0].delta.content or "" async for c in streamed])
            many = await asyncio.gather(
                *(
                    client.chat.completions.create(**_chat(f"Where is order B-{n}?"))
                    for n in range(8)
                )
            )
            return [
                f"{plain.id} {plain.choices[0].message.content}",
                text,
                *(f"{m.id} {m.choices[0].message.content}" for m in many),
            ]

    out.extend(asyncio.run(concurrent()))
    return openai.__version__, out


def anthropic_suite(base_url: str) -> tuple[str, list[str]]:
    import anthropic

    def params(question: str) -> dict[str, Any]:
        return {
            "model": "claude-sonnet-4-5",
            "max_tokens": 200,
            "system": "You are a support agent for Acme.",
            "messages": [{"role": "user", "content": question}],
        }

    out: list[str] = []
    with anthropic.Anthropic(base_url=base_url, api_key=KEY, max_retries=0) as client:
        message = client.messages.create(**params("Where is order C-1?"))
        out.append(f"{message.id} {message.content[0].text}")
        with client.messages.stream(**params("Where is order C-2?")) as stream:
            out.append("".join(stream.text_stream))

    async def run_async() -> list[str]:
        async with anthropic.AsyncAnthropic(base_url=base_url, api_key=KEY, max_retries=0) as c:
            message = await c.messages.create(**params("Where is order C-3?"))
            return [f"{message.id} {message.content[0].text}"]

    out.extend(asyncio.run(run_async()))
    return anthropic.__version__, out


def main() -> None:
    suite, openai_url, anthropic_url = sys.argv[2], sys.argv[3], sys.argv[4]
    version, outputs = (
        openai_suite(openai_url) if suite == "openai" else anthropic_suite(anthropic_url)
    )
    print(json.dumps({"sdk": version, "outputs": outputs, "connects": CONNECTS}))


if __name__ == "__main__":
    main()
