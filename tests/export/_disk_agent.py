"""An agent for the full-disk tests: ``python _disk_agent.py BASE_URL COUNT SIZE``.

It asks the model COUNT questions with the openai SDK, each SIZE random bytes (base64: they
do not compress), prints ``recorded COUNT``, then waits for a line on stdin and returns.
"""

from __future__ import annotations

import base64
import os
import sys

import openai


def main() -> None:
    base_url, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    client = openai.OpenAI(base_url=base_url, api_key="sk-test-disk", max_retries=0)
    for _ in range(count):
        question = base64.b64encode(os.urandom(size)).decode()
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": question}]
        )
    print(f"recorded {count}", flush=True)
    sys.stdin.readline()


if __name__ == "__main__":
    main()
