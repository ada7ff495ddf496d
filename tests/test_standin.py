"""The stand-in provider, driven by the real SDKs (openai and anthropic on httpx2) and httpx."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from examples.standin import RecordedRequest, StandIn, tools
from examples.standin.server import SLOW_SECONDS

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-standin-not-a-secret"
CLAUDE = "claude-sonnet-5-5"

CHAT_TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} tool",
            "parameters": {
                "type": "object",
                "properties": {arg: {"type": "string"}},
                "required": [arg],
            },
        },
    }
    for name, arg in (("lookup_order", "order_id"), ("get_weather", "city"))
]
RESPONSES_TOOLS: list[Any] = [
    {"type": "function", "name": t["function"]["name"], "parameters": t["function"]["parameters"]}
    for t in CHAT_TOOLS
]
ANTHROPIC_TOOLS: list[Any] = [
    {"name": t["function"]["name"], "input_schema": t["function"]["parameters"]} for t in CHAT_TOOLS
]
ASK_BOTH = "Where is my order A-1234, and what's the weather in Paris?"


@pytest.fixture
def sent() -> list[httpx2.Request]:
    """Requests exactly as the SDK's HTTP client sent them."""
    return []


@pytest.fixture
def oai(standin: StandIn, sent: list[httpx2.Request]) -> Iterator[openai.OpenAI]:
    http = httpx2.Client(event_hooks={"request": [sent.append]})
    with (
        http,
        openai.OpenAI(
            base_url=standin.openai_base_url, api_key=KEY, max_retries=0, http_client=http
        ) as client,
    ):
        yield client


@pytest.fixture
def claude(standin: StandIn, sent: list[httpx2.Request]) -> Iterator[anthropic.Anthropic]:
    http = httpx2.Client(event_hooks={"request": [sent.append]})
    with (
        http,
        anthropic.Anthropic(
            base_url=standin.base_url, api_key=KEY, max_retries=0, http_client=http
        ) as client,
    ):
        yield client


def model_requests(standin: StandIn) -> list[RecordedRequest]:
    return [r for r in standin.received if not r.path.startswith("/tools/")]


def order_result(order_id: str = "A-1234") -> str:
    return json.dumps(tools.order(order_id))


# --- OpenAI Chat Completions ---------------------------------------------------------------


def test_chat_tool_calls_and_exact_bytes(
    standin: StandIn, oai: openai.OpenAI, sent: list[httpx2.Request]
) -> None:
    params: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": ASK_BOTH},
        ],
        "tools": CHAT_TOOLS,
    }
    completion = oai.chat.completions.create(**params)

    choice = completion.choices[0]
    assert completion.object == "chat.completion" and completion.id.startswith("chatcmpl-")
    assert choice.finish_reason == "tool_calls"
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls]
    assert calls == [("lookup_order", {"order_id": "A-1234"}), ("get_weather", {"city": "Paris"})]
    assert all(c.id.startswith("call_") for c in choice.message.tool_calls)
    usage = completion.usage
    assert usage is not None and usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == 0
    assert completion.system_fingerprint and completion.service_tier == "default"

    (received,) = standin.received
    assert (received.method, received.path) == ("POST", "/v1/chat/completions")
    assert received.body == sent[-1].content
    assert received.json() == params
    assert received.header("authorization") == f"Bearer {KEY}"


def test_chat_final_answer_quotes_tool_result_and_caches_prefix(oai: openai.OpenAI) -> None:
    history: list[Any] = [
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": "Where is my order A-1234?"},
    ]
    first = oai.chat.completions.create(model="gpt-4o-mini", messages=history, tools=CHAT_TOOLS)
    call = first.choices[0].message.tool_calls[0]
    history += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": order_result()},
    ]
    final = oai.chat.completions.create(model="gpt-4o-mini", messages=history, tools=CHAT_TOOLS)

    text = final.choices[0].message.content
    assert final.choices[0].finish_reason == "stop" and not final.choices[0].message.tool_calls
    assert text and "A-1234" in text and tools.order("A-1234")["status"] in text
    details = final.usage.prompt_tokens_details
    assert details.cached_tokens > 0 and details.cached_tokens < final.usage.prompt_tokens


