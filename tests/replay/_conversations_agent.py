"""Four support conversations at once, two turns each: ``python _conversations_agent.py ROOT
BASE_URL [change=N] [reversed] [again]``.

One support agent talks with four customers: every conversation has the same system prompt
(in the ``developer`` role for the even ones, as OpenAI's newer models take it) and its own
question about an order; the model calls the
``lookup_order`` tool, the program answers the call and asks again with the whole history
(the model's turn appended as the SDK returned it). The program opens no span of its own.

``change=N``: conversation N asks its question in other words. ``reversed``: the
conversations start in reverse order (concurrent requests come in another order from one run
to the next). ``again``: once all are done, conversation N's opening is asked once more. The
last line printed is ``{"answers": {question: final answer}}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import openai
from _concurrent_agent import TOOL  # beside this script, on its path

CUSTOMERS = ["Ana", "Bo", "Cy", "Di"]


def opening(n: int, changed: int | None) -> list[Any]:
    """The first messages of conversation ``n``."""
    question = f"Where is my order A-{2001 + n}?"
    if n == changed:
        question = f"Where is my parcel A-{2001 + n}?"
    role = "developer" if n % 2 == 0 else "system"
    system = "You are the support agent of Acme. Look orders up before answering."
    return [{"role": role, "content": system}, {"role": "user", "content": question}]


async def converse(client: openai.AsyncOpenAI, n: int, changed: int | None) -> tuple[str, str]:
    messages = opening(n, changed)
    first = await client.chat.completions.create(
        model="gpt-4o-mini", messages=messages, tools=[TOOL]
    )
    turn = first.choices[0].message
    messages.append(turn)
    for call in turn.tool_calls or ():
        order = json.loads(call.function.arguments)["order_id"]
        result = {"order_id": order, "status": "shipped", "customer": CUSTOMERS[n]}
        messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
    second = await client.chat.completions.create(
        model="gpt-4o-mini", messages=messages, tools=[TOOL]
    )
    return messages[1]["content"], second.choices[0].message.content or ""


async def main(base_url: str, changed: int | None, order: list[int], again: bool) -> None:
    async with openai.AsyncOpenAI(base_url=base_url, api_key="sk-convo", max_retries=0) as c:
        answers = await asyncio.gather(*(converse(c, n, changed) for n in order))
        if again and changed is not None:
            await c.chat.completions.create(
                model="gpt-4o-mini", messages=opening(changed, changed), tools=[TOOL]
            )
    print(json.dumps({"answers": dict(answers)}, sort_keys=True))


if __name__ == "__main__":
    sys.path.insert(0, sys.argv[1])
    options = sys.argv[3:]
    change = next((int(o.split("=")[1]) for o in options if o.startswith("change=")), None)
    order = list(range(len(CUSTOMERS)))
    asyncio.run(
        main(
            sys.argv[2], change, order[::-1] if "reversed" in options else order, "again" in options
        )
    )
