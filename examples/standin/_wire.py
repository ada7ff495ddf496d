"""Reply shapes and byte-level helpers shared by the stand-in's protocol modules.

A protocol module returns a `JsonReply` (one body) or an `SseReply` (a sequence of complete SSE
events); the server decides how to put them on the wire (chunking, delays, cuts).
"""

from __future__ import annotations

import json
import random
import re
import string
import time
from dataclasses import dataclass
from typing import Any

Headers = tuple[tuple[str, str], ...]

# Ids and other wire noise must stay random even when a request's seed fixes the phrasing, as
# with a real provider; a private SystemRandom also ignores anyone seeding the global `random`.
_NOISE = random.SystemRandom()
_ALNUM = string.ascii_letters + string.digits


@dataclass(frozen=True)
class JsonReply:
    """A complete (non-streaming) HTTP answer."""

    status: int
    body: bytes
    headers: Headers = ()


@dataclass(frozen=True)
class SseReply:
    """A streaming answer: each item of `events` is one whole SSE event, ending in a blank line."""

    events: tuple[bytes, ...]
    headers: Headers = ()


Reply = JsonReply | SseReply


def json_bytes(obj: object, *, pretty: bool = False) -> bytes:
    """Serialise like the providers do: compact by default, 2-space indent when `pretty`."""
    if pretty:
        return json.dumps(obj, indent=2, ensure_ascii=False).encode()
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def json_reply(
    status: int, obj: object, *, pretty: bool = False, headers: Headers = ()
) -> JsonReply:
    return JsonReply(status, json_bytes(obj, pretty=pretty), headers)


def sse_event(data: object, event: str | None = None) -> bytes:
    """One SSE event; `data` is JSON-encoded unless it is already a string (like `[DONE]`)."""
    payload = data if isinstance(data, str) else json_bytes(data).decode()
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def new_id(prefix: str, length: int = 24, alphabet: str = _ALNUM) -> str:
    return prefix + "".join(_NOISE.choice(alphabet) for _ in range(length))


def hex_id(prefix: str, length: int = 48) -> str:
    return new_id(prefix, length, "0123456789abcdef")


def now() -> int:
    return int(time.time())


def text_deltas(text: str, rng: random.Random) -> list[str]:
    """Split `text` into token-sized pieces (1-3 words, whitespace kept) as a model streams it."""
    words = re.findall(r"\s*\S+", text)
    if not words:
        return [text] if text else []
    pieces: list[str] = []
    i = 0
    while i < len(words):
        step = rng.randint(1, 3)
        pieces.append("".join(words[i : i + step]))
        i += step
    pieces[-1] += text[len("".join(pieces)) :]  # trailing whitespace the regex left out
    return pieces


def json_deltas(arguments: str, rng: random.Random) -> list[str]:
    """Split a JSON string into the small arbitrary pieces providers stream tool arguments in."""
    pieces: list[str] = []
    i = 0
    while i < len(arguments):
        step = rng.randint(3, 9)
        pieces.append(arguments[i : i + step])
        i += step
    return pieces


def obj_get(obj: object, key: str, default: Any = None) -> Any:
    """`obj[key]` when `obj` is a dict, else `default`: request bodies are untrusted JSON."""
    return obj.get(key, default) if isinstance(obj, dict) else default


def noise() -> str:
    """Random padding, like the `obfuscation` field of OpenAI stream chunks."""
    return new_id("", _NOISE.randint(1, 16))