def test_chat_n_choices_and_length_limit(oai: openai.OpenAI) -> None:
    messages: list[Any] = [{"role": "user", "content": "Tell me about your shop please"}]
    many = oai.chat.completions.create(model="gpt-4o-mini", messages=messages, n=3)
    assert [c.index for c in many.choices] == [0, 1, 2]
    assert all(c.message.content for c in many.choices)

    short = oai.chat.completions.create(model="gpt-4o-mini", messages=messages, max_tokens=3)
    assert short.choices[0].finish_reason == "length"
    assert short.usage.completion_tokens <= 3


def test_chat_stream_assembles_tool_calls_and_usage(oai: openai.OpenAI) -> None:
    stream = oai.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": ASK_BOTH}],
        tools=CHAT_TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    )
    calls: dict[int, dict[str, str]] = {}
    argument_deltas, finish, usage = 0, None, None
    with stream:
        for chunk in stream:
            assert chunk.object == "chat.completion.chunk"
            if not chunk.choices:
                usage = chunk.usage
                continue
            finish = chunk.choices[0].finish_reason or finish
            for delta in chunk.choices[0].delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                call["id"] += delta.id or ""
                call["name"] += delta.function.name or ""
                if delta.function.arguments:
                    argument_deltas += 1
                    call["arguments"] += delta.function.arguments

    assert finish == "tool_calls"
    assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == [
        ("lookup_order", {"order_id": "A-1234"}),
        ("get_weather", {"city": "Paris"}),
    ]
    assert argument_deltas > len(calls)  # arguments really arrive in pieces
    assert usage is not None and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_chat_stream_text_matches_helper(oai: openai.OpenAI) -> None:
    with oai.chat.completions.stream(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hello"}], seed=5
    ) as stream:
        pieces = [e.delta for e in stream if e.type == "content.delta"]
        final = stream.get_final_completion()
    assert len(pieces) > 1
    assert "".join(pieces) == final.choices[0].message.content
    assert final.choices[0].finish_reason == "stop"


def test_chat_async(standin: StandIn) -> None:
    async def scenario() -> tuple[str | None, str]:
        async with openai.AsyncOpenAI(
            base_url=standin.openai_base_url, api_key=KEY, max_retries=0
        ) as client:
            messages: list[Any] = [{"role": "user", "content": ASK_BOTH}]
            plain = await client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, tools=CHAT_TOOLS
            )
            stream = await client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            text = "".join([c.choices[0].delta.content or "" async for c in stream])
            return plain.choices[0].message.tool_calls[0].function.name, text

    name, text = asyncio.run(scenario())
    assert name == "lookup_order"
    assert text.strip()


# --- OpenAI Responses ----------------------------------------------------------------------


def test_responses_function_call_then_answer(
    standin: StandIn, oai: openai.OpenAI, sent: list[httpx2.Request]
) -> None:
    first = oai.responses.create(
        model="gpt-4o-mini",
        instructions="You are a support agent.",
        input="Where is my order A-1234?",
        tools=RESPONSES_TOOLS,
    )
    (call,) = first.output
    assert call.type == "function_call" and call.name == "lookup_order"
    assert json.loads(call.arguments) == {"order_id": "A-1234"} and call.call_id.startswith("call_")
    assert first.id.startswith("resp_") and first.status == "completed"
    assert first.usage.output_tokens_details.reasoning_tokens == 0
    assert standin.received[-1].body == sent[-1].content

    items: list[Any] = [
        {"role": "user", "content": [{"type": "input_text", "text": "Where is my order A-1234?"}]},
        {
            "type": "function_call",
            "call_id": call.call_id,
            "name": call.name,
            "arguments": call.arguments,
        },
        {"type": "function_call_output", "call_id": call.call_id, "output": order_result()},
    ]
    final = oai.responses.create(
        model="gpt-4o-mini",
        instructions="You are a support agent.",
        input=items,
        tools=RESPONSES_TOOLS,
    )
    assert final.output[0].type == "message"
    assert tools.order("A-1234")["status"] in final.output_text
    assert final.usage.input_tokens_details.cached_tokens > 0
    assert json.loads(standin.received[-1].body)["input"] == items


