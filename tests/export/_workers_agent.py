"""An agent that hands model calls to worker processes, for the worker tests.

    python tests/export/_workers_agent.py executor|pool fork|spawn|forkserver

The parent asks the model (the real openai SDK, at ``$STANDIN_URL``), hands one question to
a worker and waits for it, then two questions to two workers at once (a barrier makes two
workers take them together), then asks again. ``AGENT_CHANGE=1`` changes the question of the
first worker call; ``AGENT_EXTRA=1`` makes that call fetch an order too (a request no
recording has); ``AGENT_QUIET=1`` starts the workers before the parent's first call (it
makes none). It prints the answers, then how many worker processes answered.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import httpx
import openai

_barrier: Any = None


def _init(barrier: Any) -> None:
    global _barrier  # noqa: PLW0603 - one barrier per worker, given when it starts
    _barrier = barrier


def ask(question: str) -> tuple[str, int]:
    base = os.environ["STANDIN_URL"]
    if os.environ.get("AGENT_EXTRA") and question.startswith("Where"):
        httpx.get(f"{base}/tools/orders/A-9999")
    with openai.OpenAI(base_url=f"{base}/v1", api_key="sk-workers", max_retries=0) as client:
        answer = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": question}], seed=7
        )
    return answer.choices[0].message.content or "", os.getpid()


def ask_together(question: str) -> tuple[str, int]:
    _barrier.wait(60)  # two workers at once
    return ask(question)


def main() -> None:
    kind, method = sys.argv[1], sys.argv[2]
    first = "Where is my order A-1001?"
    if os.environ.get("AGENT_CHANGE"):
        first = "Where on earth is my order A-1001?"
    context = multiprocessing.get_context(method)
    barrier = context.Barrier(2)
    quiet = bool(os.environ.get("AGENT_QUIET"))
    answers = [("", 0)] if quiet else [ask("Hello, I need help with my orders.")]
    start = {"initializer": _init, "initargs": (barrier,)}
    if kind == "executor":
        with ProcessPoolExecutor(2, mp_context=context, **start) as e:
            answers.append(e.submit(ask, first).result())
            answers += e.map(ask_together, ["What about A-1002?", "And A-1003?"])
    else:
        with context.Pool(2, **start) as pool:
            answers.append(pool.apply(ask, (first,)))
            answers += pool.map(ask_together, ["What about A-1002?", "And A-1003?"], chunksize=1)
    answers.append(ask("Thanks, that is all."))
    for text, _ in answers[quiet:]:
        print(text, flush=True)
    workers = {pid for _, pid in answers[1:-1]}
    print(f"workers: {len(workers - {os.getpid()})}", flush=True)


if __name__ == "__main__":
    main()
