"""Twelve model calls at once, with no span around them: ``python _concurrent_agent.py ROOT
BASE_URL threads|asyncio``.

Every call asks about another order; even ones offer a tool (the answer is a call to it with
that order's id), odd ones do not (a chatty answer), every third one streams. The program
opens no span of its own, so the official openai instrumentation writes each call as a trace
of its own. The last line printed is ``{"answers": {question: answer}}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai

TOOL = {
    "type": "function",
    "function": {
        "name": "lookup_order",
        "description": "Look up an order by id.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    },
}
QUESTIONS = [f"Where is my order A-{1001 + n}?" for n in range(12)]


def _request(n: int) -> dict[str, Any]:
    request: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": QUESTIONS[n]}],
    }
    if n % 2 == 0:
        request["tools"] = [TOOL]
    if n % 3 == 0:
        request["stream"] = True
    return request


def _answer(message: Any) -> Any:
    calls = [[c.function.name, json.loads(c.function.arguments)] for c in message.tool_calls or ()]
    return {"text": message.content or "", "calls": calls}


def _streamed(chunks: list[Any]) -> Any:
    text = ""
    calls: dict[int, list[str]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for call in choice.delta.tool_calls or ():
                name, arguments = calls.setdefault(call.index, ["", ""])
                function = call.function
                calls[call.index] = [
                    name + (function.name or "" if function else ""),
                    arguments + (function.arguments or "" if function else ""),
                ]
    parsed = [[name, json.loads(arguments)] for name, arguments in calls.values()]
    return {"text": text, "calls": parsed}


def with_threads(base_url: str) -> dict[str, Any]:
    with openai.OpenAI(base_url=base_url, api_key="sk-concurrent", max_retries=0) as client:

        def ask(n: int) -> Any:
            request = _request(n)
            if request.get("stream"):
                return _streamed(list(client.chat.completions.create(**request)))
            return _answer(client.chat.completions.create(**request).choices[0].message)

        with ThreadPoolExecutor(max_workers=len(QUESTIONS)) as pool:
            answers = list(pool.map(ask, range(len(QUESTIONS))))
    return dict(zip(QUESTIONS, answers, strict=True))


async def with_asyncio(base_url: str) -> dict[str, Any]:
    async with openai.AsyncOpenAI(base_url=base_url, api_key="sk-concurrent", max_retries=0) as c:

        async def ask(n: int) -> Any:
            request = _request(n)
            if request.get("stream"):
                return _streamed(
                    [chunk async for chunk in await c.chat.completions.create(**request)]
                )
            return _answer((await c.chat.completions.create(**request)).choices[0].message)

        answers = await asyncio.gather(*(ask(n) for n in range(len(QUESTIONS))))
    return dict(zip(QUESTIONS, answers, strict=True))


def main() -> None:
    sys.path.insert(0, sys.argv[1])
    base_url, how = sys.argv[2], sys.argv[3]
    answers = with_threads(base_url) if how == "threads" else asyncio.run(with_asyncio(base_url))
    print(json.dumps({"answers": answers}, sort_keys=True))


if __name__ == "__main__":
    main()
