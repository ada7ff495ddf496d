"""The agent ``test_replay_all`` records and replays: TURNS questions in one conversation over
httpx, TURNS read through ``otel_replay.side_effect`` (a recorded value), so one command
replays runs of any length.

Environment: CORPUS_TURNS (when recording), CORPUS_CHANGE=1 (the code change: the fourth
question is put otherwise), CORPUS_HANG=DIR (after its requests the agent makes a file in
DIR and waits).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading

import httpx

import otel_replay

QUESTIONS = [
    "Where is my order A-1234?",
    "Will the weather in Paris delay it?",
    "Can I change the delivery address?",
    "It arrived broken, please refund it.",
]
CHANGED = "It arrived broken: refund it today."


def converse(base_url: str, turns: int | None = None) -> list[str]:
    """Ask the questions (``turns`` of them, else CORPUS_TURNS); the answers."""
    asked = otel_replay.side_effect(
        "turns", lambda: turns if turns is not None else int(os.environ["CORPUS_TURNS"])
    )
    questions = list(QUESTIONS)
    if os.environ.get("CORPUS_CHANGE"):
        questions[3] = CHANGED
    messages: list[dict[str, str]] = []
    answers = []
    with httpx.Client(base_url=base_url) as client:
        for question in questions[:asked]:
            messages.append({"role": "user", "content": question})
            body = {"model": "gpt-4o-mini", "messages": messages}
            reply = client.post("/v1/chat/completions", json=body).json()
            answers.append(reply["choices"][0]["message"]["content"])
            messages.append({"role": "assistant", "content": answers[-1]})
    return answers


if __name__ == "__main__":
    print(len(converse("http://127.0.0.1:9")), "answers")  # nothing listens: replay answers
    hang = os.environ.get("CORPUS_HANG")
    if hang:
        tempfile.mkstemp(dir=hang)
        threading.Event().wait(600)  # time.sleep is a recorded step: replayed, it takes no time
    sys.exit(0)
