"""A customer-support agent: the example that otel-replay records and replays.

The agent answers a short scripted conversation with a classic tool loop over OpenAI Chat
Completions: the model asks for tools (look up an order, check the weather, refund an order),
the agent calls the HTTP tool backend with httpx and sends the results back, until the model
gives a final answer. The last answer is streamed token by token.

    python -m examples.standin &          # local stand-in model provider + tool backend
    python examples/support_agent.py

Environment (all optional):
    STANDIN_URL                        stand-in provider and tools, default http://127.0.0.1:8765
    OPENAI_API_KEY and OPENAI_BASE_URL  when both are set, that provider replaces the stand-in
    SUPPORT_TOOLS_URL                  tool backend, default $STANDIN_URL/tools
    SUPPORT_MODEL                      model name, default gpt-4o-mini
    SUPPORT_SYSTEM_PROMPT              system prompt, default SYSTEM_PROMPT below
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

import httpx
import openai
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageParam,
)

import otel_replay

MAX_STEPS = 6
SYSTEM_PROMPT = (
    "You are Ada, the customer-support assistant of Northwind Electronics. Be concise and "
    "friendly. Use the tools to look up orders, check the weather at the delivery address and "
    "issue refunds; never invent order details."
)
CONVERSATION = (
    "Hi! Where is my order A-1234?",
    "Will the weather in Paris delay the delivery?",
    "It arrived broken, please refund order A-1234.",
)


def _function(name: str, description: str, **properties: str) -> ChatCompletionFunctionToolParam:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    p: {"type": "string", "description": d} for p, d in properties.items()
                },
                "required": list(properties),
                "additionalProperties": False,
            },
        },
    }


TOOLS = [
    _function(
        "lookup_order", "Get an order's status, items and delivery date.", order_id="e.g. A-1234"
    ),
    _function("get_weather", "Current weather in a city.", city="City name, e.g. Paris"),
    _function(
        "refund_order",
        "Refund an order in full.",
        order_id="e.g. A-1234",
        reason="Why the customer wants a refund",
    ),
]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, exactly as the model wrote it


@dataclass(frozen=True)
class Config:
    model: str
    base_url: str
    api_key: str
    tools_url: str
    standin: bool

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Config:
        standin_url = env.get("STANDIN_URL", "http://127.0.0.1:8765").rstrip("/")
        real = bool(env.get("OPENAI_API_KEY") and env.get("OPENAI_BASE_URL"))
        return cls(
            model=env.get("SUPPORT_MODEL", "gpt-4o-mini"),
            base_url=env["OPENAI_BASE_URL"] if real else f"{standin_url}/v1",
            api_key=env["OPENAI_API_KEY"] if real else "sk-standin-not-a-secret",
            tools_url=env.get("SUPPORT_TOOLS_URL", f"{standin_url}/tools"),
            standin=not real,
        )


class SupportAgent:
    """Keeps the conversation and runs the model/tool loop for each customer message."""

    def __init__(self, client: openai.OpenAI, tools: httpx.Client, model: str) -> None:
        self.client, self.tools, self.model = client, tools, model
        self.messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": os.environ.get("SUPPORT_SYSTEM_PROMPT", SYSTEM_PROMPT)}
        ]

    def ask(self, question: str, *, stream: bool = False) -> str:
        """Answer `question`; with `stream`, tokens are printed as they arrive."""
        self.messages.append({"role": "user", "content": question})
        for _ in range(MAX_STEPS):
            text, calls = self._streamed_step() if stream else self._step()
            self.messages.append(_assistant_message(text, calls))
            if not calls:
                return text
            for call in calls:
                result = self.call_tool(call.name, call.arguments)
                self.messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        raise RuntimeError(f"no final answer after {MAX_STEPS} model calls")

    def _step(self) -> tuple[str, list[ToolCall]]:
        completion = self.client.chat.completions.create(
            model=self.model, messages=self.messages, tools=TOOLS
        )
        message = completion.choices[0].message
        calls = [
            ToolCall(c.id, c.function.name, c.function.arguments)
            for c in message.tool_calls or []
            if c.type == "function"
        ]
        return message.content or "", calls

    def _streamed_step(self) -> tuple[str, list[ToolCall]]:
        stream = self.client.chat.completions.create(
            model=self.model,
            messages=self.messages,
            tools=TOOLS,
            stream=True,
            stream_options={"include_usage": True},
        )
        text: list[str] = []
        calls: dict[int, list[str]] = {}  # index -> [id, name, arguments], filled by deltas
        usage = None
        with stream:
            for chunk in stream:
                for choice in chunk.choices:
                    if choice.delta.content:
                        print("agent> " if not text else "", choice.delta.content, sep="", end="")
                        sys.stdout.flush()
                        text.append(choice.delta.content)
                    for delta in choice.delta.tool_calls or []:
                        call = calls.setdefault(delta.index, ["", "", ""])
                        call[0] = delta.id or call[0]
                        call[1] += (delta.function and delta.function.name) or ""
                        call[2] += (delta.function and delta.function.arguments) or ""
                usage = chunk.usage or usage
        if text:
            print()
        if usage:
            print(f"  [usage] {usage.prompt_tokens} in, {usage.completion_tokens} out")
        return "".join(text), [ToolCall(*calls[i]) for i in sorted(calls)]

    def call_tool(self, name: str, arguments: str) -> str:
        """Run one tool against the HTTP backend; errors go back to the model as JSON."""
        try:
            args = json.loads(arguments)
            if name == "lookup_order":
                response = self.tools.get(f"/orders/{args['order_id']}")
            elif name == "get_weather":
                response = self.tools.get("/weather", params={"city": args["city"]})
            elif name == "refund_order":
                response = self.tools.post("/refunds", json=args)
            else:
                return json.dumps({"error": f"unknown tool {name}"})
        except (ValueError, KeyError, TypeError) as err:
            return json.dumps({"error": f"bad arguments for {name}: {err}"})
        print(f"  [tool] {name}({arguments}) -> HTTP {response.status_code}")
        return response.text


def _assistant_message(text: str, calls: list[ToolCall]) -> ChatCompletionAssistantMessageParam:
    message: ChatCompletionAssistantMessageParam = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ]
    return message


def agent_run(name: str) -> contextlib.AbstractContextManager[object]:
    """`otel_replay.run` opens the agent's span; builds without it just run unwrapped."""
    run = getattr(otel_replay, "run", None)
    return run(name=name) if run is not None else contextlib.nullcontext()


def main() -> None:
    config = Config.from_env()
    client = openai.OpenAI(base_url=config.base_url, api_key=config.api_key)
    tools = httpx.Client(base_url=config.tools_url, timeout=10.0)
    with agent_run("support-agent"), client, tools:
        agent = SupportAgent(client, tools, config.model)
        for number, question in enumerate(CONVERSATION, start=1):
            print(f"customer> {question}")
            last = number == len(CONVERSATION)
            try:
                answer = agent.ask(question, stream=last)
            except (openai.APIConnectionError, httpx.TransportError) as err:
                hint = " (start it with: python -m examples.standin)" if config.standin else ""
                sys.exit(f"cannot reach {config.base_url} or {config.tools_url}: {err}{hint}")
            if not last:
                print(f"agent> {answer}")
            print()


if __name__ == "__main__":
    main()
