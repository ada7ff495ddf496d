"""The agent tests/replay/test_pytest_golden.py records as golden tests (copied in as
``agent.py``): a model call offering a tool, the tool, a value, a checkpoint, and a second
model call with the tool's result; sync and async. ``GOLDEN_URL`` is the provider's."""

import json
import os

import openai

import otel_replay

MODEL = "gpt-4o-mini"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Get an order's status.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    }
]


@otel_replay.tool(effect="read")
def lookup_order(order_id: str) -> dict:
    return {"order_id": order_id, "status": os.environ.get("GOLDEN_STATUS", "shipped")}


def _messages(question):
    return [{"role": "user", "content": question}]


def _after(messages, reply):
    call = reply.choices[0].message.tool_calls[0]
    otel_replay.now()
    order = lookup_order(**json.loads(call.function.arguments))
    state = otel_replay.checkpoint("after_lookup", {"order": order})
    return [
        *messages,
        reply.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps(state["order"])},
    ]


def run_agent(question="Where is my order A-1234?"):
    client = openai.OpenAI(
        base_url=os.environ["GOLDEN_URL"], api_key="sk-golden-not-a-secret", max_retries=0
    )
    messages = _messages(question)
    first = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, seed=7)
    messages = _after(messages, first)
    final = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, seed=7)
    return final.choices[0].message.content


async def run_agent_async(question="Where is my order A-1234?"):
    # Closed in the test's event loop: one left to the garbage collector closes its
    # connections in a loop that may be gone.
    async with openai.AsyncOpenAI(
        base_url=os.environ["GOLDEN_URL"], api_key="sk-golden-not-a-secret", max_retries=0
    ) as client:
        messages = _messages(question)
        first = await client.chat.completions.create(
            model=MODEL, messages=messages, tools=TOOLS, seed=7
        )
        messages = _after(messages, first)
        final = await client.chat.completions.create(
            model=MODEL, messages=messages, tools=TOOLS, seed=7
        )
    return final.choices[0].message.content
