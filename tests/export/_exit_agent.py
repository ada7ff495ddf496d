"""An agent that makes model calls and then ends as told, for the exit tests.

    python tests/export/_exit_agent.py BASE_URL COUNT return|raise|exit|thread [PAUSE_S]

It asks the model COUNT questions with the openai SDK, outside any ``run()`` block (the
process run), PAUSE_S seconds apart (default 0), then returns, dies of an uncaught
RuntimeError (``raise``) or calls ``sys.exit(3)`` (``exit``). ``thread``: the last question
is asked by a thread the main thread does not join, after it returned: the step is written
at the interpreter's exit (its ``atexit`` hooks), not before.
"""

from __future__ import annotations

import sys
import threading
import time

import openai


def main() -> None:
    base_url, count, ending = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    client = openai.OpenAI(base_url=base_url, api_key="sk-test-exit", max_retries=0)

    def ask(n: int) -> None:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": f"Where is order A-{n}?"}]
        )

    for n in range(count - 1 if ending == "thread" else count):
        ask(n)
        time.sleep(pause)
    if ending == "thread":
        threading.Thread(target=lambda: (time.sleep(0.5), ask(count - 1))).start()
    if ending == "exit":
        sys.exit(3)
    if ending == "raise":
        raise RuntimeError("the refund service is down")


if __name__ == "__main__":
    main()
