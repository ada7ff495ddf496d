"""An agent that makes model calls and then ends as told, for the exit tests.

    python tests/export/_exit_agent.py BASE_URL COUNT return|raise|exit [PAUSE_S]

It asks the model COUNT questions with the openai SDK, outside any ``run()`` block (the
process run), PAUSE_S seconds apart (default 0), then returns, dies of an uncaught
RuntimeError (``raise``) or calls ``sys.exit(3)`` (``exit``).
"""

from __future__ import annotations

import sys
import time

import openai


def main() -> None:
    base_url, count, ending = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    client = openai.OpenAI(base_url=base_url, api_key="sk-test-exit", max_retries=0)
    for n in range(count):
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": f"Where is order A-{n}?"}]
        )
        time.sleep(pause)
    if ending == "exit":
        sys.exit(3)
    if ending == "raise":
        raise RuntimeError("the refund service is down")


if __name__ == "__main__":
    main()