def test_responses_stream_events(oai: openai.OpenAI) -> None:
    stream = oai.responses.create(model="gpt-4o-mini", input="Hello there", stream=True)
    with stream:
        events = list(stream)
    kinds = [e.type for e in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) > 1
    assert "".join(deltas) == events[-1].response.output_text


def test_responses_stream_function_call_with_helper(oai: openai.OpenAI) -> None:
    with oai.responses.stream(model="gpt-4o-mini", input=ASK_BOTH, tools=RESPONSES_TOOLS) as stream:
        argument_deltas = sum(
            1 for e in stream if e.type == "response.function_call_arguments.delta"
        )
        final = stream.get_final_response()
    calls = [(item.name, json.loads(item.arguments)) for item in final.output]
    assert calls == [("lookup_order", {"order_id": "A-1234"}), ("get_weather", {"city": "Paris"})]
    assert argument_deltas > 2


def test_responses_async(standin: StandIn) -> None:
    async def scenario() -> tuple[str, list[str]]:
        async with openai.AsyncOpenAI(
            base_url=standin.openai_base_url, api_key=KEY, max_retries=0
        ) as client:
            plain = await client.responses.create(model="gpt-4o-mini", input="hi")
            stream = await client.responses.create(
                model="gpt-4o-mini", input="Weather in Tokyo?", tools=RESPONSES_TOOLS, stream=True
            )
            kinds = [event.type async for event in stream]
            return plain.output_text, kinds

    text, kinds = asyncio.run(scenario())
    assert text
    assert "response.function_call_arguments.done" in kinds and kinds[-1] == "response.completed"


# --- Anthropic Messages --------------------------------------------------------------------


def test_anthropic_tool_use_then_answer(
    standin: StandIn, claude: anthropic.Anthropic, sent: list[httpx2.Request]
) -> None:
    messages: list[Any] = [{"role": "user", "content": "Where is my order A-1234?"}]
    first = claude.messages.create(
        model=CLAUDE, max_tokens=512, messages=messages, tools=ANTHROPIC_TOOLS
    )
    assert first.stop_reason == "tool_use" and first.id.startswith("msg_")
    tool_use = next(b for b in first.content if b.type == "tool_use")
    assert (tool_use.name, tool_use.input) == ("lookup_order", {"order_id": "A-1234"})
    assert tool_use.id.startswith("toolu_")
    assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0
    assert first.usage.cache_read_input_tokens == 0 == first.usage.cache_creation_input_tokens
    (received,) = standin.received
    assert received.path == "/v1/messages" and received.body == sent[-1].content
    assert received.header("anthropic-version")
    assert KEY in (received.header("x-api-key") or received.header("authorization") or "")

    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": tool_use.id, "content": order_result()}
            ],
        },
    ]
    final = claude.messages.create(
        model=CLAUDE,
        max_tokens=512,
        system=[{"type": "text", "text": "Be kind.", "cache_control": {"type": "ephemeral"}}],
        messages=messages,
        tools=ANTHROPIC_TOOLS,
    )
    assert final.stop_reason == "end_turn"
    assert final.content[0].type == "text"
    assert tools.order("A-1234")["status"] in final.content[0].text
    assert final.usage.cache_creation_input_tokens > 0


def test_anthropic_stream_assembles_tool_input(claude: anthropic.Anthropic) -> None:
    with claude.messages.stream(
        model=CLAUDE,
        max_tokens=512,
        messages=[{"role": "user", "content": ASK_BOTH}],
        tools=ANTHROPIC_TOOLS,
    ) as stream:
        json_deltas = sum(1 for e in stream if e.type == "input_json")
        final = stream.get_final_message()
    calls = [(b.name, b.input) for b in final.content if b.type == "tool_use"]
    assert calls == [("lookup_order", {"order_id": "A-1234"}), ("get_weather", {"city": "Paris"})]
    assert json_deltas > 2
    assert final.stop_reason == "tool_use" and final.usage.output_tokens > 1


