"""One machine of a fleet recording into one bucket, run under ``opentelemetry-instrument``.

    python tests/store/_fleet_agent.py BASE_URL NAME RUNS TURNS

Makes RUNS ``otel_replay.run`` blocks named ``NAME-<n>``, each a conversation of TURNS
chat completions through the real openai SDK that opens with the shared system prompt
(:func:`tests.store._data.shared_system`), as a fleet's agents do. Prints ``recorded
<run id> <calls>`` for each run once its calls returned.
"""

from __future__ import annotations

import json
import sys

import openai

import otel_replay
from tests.store._data import shared_system


def main() -> None:
    base_url, name, runs, turns = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    system = json.loads(shared_system())
    with openai.OpenAI(base_url=base_url, api_key="sk-fleet", max_retries=0) as client:
        for n in range(runs):
            run_id = f"{name}-{n}"
            with otel_replay.run("fleet", run_id=run_id):
                messages = [system]
                for turn in range(turns):
                    messages.append({"role": "user", "content": f"{run_id}: order A-{turn}?"})
                    reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
                    messages.append(
                        {"role": "assistant", "content": reply.choices[0].message.content or ""}
                    )
            print(f"recorded {run_id} {turns}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
