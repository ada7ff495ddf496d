"""The fault-injection tests' agent: one call through each transport, the SDKs retrying on
their own and every other call retried once by the agent when it fails.

``agent(base)`` returns ``{"outputs": [...], "failures": [...]}``: what each call gave, and the
qualified name of each exception the agent caught before retrying (``retry=False``: none is
caught). Run as a script
(``python _faults_agent.py BASE``) it prints that as JSON on its last line.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
import anthropic
import httpx
import openai
import requests

import otel_replay

KEY = "sk-faults-not-a-secret"
T = TypeVar("T")


def chat(question: str, **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": question}], **extra}


@otel_replay.tool(effect="read")
def lookup(order_id: str) -> dict[str, Any]:
    """An order's total."""
    return {"order_id": order_id, "total": 12.5}


def _name(exc: BaseException) -> str:
    return f"{type(exc).__module__}.{type(exc).__qualname__}"


def _again(call: Callable[[], T], failures: list[str] | None) -> T:
    if failures is None:
        return call()
    try:
        return call()
    except Exception as exc:
        failures.append(_name(exc))
        return call()


async def _again_async(call: Callable[[], Awaitable[T]], failures: list[str] | None) -> T:
    if failures is None:
        return await call()
    try:
        return await call()
    except Exception as exc:
        failures.append(_name(exc))
        return await call()


async def _async_calls(base: str, failures: list[str] | None) -> list[Any]:
    out: list[Any] = []
    async with openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=KEY) as model:

        async def streamed_answer() -> str:
            stream = await model.chat.completions.create(**chat("Stream A-4?", stream=True))
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

        out.append(await _again_async(streamed_answer, failures))
    async with httpx.AsyncClient() as http:

        async def order() -> Any:
            got = await http.get(f"{base}/tools/orders/A-2000")
            return got.raise_for_status().json()

        out.append(await _again_async(order, failures))
    async with aiohttp.ClientSession(raise_for_status=True) as session:

        async def aio_order() -> Any:
            async with session.get(f"{base}/tools/orders/A-3000") as got:
                return await got.json()

        async def aio_stream() -> str:
            url = f"{base}/v1/chat/completions"
            async with session.post(url, json=chat("Stream A-3?", stream=True)) as got:
                return (await got.read()).decode()

        out.append(await _again_async(aio_order, failures))
        out.append(await _again_async(aio_stream, failures))
    return out


def agent(base: str, *, retry: bool = True) -> dict[str, Any]:
    failures: list[str] | None = [] if retry else None
    out: list[Any] = []
    with openai.OpenAI(base_url=f"{base}/v1", api_key=KEY) as model:
        answer = model.chat.completions.create(**chat("Where is A-1?"))
        out.append(answer.choices[0].message.content)
    with anthropic.Anthropic(base_url=base, api_key=KEY) as claude:

        def streamed_claude() -> str:
            with claude.messages.stream(
                model="claude-sonnet-4-6",
                max_tokens=64,
                messages=[{"role": "user", "content": "Where is A-2?"}],
            ) as stream:
                return stream.get_final_text()

        out.append(_again(streamed_claude, failures))
    with httpx.Client() as http:
        out.append(
            _again(
                lambda: http.get(f"{base}/tools/orders/A-1234").raise_for_status().json(), failures
            )
        )

        def streamed() -> str:
            url = f"{base}/v1/chat/completions"
            with http.stream("POST", url, json=chat("Stream A-1?", stream=True)) as got:
                return got.raise_for_status().read().decode()

        out.append(_again(streamed, failures))
    out.extend(asyncio.run(_async_calls(base, failures)))
    with requests.Session() as session:

        def order() -> Any:
            got = session.get(f"{base}/tools/orders/A-4000", timeout=5)
            got.raise_for_status()
            return got.json()

        out.append(_again(order, failures))
    out.append(_again(lambda: lookup("A-5000"), failures))
    return {"outputs": out, "failures": failures}


if __name__ == "__main__":
    print(json.dumps(agent(sys.argv[1])))
