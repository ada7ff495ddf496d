"""A worker process that asks the model, hands the answer back, then waits for more work
until its parent terminates it (SIGTERM), as ``Pool.__exit__`` does, for the worker tests.

    python tests/export/_idle_worker_agent.py

The worker's call goes through the real openai SDK (at ``$STANDIN_URL``); recorded with the
official openai-v2 instrumentation on, its ``chat`` span ends after the step and waits in the
batch span processor. It prints the answer, then the worker's exit code.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from typing import Any

import openai


def work(tasks: Any, results: Any) -> None:
    base = os.environ["STANDIN_URL"]
    with openai.OpenAI(base_url=f"{base}/v1", api_key="sk-idle", max_retries=0) as client:
        answer = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Where is A-1001?"}]
        )
    results.put(answer.choices[0].message.content)
    tasks.get()  # idle, as a pool worker waits for its next task: never comes


def main() -> None:
    context = multiprocessing.get_context("fork")
    tasks, results = context.SimpleQueue(), context.SimpleQueue()
    worker = context.Process(target=work, args=(tasks, results))
    worker.start()
    print(results.get(), flush=True)
    time.sleep(0.5)  # the worker is waiting on its queue by now
    worker.terminate()
    worker.join()
    print(f"worker exit: {worker.exitcode}", flush=True)


if __name__ == "__main__":
    main()
