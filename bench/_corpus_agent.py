"""A chat agent for the corpus benchmarks: a conversation of TURNS Chat Completions calls over
plain httpx, TURNS read through ``otel_replay.side_effect`` (a recorded value), so one command
replays every bundle of a corpus whatever its length (1 value step + TURNS model steps).

    CORPUS_TURNS=12 STANDIN_URL=http://127.0.0.1:8765 python bench/_corpus_agent.py
"""

from __future__ import annotations

import os

import httpx

import otel_replay

SYSTEM = "You are Ada, the support assistant of Northwind Electronics. Be concise."
QUESTIONS = (
    "Where is my order A-1234?",
    "Will the weather in Paris delay the delivery?",
    "Can I change the delivery address?",
    "It arrived broken, what can I do?",
    "How long does a refund take?",
)
DEAD = "http://127.0.0.1:9"  # under replay nothing is sent; a missed request fails at once


def converse(client: httpx.Client, turns: int) -> list[str]:
    """Ask ``turns`` questions in one conversation (the history re-sent each time); the
    answers."""
    messages: list[dict[str, str]] = [{"role": "system", "content": SYSTEM}]
    answers = []
    for turn in range(turns):
        messages.append({"role": "user", "content": QUESTIONS[turn % len(QUESTIONS)]})
        body = {"model": "gpt-4o-mini", "messages": messages, "seed": turn}
        reply = client.post("/v1/chat/completions", json=body)
        reply.raise_for_status()
        text = str(reply.json()["choices"][0]["message"]["content"])
        messages.append({"role": "assistant", "content": text})
        answers.append(text)
    return answers


def turns(asked: int | None = None) -> int:
    """How many questions this run asks, a recorded value (on replay, the recorded one):
    ``asked``, else CORPUS_TURNS, else 10."""
    return otel_replay.side_effect(
        "turns", lambda: int(os.environ.get("CORPUS_TURNS", "10")) if asked is None else asked
    )


def main() -> None:
    with httpx.Client(base_url=os.environ.get("STANDIN_URL", DEAD)) as client:
        answers = converse(client, turns())
    print(f"{len(answers)} answers, the last: {answers[-1][:60]}")


if __name__ == "__main__":
    main()
