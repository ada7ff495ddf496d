"""A recorded process for soak tests, run under ``opentelemetry-instrument``.

    python tests/store/_soak_agent.py OPENAI_BASE_URL CALLS [--turns N]

Makes ``CALLS`` chat completions through the real openai SDK, ``N`` turns (default 20) per
``otel_replay.run`` block, each turn re-sending the conversation so far, as an agent does.
Then shuts the tracer provider down as the SDK does at exit, and prints
``shutdown <seconds>``: how long the shutdown took (the replay exporter writes what is left,
closes the store and merges what it wrote).
"""

from __future__ import annotations

import argparse
import time

import openai
from opentelemetry import trace

import otel_replay


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("base_url")
    parser.add_argument("calls", type=int)
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    with openai.OpenAI(base_url=args.base_url, api_key="sk-soak", max_retries=0) as client:
        call = 0
        while call < args.calls:
            with otel_replay.run(f"soak-{call // args.turns}"):
                messages: list[dict[str, str]] = [
                    {"role": "system", "content": "You answer questions about orders. " * 20}
                ]
                for _ in range(min(args.turns, args.calls - call)):
                    messages.append({"role": "user", "content": f"What about order A-{call}?"})
                    reply = client.chat.completions.create(
                        model="gpt-4o-mini",
                        messages=messages,  # type: ignore[arg-type]
                    )
                    messages.append(
                        {"role": "assistant", "content": reply.choices[0].message.content or ""}
                    )
                    call += 1
    provider = trace.get_tracer_provider()
    started = time.monotonic()
    provider.shutdown()  # type: ignore[attr-defined]
    print(f"shutdown {time.monotonic() - started:.3f}", flush=True)


if __name__ == "__main__":
    main()
