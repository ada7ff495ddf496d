"""A program whose streamed model answer the stand-in cuts off (``standin-cut``), read over
one transport: ``python _cut_agent.py BASE requests|httpx|aiohttp``. It reads the stream line
by line, printing each line's size, and lets the transport's error end it."""

from __future__ import annotations

import asyncio
import sys

BODY = {
    "model": "standin-cut",
    "messages": [{"role": "user", "content": "Tell me a long story."}],
    "stream": True,
}


def _requests(url: str) -> None:
    import requests

    reply = requests.post(url, json=BODY, stream=True)
    for line in reply.iter_lines():
        print(len(line), flush=True)


def _httpx(url: str) -> None:
    import httpx

    with httpx.stream("POST", url, json=BODY) as reply:
        for line in reply.iter_lines():
            print(len(line), flush=True)


async def _aiohttp(url: str) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as http, http.post(url, json=BODY) as reply:
        async for line in reply.content:
            print(len(line), flush=True)


if __name__ == "__main__":
    base, transport = sys.argv[1], sys.argv[2]
    url = f"{base}/v1/chat/completions"
    if transport == "aiohttp":
        asyncio.run(_aiohttp(url))
    else:
        {"requests": _requests, "httpx": _httpx}[transport](url)
