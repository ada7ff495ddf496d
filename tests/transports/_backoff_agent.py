"""A raw aiohttp agent that backs off on HTTP 429 by the status alone, never reading the
error's body: ``python _backoff_agent.py BASE_URL``. The stand-in answers 429 to the first two
attempts (``x-standin-fail-first``). The last line printed is ``{"attempts": N, "text": …}``."""

from __future__ import annotations

import asyncio
import json
import sys

import aiohttp


async def main(base_url: str) -> None:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello there"}]}
    headers = {"x-standin-fail-first": "2"}
    async with aiohttp.ClientSession() as http:
        for attempt in range(5):
            async with http.post(f"{base_url}/chat/completions", json=body, headers=headers) as r:
                if r.status == 429:
                    await asyncio.sleep(0.01 * 2**attempt)
                    continue
                answer = await r.json()
            text = answer["choices"][0]["message"]["content"]
            print(json.dumps({"attempts": attempt + 1, "text": text}))
            return
    raise SystemExit("gave up")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
