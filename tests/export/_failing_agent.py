"""An agent whose runs end in different ways: ``python _failing_agent.py BASE_URL raise|exit``.

* run ``r_recovered`` (a ``run()`` block): a rate limit the SDK retries past, then the answer;
* run ``r_block`` (a ``run()`` block): a model call, then a LookupError leaves the block
  (the program catches it and goes on);
* the process run (``OTEL_REPLAY_RUN_ID``): a model call, then the program dies of an uncaught
  RuntimeError quoting the API key it sent (``raise``), or calls ``sys.exit(3)`` (``exit``).
"""

from __future__ import annotations

import sys

import openai

import otel_replay

KEY = "sk-live-FAILRUN-9d3c1a7e5b2f4086"


def ask(client: openai.OpenAI, model: str, text: str) -> None:
    client.chat.completions.create(model=model, messages=[{"role": "user", "content": text}])


def main() -> None:
    base_url, ending = sys.argv[1], sys.argv[2]
    client = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=2)
    with otel_replay.run("recovering", run_id="r_recovered"):
        ask(client, "standin-flaky", "Where is order A-1?")
    try:
        with otel_replay.run("lookup", run_id="r_block"):
            ask(client, "gpt-4o-mini", "Where is order A-2?")
            raise LookupError("no order A-2")
    except LookupError:
        pass
    ask(client, "gpt-4o-mini", "Refund order A-3.")
    if ending == "exit":
        sys.exit(3)
    raise RuntimeError(f"refund service refused key {KEY}\nsecond line")


if __name__ == "__main__":
    main()
