"""Deterministic fixtures and spans for store tests (also used by the subprocess writers)."""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import string
from collections.abc import Iterator
from typing import Any

from otel_replay.step import Step

_VOCABULARY = (
    "order refund package tracking customer delivery address invoice please check status "
    "the a of to and is it when will arrive today tomorrow week thanks help support agent"
)
WORDS = _VOCABULARY.split()


def tag(body: bytes) -> str:
    """``sha256:<hex>`` of ``body``."""
    return "sha256:" + hashlib.sha256(body).hexdigest()


def text(rng: random.Random, size: int) -> str:
    """Roughly ``size`` characters of words."""
    return " ".join(rng.choice(WORDS) for _ in range(max(1, size // 6)))


SHARED_SEED = 4242
"""The seed of the system prompt and tool list every ``shared`` chat sends."""


def _letters(rng: random.Random, size: int) -> str:
    """About ``size`` characters of made-up words: text that compresses like prose, not like
    a forty-word vocabulary."""
    words = ("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(size))
    return " ".join(itertools.islice(words, size // 6))


def _prompt(
    rng: random.Random, system_size: int, *, prose: bool = False
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    content = _letters(rng, system_size) if prose else text(rng, system_size)
    system = {"role": "system", "content": content}
    tools = [
        {"type": "function", "function": {"name": f"tool_{n}", "description": text(rng, 200)}}
        for n in range(3)
    ]
    return system, tools


def shared_system() -> bytes:
    """The exact bytes of the system message every ``shared`` chat sends (about 4 KB)."""
    system, _ = _prompt(random.Random(SHARED_SEED), 4000, prose=True)
    return json.dumps(system, separators=(",", ":")).encode()


def iter_chat(
    seed: int = 0, *, shared: bool = False, extra: dict[str, Any] | None = None
) -> Iterator[tuple[bytes, bytes]]:
    """(request, response) bodies of an endless chat whose requests re-send the history.

    ``shared``: the system prompt (:func:`shared_system`) and tool list are the same for every
    seed, as an agent's are across its runs. ``extra`` keys go into every request.
    """
    rng = random.Random(seed)
    if shared:
        system, tools = _prompt(random.Random(SHARED_SEED), 4000, prose=True)
    else:
        system, tools = _prompt(rng, 600)
    history: list[dict[str, Any]] = [system]
    while True:
        history.append({"role": "user", "content": text(rng, rng.randint(200, 800))})
        request = json.dumps(
            {"model": "gpt-test", **(extra or {}), "messages": history, "tools": tools},
            separators=(",", ":"),
        ).encode()
        answer = text(rng, rng.randint(200, 800))
        response = json.dumps(
            {"id": f"c{rng.getrandbits(32)}", "choices": [{"message": {"content": answer}}]},
            indent=2,
        ).encode()
        yield request, response
        history = [*history, {"role": "assistant", "content": answer}]


def chat_bodies(
    turns: int, seed: int = 0, *, shared: bool = False, extra: dict[str, Any] | None = None
) -> list[tuple[bytes, bytes]]:
    """The first ``turns`` (request, response) pairs of :func:`iter_chat`."""
    return list(itertools.islice(iter_chat(seed, shared=shared, extra=extra), turns))


def make_step(
    run_id: str,
    index: int,
    request: bytes,
    response: bytes | None = b"{}",
    *,
    error_type: str | None = None,
    start_ns: int = 1_700_000_000 * 10**9,
    kind: str = "llm",
) -> Step:
    """A complete step with the given bodies (``response=None``: no response)."""
    start = start_ns + index * 10**9
    return Step(
        run_id=run_id,
        index=index,
        trace_id=0x1234_5678_9ABC_DEF0_1234_5678_9ABC_DEF0,
        span_id=1000 + index,
        kind=kind,
        method="POST",
        url="https://api.example.test/v1/chat/completions",
        request_headers=[("content-type", "application/json"), ("authorization", "REDACTED")],
        request_body=request,
        request_hash=tag(request),
        status_code=None if response is None else 200,
        response_headers=[] if response is None else [("content-type", "application/json")],
        response_body=response or b"",
        response_hash=None if response is None else tag(response),
        chunks=[] if response is None else [(len(response), 5_000_000)],
        complete=response is not None,
        error_type=error_type,
        start_ns=start,
        end_ns=start + 5_000_000,
    )


def span(run_id: str, index: int | None, **attributes: Any) -> dict[str, Any]:
    """A span dict of a step (``index``) or of the run itself (``index=None``)."""
    attrs: dict[str, Any] = {"replay.run.id": run_id, **attributes}
    if index is not None:
        attrs["replay.step.index"] = index
    start = 1_700_000_000 * 10**9 + (index or 0) * 10**9
    return {
        "name": f"chat {index}" if index is not None else "invoke_agent test",
        "kind": "CLIENT",
        "trace_id": "12345678" * 4,
        "span_id": f"{1000 + (index or 0):016x}",
        "parent_span_id": None,
        "start_ns": start,
        "end_ns": start + 5_000_000,
        "status": {"code": "UNSET"},
        "attributes": attrs,
        "events": [],
    }
