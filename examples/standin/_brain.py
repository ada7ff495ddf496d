"""The stand-in's "model": what to answer, independent of any wire protocol.

Protocol modules translate a request into a `Prompt`, call `think`, and render the `Answer`.
The rules, in order:

1. Tool results follow the latest user turn -> a final answer quoting them (order status,
   weather, refund id, or the error the tool returned).
2. Tools are offered (and `tool_choice` is not "none") -> tool calls decided from the latest
   user text, only for tools the request offers, several at once when several apply:
     - "refund" / "money back" / "reimburse" + an order id -> `refund_order` (or
       `issue_refund` when that is the one offered) `{"order_id": "A-1234", "reason": ...}`
       (the id may come from an earlier user turn);
     - otherwise an order id like `A-1234` -> `lookup_order` `{"order_id": "A-1234"}`;
     - a known city, or "weather in <City>" -> `get_weather` `{"city": "Paris"}`.
3. Otherwise a chatty answer (mentioning what the tools can do when tools are offered).

Some models opt in to more (any other model is unaffected):
- `standin-triage`, before rule 2: a handoff tool is offered (`transfer_to_<agent>`, as the
  OpenAI Agents SDK names them) -> a call of the first one, `{}`;
- `standin-structured`, instead of a text answer (rules 1 and 3): an output tool is offered
  (`final_result…`, as Pydantic AI names them) -> a call of it whose arguments fill each
  property of its schema from the same key of the tool results, else the text (a string), 0
  (a number), false or null;
- `standin-loop` skips rule 1: tool results never satisfy it, it asks for the same tool calls
  again (an agent stuck in a loop);
- the bad tool calls of rule 2, each call of it made wrong: `standin-unoffered` calls
  `cancel_order`, a tool the request did not offer; `standin-bad-arguments` sends each argument
  as a one-item list (a string property gets an array); `standin-bad-json` sends arguments cut
  in half, JSON that does not parse (OpenAI protocols: Anthropic's `input` is an object).

All phrasing comes from the `rng` passed in, so a seeded rng gives a deterministic answer.
Token counts are word-based (`count_tokens`): every word and every punctuation mark is one token.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

Role = Literal["user", "assistant", "tool"]
Stop = Literal["end", "tool_calls", "max_tokens"]

CITIES = (
    "Amsterdam", "Berlin", "Boston", "Chicago", "Dublin", "Lisbon", "London", "Madrid",
    "Mumbai", "New York", "Paris", "Prague", "Rome", "San Francisco", "Seattle", "Singapore",
    "Sydney", "Tokyo", "Toronto", "Vienna",
)  # fmt: skip

TRIAGE_MODEL = "standin-triage"
STRUCTURED_MODEL = "standin-structured"
LOOP_MODEL = "standin-loop"
UNOFFERED_MODEL = "standin-unoffered"
BAD_ARGUMENTS_MODEL = "standin-bad-arguments"
BAD_JSON_MODEL = "standin-bad-json"
UNOFFERED_TOOL = "cancel_order"
HANDOFF_PREFIX = "transfer_to_"
OUTPUT_PREFIX = "final_result"
_ORDER_ID = re.compile(r"\b([A-Z]{1,3}-\d{3,8})\b", re.IGNORECASE)
_REFUND_TOOLS = ("refund_order", "issue_refund")  # the first one offered is called
_REFUND = re.compile(r"\b(refund|money back|reimburse|chargeback)", re.IGNORECASE)
_WEATHER_IN = re.compile(r"\bweather\b.*?\b(?:in|for|at)\s+([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*)")
_CITY = re.compile(r"\b(" + "|".join(re.escape(c) for c in CITIES) + r")\b", re.IGNORECASE)
_GREETING = re.compile(r"^\s*(hi|hello|hey|good (morning|afternoon|evening))\b", re.IGNORECASE)
_TOKEN = re.compile(r"\w+|[^\w\s]")
_MESSAGE_OVERHEAD = 4  # role and separators, as providers count them


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, object]
    broken: bool = False  # the arguments text is cut in half (`standin-bad-json`)

    def arguments_json(self, *, compact: bool = True) -> str:
        """OpenAI sends compact JSON; Anthropic's `partial_json` pieces use `", "` and `": "`."""
        if self.broken:
            whole = json.dumps(self.arguments, separators=(",", ":"))
            return whole[: len(whole) // 2]
        if compact:
            return json.dumps(self.arguments, separators=(",", ":"))
        return json.dumps(self.arguments)


@dataclass(frozen=True)
class Message:
    role: Role
    text: str
    tool_calls: tuple[ToolCall, ...] = ()  # on assistant turns that called tools
    tool_name: str | None = None  # on tool results, when the protocol says which tool


@dataclass(frozen=True)
class Tool:
    name: str
    definition_json: str  # the tool's definition as sent, for token counts


@dataclass(frozen=True)
class Prompt:
    system: str
    messages: tuple[Message, ...]
    tools: tuple[Tool, ...] = ()
    tool_choice: str = "auto"  # "auto", "none", "required" or a tool name
    max_tokens: int | None = None
    narrate_tool_calls: bool = False  # say a sentence before calling tools (Claude does)
    model: str = ""  # the model asked for: `standin-triage` and `standin-structured` opt in


@dataclass(frozen=True)
class Answer:
    text: str
    tool_calls: tuple[ToolCall, ...]
    stop: Stop
    input_tokens: int
    cached_tokens: int  # part of input_tokens already seen as a prompt prefix
    output_tokens: int


@dataclass
class PromptCache:
    """Remembers prompt prefixes, like a provider's automatic prompt caching (thread-safe)."""

    capacity: int = 4096
    _seen: OrderedDict[str, None] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def cached_tokens(self, segments: Sequence[tuple[str, int]]) -> int:
        """Tokens of the longest proper prefix of `segments` (text, tokens) seen before."""
        digest = hashlib.sha256()
        cached = total = 0
        with self._lock:
            for i, (text, tokens) in enumerate(segments):
                digest.update(text.encode() + b"\x00")
                key = digest.hexdigest()
                if i < len(segments) - 1 and key in self._seen:
                    cached = total + tokens
                    self._seen.move_to_end(key)
                self._seen[key] = None
                total += tokens
            while len(self._seen) > self.capacity:
                self._seen.popitem(last=False)
        return cached


def think(prompt: Prompt, rng: random.Random, cache: PromptCache | None = None) -> Answer:
    """Decide the answer to `prompt` (see the module docstring for the rules)."""
    segments = _segments(prompt)
    input_tokens = sum(tokens for _, tokens in segments)
    cached = cache.cached_tokens(segments) if cache is not None else 0

    latest = _latest_user_index(prompt.messages)
    results = [m for m in prompt.messages[latest + 1 :] if m.role == "tool"]
    calls: tuple[ToolCall, ...] = ()
    if results and prompt.model != LOOP_MODEL:
        text = _final_answer(results, rng)
    else:
        calls = _wrong(prompt.model, _decide_tool_calls(prompt, latest))
        if calls:
            text = _narration(calls, rng) if prompt.narrate_tool_calls else ""
        else:
            user_text = prompt.messages[latest].text if latest >= 0 else ""
            text = _chat(user_text, bool(prompt.tools), rng)
    if not calls and prompt.model == STRUCTURED_MODEL:
        calls = _structured(prompt, results, text)
        text = "" if calls else text

    stop: Stop = "tool_calls" if calls else "end"
    if prompt.max_tokens is not None and count_tokens(text) > prompt.max_tokens:
        text, calls, stop = _truncate(text, prompt.max_tokens), (), "max_tokens"
    output = count_tokens(text) + sum(count_tokens(c.name + c.arguments_json()) + 3 for c in calls)
    return Answer(text, calls, stop, input_tokens, min(cached, input_tokens), max(output, 1))


def _segments(prompt: Prompt) -> list[tuple[str, int]]:
    """The prompt as cacheable pieces in provider order: tools, system, then each message."""
    pieces: list[str] = []
    if prompt.tools:
        pieces.append("\n".join(t.definition_json for t in prompt.tools))
    if prompt.system:
        pieces.append(prompt.system)
    for m in prompt.messages:
        calls = "".join(c.name + c.arguments_json() for c in m.tool_calls)
        pieces.append(f"{m.role}:{m.text}{calls}")
    return [(p, count_tokens(p) + _MESSAGE_OVERHEAD) for p in pieces]


def _latest_user_index(messages: Sequence[Message]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            return i
    return -1


def _decide_tool_calls(prompt: Prompt, latest: int) -> tuple[ToolCall, ...]:
    offered = {t.name for t in prompt.tools}
    if not offered or prompt.tool_choice == "none" or latest < 0:
        return ()
    handoffs = [t.name for t in prompt.tools if t.name.startswith(HANDOFF_PREFIX)]
    if prompt.model == TRIAGE_MODEL and handoffs:
        return (ToolCall(handoffs[0], {}),)
    text = prompt.messages[latest].text
    calls: list[ToolCall] = []
    ids = list(dict.fromkeys(m.upper() for m in _ORDER_ID.findall(text)))

    refunder = next((name for name in _REFUND_TOOLS if name in offered), None)
    if _REFUND.search(text) and refunder is not None:
        earlier = [m.text for m in prompt.messages[:latest] if m.role == "user"]
        for previous in reversed(earlier):
            if ids:
                break
            ids = [m.upper() for m in _ORDER_ID.findall(previous)][-1:]
        reason = _refund_reason(text)
        calls += [ToolCall(refunder, {"order_id": i, "reason": reason}) for i in ids]
    elif ids and "lookup_order" in offered:
        calls += [ToolCall("lookup_order", {"order_id": i}) for i in ids]

    if "get_weather" in offered:
        cities = [_canonical_city(c) for c in _CITY.findall(text)]
        cities += _WEATHER_IN.findall(text)
        for city in dict.fromkeys(cities):
            calls.append(ToolCall("get_weather", {"city": city}))

    if prompt.tool_choice not in ("auto", "required", "none"):
        calls = [c for c in calls if c.name == prompt.tool_choice]
    return tuple(calls)


def _wrong(model: str, calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
    """``calls`` made wrong as the bad-tool-call models make them (see the module)."""
    if model == UNOFFERED_MODEL:
        return tuple(ToolCall(UNOFFERED_TOOL, c.arguments) for c in calls)
    if model == BAD_ARGUMENTS_MODEL:
        return tuple(ToolCall(c.name, {k: [v] for k, v in c.arguments.items()}) for c in calls)
    if model == BAD_JSON_MODEL:
        return tuple(ToolCall(c.name, c.arguments, broken=True) for c in calls)
    return calls


def _structured(prompt: Prompt, results: Sequence[Message], text: str) -> tuple[ToolCall, ...]:
    """A call of the first output tool offered, filled from ``results`` and ``text``."""
    output = next((t for t in prompt.tools if t.name.startswith(OUTPUT_PREFIX)), None)
    if output is None:
        return ()
    definition = json.loads(output.definition_json)
    schema = definition.get("function", definition)
    schema = schema.get("parameters") or schema.get("input_schema") or {}
    known: dict[str, object] = {}
    for result in results:
        with contextlib.suppress(ValueError):
            data = json.loads(result.text)
            known |= data if isinstance(data, dict) else {}
    fallback = {"string": text, "number": 0, "integer": 0, "boolean": False}
    arguments: dict[str, object] = {}
    for name, spec in (schema.get("properties") or {}).items():
        kind = spec.get("type") if isinstance(spec, dict) else None
        arguments[name] = known.get(name, fallback.get(str(kind)))
    return (ToolCall(output.name, arguments),)


def _canonical_city(name: str) -> str:
    return next(c for c in CITIES if c.lower() == name.lower())


def _refund_reason(text: str) -> str:
    lowered = text.lower()
    if re.search(r"broken|damaged|cracked|shattered|defective", lowered):
        return "item arrived damaged"
    if re.search(r"never arrived|not arrived|missing|lost|late", lowered):
        return "not delivered"
    if "wrong" in lowered:
        return "wrong item"
    return "customer request"


def _narration(calls: Sequence[ToolCall], rng: random.Random) -> str:
    what = {
        "lookup_order": "look up your order",
        "refund_order": "process that refund",
        "issue_refund": "process that refund",
        "get_weather": "check the weather",
    }
    doing = " and ".join(dict.fromkeys(what.get(c.name, f"use {c.name}") for c in calls))
    return rng.choice(["I'll {} for you.", "Let me {}.", "Sure, let me {} now."]).format(doing)


def _final_answer(results: Sequence[Message], rng: random.Random) -> str:
    sentences = [_describe_result(r, rng) for r in results]
    closer = rng.choice(
        [
            "Is there anything else I can help you with?",
            "Let me know if you need anything else.",
            "Happy to help with anything else!",
        ]
    )
    return " ".join([*sentences, closer])


def _describe_result(result: Message, rng: random.Random) -> str:
    try:
        data = json.loads(result.text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return f"Here is what I found: {result.text[:200]}"
    if "error" in data:
        error = data["error"]
        detail = error.get("message", error) if isinstance(error, dict) else error
        return f"I couldn't complete that: {detail}."
    if "refund_id" in data:
        return rng.choice(
            [
                "I've issued a refund of {amount} {currency} for order {order_id} "
                "(reference {refund_id}); it is {status}.",
                "Done: refund {refund_id} for order {order_id} is {status}, "
                "and {amount} {currency} will be returned to your original payment method.",
            ]
        ).format_map(_Defaults(data))
    if "order_id" in data and "status" in data:
        items = ", ".join(
            f"{i.get('quantity', 1)} x {i.get('name', 'item')}"
            for i in data.get("items", [])
            if isinstance(i, dict)
        )
        opening = rng.choice(
            [
                "Your order {order_id} is {status}.",
                "I checked order {order_id}: it is {status}.",
                "Good news, order {order_id} is {status}.",
            ]
        ).format_map(_Defaults(data))
        details = f" It contains {items} (total {data.get('total')} {data.get('currency', '')})."
        eta = data.get("estimated_delivery")
        tail = f" Estimated delivery: {eta}." if eta and data["status"] != "delivered" else ""
        return opening + (details if items else "") + tail
    if "temperature_c" in data:
        return rng.choice(
            [
                "In {city} it is currently {temperature_c}°C and {conditions}.",
                "The weather in {city}: {conditions}, {temperature_c}°C.",
            ]
        ).format_map(_Defaults(data))
    return f"Here is what I found: {json.dumps(data)[:200]}"


class _Defaults(dict[str, object]):
    def __missing__(self, key: str) -> str:
        return "unknown"


def _chat(user_text: str, tools_offered: bool, rng: random.Random) -> str:
    if not user_text.strip():
        return "Hello! How can I help you today?"
    if _GREETING.match(user_text):
        opening = rng.choice(["Hello!", "Hi there!", "Hey!"])
        return f"{opening} {_capabilities(rng) if tools_offered else 'How can I help you today?'}"
    snippet = user_text.strip().replace("\n", " ")
    snippet = snippet if len(snippet) <= 60 else snippet[:57].rstrip() + "..."
    opening = rng.choice(["Sure!", "Happy to help.", "Good question.", "Of course.", "Thanks!"])
    middle = rng.choice([f'You asked "{snippet}":', f'About "{snippet}":', f'On "{snippet}":'])
    body = rng.choice(
        [
            "here is a short, friendly answer from the local stand-in model.",
            "the stand-in model gives a canned but well-formed reply to that.",
            "this reply comes from the local stand-in, so it is brief and generic.",
        ]
    )
    tail = (
        _capabilities(rng) if tools_offered else rng.choice(["Anything else?", "Hope that helps!"])
    )
    return f"{opening} {middle} {body} {tail}"


def _capabilities(rng: random.Random) -> str:
    return rng.choice(
        [
            "I can look up an order (for example A-1234), check the weather in a city, "
            "or issue a refund.",
            "I can track orders, check the weather, and process refunds. What do you need?",
        ]
    )


def _truncate(text: str, max_tokens: int) -> str:
    kept, used = [], 0
    for piece in re.findall(r"\s*\S+", text):
        used += count_tokens(piece)
        if used > max_tokens:
            break
        kept.append(piece)
    return "".join(kept)