def test_anthropic_max_tokens(claude: anthropic.Anthropic) -> None:
    message = claude.messages.create(
        model=CLAUDE,
        max_tokens=4,
        messages=[{"role": "user", "content": "Tell me a long story about shipping"}],
    )
    assert message.stop_reason == "max_tokens" and message.usage.output_tokens <= 4


def test_anthropic_async(standin: StandIn) -> None:
    async def scenario() -> tuple[str, list[str]]:
        async with anthropic.AsyncAnthropic(
            base_url=standin.base_url, api_key=KEY, max_retries=0
        ) as client:
            plain = await client.messages.create(
                model=CLAUDE,
                max_tokens=256,
                messages=[{"role": "user", "content": "hello"}],
            )
            stream = await client.messages.create(
                model=CLAUDE,
                max_tokens=256,
                messages=[{"role": "user", "content": "Refund order B-5678 please"}],
                tools=[
                    {"name": "refund_order", "input_schema": {"type": "object", "properties": {}}}
                ],
                stream=True,
            )
            kinds = [event.type async for event in stream]
            assert plain.content[0].type == "text"
            return plain.content[0].text, kinds

    text, kinds = asyncio.run(scenario())
    assert text
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert "content_block_delta" in kinds


# --- errors, cuts, timeouts ----------------------------------------------------------------


