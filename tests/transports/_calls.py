"""The calls the transport tests make, through the real requests, urllib3 and aiohttp
clients, against a stand-in (``base``: its root URL); each returns what the application saw,
as plain data to compare between a recording and its replay.

Also run as a script (``python _calls.py REPO_ROOT BASE SUITE``) for the CLI replay tests: the
last line of stdout is JSON ``{"outputs": ..., "connects": [...], "preloaded": [...]}``,
``connects`` listing every real ``socket.connect`` the process made (an audit hook, below any
patching), ``preloaded`` the client libraries imported before the script's own calls (none: the
seams wrap them when they are imported).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

CONNECTS: list[str] = []

KEY = "sk-transport-secret-0123456789"
QUERY_KEY = "qk-transport-secret-9876543210"
X_API_KEY = "xk-transport-secret-5555555555"
SECRETS = (KEY, QUERY_KEY, X_API_KEY)


def chat(question: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": question}],
        "seed": 3,
        **extra,
    }


def requests_calls(base: str) -> list[Any]:
    """requests: a tool GET with credentials, a model call, a streamed model call (SSE read
    with iter_lines), a POST with a generator body; urllib3 directly: a GET and a stream."""
    import requests
    import urllib3

    out: list[Any] = []
    with requests.Session() as http:
        got = http.get(
            f"{base}/tools/orders/A-1234",
            params={"api_key": QUERY_KEY},
            headers={"Authorization": f"Bearer {KEY}", "x-api-key": X_API_KEY},
        )
        out.append([got.status_code, got.text])
        reply = http.post(
            f"{base}/v1/chat/completions",
            json=chat("Where is A-1?"),
            headers={"Authorization": f"Bearer {KEY}"},
        )
        out.append(reply.json()["choices"][0]["message"]["content"])
        with http.post(
            f"{base}/v1/chat/completions", json=chat("Where is A-2?", stream=True), stream=True
        ) as streamed:
            out.append([line.decode() for line in streamed.iter_lines()])

        def refund() -> Any:
            yield b'{"order_id": "A-1234", '
            yield b'"reason": "late"}'

        made = http.post(f"{base}/tools/refunds", data=refund())
        out.append([made.status_code, made.json()["order_id"]])
    plain = urllib3.request("GET", f"{base}/tools/orders/B-2222")
    out.append([plain.status, plain.data.decode()])
    pieces = urllib3.request(
        "POST", f"{base}/v1/chat/completions", json=chat("Hi", stream=True), preload_content=False
    )
    out.append([len(chunk) for chunk in pieces.stream(64)])
    return out


async def aiohttp_calls(base: str) -> list[Any]:
    """aiohttp: a tool GET with credentials, a model call, streamed model calls read with
    iter_any, readline (``async for``) and iter_chunked."""
    import aiohttp

    out: list[Any] = []
    async with aiohttp.ClientSession() as http:
        async with http.get(
            f"{base}/tools/orders/A-1234",
            params={"api_key": QUERY_KEY},
            headers={"Authorization": f"Bearer {KEY}", "x-api-key": X_API_KEY},
        ) as got:
            out.append([got.status, await got.text()])
        async with http.post(f"{base}/v1/chat/completions", json=chat("Where is A-1?")) as reply:
            out.append((await reply.json())["choices"][0]["message"]["content"])
        async with http.post(
            f"{base}/v1/chat/completions", json=chat("Where is A-2?", stream=True)
        ) as streamed:
            # Whole: how many network reads iter_any merges depends on timing.
            out.append("".join([bytes(c).decode() async for c in streamed.content.iter_any()]))
        async with http.post(
            f"{base}/v1/chat/completions", json=chat("Where is A-3?", stream=True)
        ) as streamed:
            out.append([line.decode() async for line in streamed.content])
        async with http.post(
            f"{base}/v1/chat/completions", json=chat("Where is A-4?", stream=True)
        ) as streamed:
            pieces = [len(c) async for c in streamed.content.iter_chunked(100)]
            out.append([sum(pieces), max(pieces)])
    return out


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect":
        CONNECTS.append(str(args[1]))


if __name__ == "__main__":
    sys.addaudithook(_audit)
    preloaded = [name for name in ("aiohttp", "requests", "urllib3") if name in sys.modules]
    sys.path.insert(0, sys.argv[1])
    base, suite = sys.argv[2], sys.argv[3]
    if suite == "requests":
        outputs: Any = requests_calls(base)
    elif suite == "aiohttp":
        outputs = asyncio.run(aiohttp_calls(base))
    else:  # a transport otel-replay does not serve
        import urllib.request

        try:
            with urllib.request.urlopen(f"{base}/tools/orders/A-1234", timeout=5) as answer:
                outputs = answer.read().decode()
        except OSError as exc:
            outputs = f"refused: {type(exc).__name__}: {exc}"
    print(json.dumps({"outputs": outputs, "connects": CONNECTS, "preloaded": preloaded}))