def test_rate_limit_errors(oai: openai.OpenAI, claude: anthropic.Anthropic) -> None:
    with pytest.raises(openai.RateLimitError) as oai_error:
        oai.chat.completions.create(
            model="standin-error", messages=[{"role": "user", "content": "x"}]
        )
    assert oai_error.value.code == "rate_limit_exceeded"
    with pytest.raises(openai.RateLimitError):
        oai.responses.create(model="standin-error", input="x")
    with pytest.raises(anthropic.RateLimitError) as claude_error:
        claude.messages.create(
            model="standin-error", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    assert claude_error.value.body["error"]["type"] == "rate_limit_error"


def test_cut_stream_raises_mid_stream(oai: openai.OpenAI, claude: anthropic.Anthropic) -> None:
    received: list[object] = []
    with pytest.raises(openai.APIConnectionError):
        for chunk in oai.chat.completions.create(
            model="standin-cut", messages=[{"role": "user", "content": "hello"}], stream=True
        ):
            received.append(chunk)
    assert received  # some events arrived before the connection dropped
    with pytest.raises(openai.APIConnectionError):  # a JSON body cut in half
        oai.chat.completions.create(
            model="standin-cut", messages=[{"role": "user", "content": "x"}]
        )

    received.clear()
    with pytest.raises((anthropic.APIConnectionError, httpx2.TransportError)):
        for event in claude.messages.create(
            model="standin-cut",
            max_tokens=100,
            messages=[{"role": "user", "content": "hello"}],
            stream=True,
        ):
            received.append(event)
    assert received


def test_slow_model_times_out(oai: openai.OpenAI) -> None:
    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        oai.with_options(timeout=0.3).chat.completions.create(
            model="standin-slow", messages=[{"role": "user", "content": "x"}]
        )
    assert time.monotonic() - started < SLOW_SECONDS  # gave up before the model answered


def test_bad_requests_get_provider_errors(standin: StandIn) -> None:
    with httpx.Client(base_url=standin.base_url) as client:
        missing = client.post("/v1/messages", json={"model": "m", "messages": []})
        assert missing.status_code == 400
        assert missing.json()["error"]["type"] == "invalid_request_error"
        not_json = client.post("/v1/chat/completions", content=b"{oops")
        assert not_json.status_code == 400 and "error" in not_json.json()
        assert client.get("/v1/nowhere").status_code == 404


# --- wire behaviour ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": ASK_BOTH}], "tools": CHAT_TOOLS},
        ),
        ("/v1/responses", {"input": "Tell me about the shop"}),
        ("/v1/messages", {"max_tokens": 200, "messages": [{"role": "user", "content": "Hello"}]}),
    ],
)
def test_each_sse_event_is_its_own_chunk(standin: StandIn, path: str, body: dict[str, Any]) -> None:
    request = {"model": "gpt-4o-mini", "stream": True, **body}
    with (
        httpx.Client(base_url=standin.base_url) as client,
        client.stream("POST", path, json=request) as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["transfer-encoding"] == "chunked"
        chunks = list(response.iter_raw())
    assert len(chunks) > 3
    for chunk in chunks:
        assert chunk.endswith(b"\n\n") and chunk.count(b"\n\n") == 1, chunk
    if path.endswith("/messages"):
        assert b"event: ping\n" in b"".join(chunks)


def test_seed_makes_answers_deterministic(oai: openai.OpenAI, claude: anthropic.Anthropic) -> None:
    messages: list[Any] = [{"role": "user", "content": "What can you tell me about returns?"}]

    def chat(**extra: Any) -> str | None:
        return (
            oai.chat.completions.create(model="gpt-4o-mini", messages=messages, **extra)
            .choices[0]
            .message.content
        )

    assert chat(seed=7) == chat(seed=7)
    assert len({chat() for _ in range(8)}) > 1  # unseeded answers vary

    def claude_text() -> str:
        message = claude.messages.create(
            model=CLAUDE, max_tokens=256, messages=messages, extra_body={"seed": 3}
        )
        return message.content[0].text

    assert claude_text() == claude_text()


def test_admin_endpoint_serves_and_clears_recordings(standin: StandIn) -> None:
    with httpx.Client(base_url=standin.base_url) as client:
        client.post(
            "/v1/chat/completions",
            content=b'{"model":"m","messages":[{"role":"user","content":"hi"}]}',
        )
        client.get("/tools/orders/A-1234", params={"verbose": "1"})
        listing = client.get("/_standin/requests").json()
        recorded = [RecordedRequest.from_dict(item) for item in listing]
        assert recorded == standin.received
        assert recorded[0].body == b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
        assert (recorded[1].path, recorded[1].query) == ("/tools/orders/A-1234", "verbose=1")
        assert client.delete("/_standin/requests").status_code == 204
    assert standin.received == []


def test_tool_backend(standin: StandIn) -> None:
    with httpx.Client(base_url=standin.tools_url + "/") as client:
        order = client.get("orders/A-1234").json()
        assert order == client.get("orders/A-1234").json() == tools.order("A-1234")
        assert order["status"] and order["items"] and order["total"] > 0
        assert client.get("orders/Z-9999").status_code == 404
        weather = client.get("weather", params={"city": "Paris"}).json()
        assert weather["city"] == "Paris" and "temperature_c" in weather
        refund = client.post("refunds", json={"order_id": "A-1234", "reason": "broken"})
        assert refund.status_code == 201
        assert (
            refund.json()["refund_id"].startswith("rf_")
            and refund.json()["amount"] == order["total"]
        )
        assert client.post("refunds", json={"order_id": "Z-1"}).status_code == 404


# --- command line and the example agent ----------------------------------------------------


@pytest.mark.subprocess
def test_cli_writes_port_file_and_stops_on_sigterm(tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    command = [
        sys.executable,
        "-m",
        "examples.standin",
        "--port",
        "0",
        "--port-file",
        str(port_file),
    ]
    with subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        deadline = time.monotonic() + 10
        while not port_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        port = int(port_file.read_text())
        with httpx.Client() as client:
            assert client.get(f"http://127.0.0.1:{port}/_standin/health").json() == {"ok": True}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0


@pytest.mark.subprocess
def test_support_agent_runs_against_standin(standin: StandIn) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SUPPORT_"))}
    env["STANDIN_URL"] = standin.base_url
    result = subprocess.run(
        [sys.executable, "examples/support_agent.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    answers = [line for line in result.stdout.splitlines() if line.startswith("agent> ")]
    assert len(answers) == 3
    assert "A-1234" in answers[0] and tools.order("A-1234")["status"] in answers[0]
    assert "refund" in result.stdout.lower() and "[tool] refund_order" in result.stdout

    paths = [r.path for r in standin.received]
    assert "/tools/orders/A-1234" in paths and "/tools/refunds" in paths
    bodies = [r.json() for r in model_requests(standin)]
    assert any(b.get("stream") for b in bodies) and all(b["tools"] for b in bodies)
