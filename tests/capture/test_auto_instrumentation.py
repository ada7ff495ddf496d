"""The real zero-code path: ``opentelemetry-instrument python examples/support_agent.py``.

Each test starts a stand-in provider (and tool backend) and a real OTLP receiver, runs the
example agent in a subprocess under ``opentelemetry-instrument`` with the OTLP exporters
(gRPC or HTTP/protobuf), and checks what arrived on the wire against what the stand-in
received. Other auto-loaded instrumentations (httpx, openai, ...) are disabled so the spans
are ours alone; ``otel_replay`` itself is loaded through its entry point.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples.otlp_sink import OtlpSink
from examples.standin import RecordedRequest, StandIn
from tests.export._support import instrumentations

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[2]
INSTRUMENT = Path(sys.executable).parent / "opentelemetry-instrument"
AGENT = "examples/support_agent.py"
SECRET = "sk-live-REDACTME-7f3a9c2e5b1d40688e21"
AGENT_SPAN = "invoke_agent support-agent"
CHAT_SPAN = "chat gpt-4o-mini"
SYSTEM_PROMPT = "You are Ada, the customer-support assistant of Northwind Electronics."
QUESTIONS = (
    "Hi! Where is my order A-1234?",
    "Will the weather in Paris delay the delivery?",
    "It arrived broken, please refund order A-1234.",
)
CONTENT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
)
HASH = re.compile(r"sha256:[0-9a-f]{64}")


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def jcs(value: Any) -> bytes:
    """RFC 8785 for the values at hand (strings, ints, dicts, lists: no floats, BMP only)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@pytest.fixture
def sink() -> Iterator[OtlpSink]:
    with OtlpSink() as receiver:
        yield receiver


def agent_env(
    standin: StandIn,
    sink: OtlpSink | None,
    tmp_path: Path,
    env: dict[str, str],
    *,
    traces: str = "otlp",
) -> dict[str, str]:
    """The environment of the example agent under ``opentelemetry-instrument``; ``env``
    overrides the defaults. With a ``sink``, traces (exported by ``traces``) and metrics go
    to it over OTLP (``OTEL_EXPORTER_OTLP_PROTOCOL`` picks gRPC, the default here, or HTTP).
    Only ours of the installed instrumentations loads unless ``env`` says otherwise
    (:func:`~tests.export._support.instrumentations`)."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OTEL_", "OPENAI_", "STANDIN_", "SUPPORT_"))
    }
    base |= {
        "OTEL_SERVICE_NAME": "support-agent",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_REPLAY_STORE": str(tmp_path / "store"),
        "OPENAI_API_KEY": SECRET,
        "OPENAI_BASE_URL": standin.openai_base_url,
        "SUPPORT_TOOLS_URL": standin.tools_url,
        "PYTHONUNBUFFERED": "1",
        **instrumentations(),
    }
    if sink is not None:
        protocol = env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        base |= {
            "OTEL_TRACES_EXPORTER": traces,
            "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
            "OTEL_EXPORTER_OTLP_ENDPOINT": sink.grpc_endpoint
            if protocol == "grpc"
            else sink.http_endpoint,
        }
    return base | env


def run_agent(
    standin: StandIn, sink: OtlpSink | None, tmp_path: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run the example agent with :func:`agent_env`; checks it succeeded without printing
    the key."""
    proc = subprocess.run(
        [str(INSTRUMENT), sys.executable, AGENT],
        cwd=ROOT,
        env=agent_env(standin, sink, tmp_path, env),
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert proc.returncode == 0, f"agent failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    assert SECRET not in proc.stdout + proc.stderr, "the API key was printed"
    return proc


def exported_spans(sink: OtlpSink, expect_agent_span: bool = True) -> list[dict[str, Any]]:
    """Every span the sink received, in start order (the process has exited: all flushed)."""
    if expect_agent_span:
        sink.wait_for_spans(lambda spans: any(s["name"] == AGENT_SPAN for s in spans), 10)
    return sorted(sink.spans(), key=lambda s: (s["start_ns"], s["end_ns"]))


def step_spans(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in spans if "replay.step.index" in s["attributes"]]


def content(span: dict[str, Any], key: str) -> Any:
    return json.loads(span["attributes"][key])


def text_of(message: dict[str, Any]) -> str:
    return "".join(p["content"] for p in message["parts"] if p["type"] == "text")


def assert_answers_printed(stdout: str, chats: list[dict[str, Any]]) -> None:
    """Every ``agent> ...`` line the agent printed is the text answer of a chat span, in order
    (the last one was streamed token by token)."""
    printed = [line.removeprefix("agent> ") for line in stdout.splitlines() if "agent> " in line]
    finals = []
    for chat in chats:
        (output,) = content(chat, "gen_ai.output.messages")
        if output["finish_reason"] == "stop":
            finals.append(text_of(output))
    assert printed == finals
    assert len(printed) == len(QUESTIONS)
    assert "A-1234" in printed[0] and "Paris" in printed[1] and "refund" in printed[2]


def assert_step_matches_request(
    span: dict[str, Any], request: RecordedRequest, base_url: str
) -> None:
    attrs = span["attributes"]
    assert span["kind"] == "CLIENT"
    assert attrs["replay.request.hash"] == sha(request.body), (span["name"], request.path)
    assert attrs["replay.request.size"] == len(request.body)
    assert HASH.fullmatch(attrs["replay.response.hash"])
    assert attrs["replay.response.complete"] is True
    if request.path.startswith("/tools/"):
        query = f"?{request.query}" if request.query else ""
        assert span["name"] == request.method
        assert attrs["replay.step.kind"] == "http"
        assert attrs["http.request.method"] == request.method
        assert attrs["url.full"] == f"{base_url}{request.path}{query}"
        assert attrs["http.response.status_code"] in (200, 201)
        assert "replay.prompt.hash" not in attrs
    else:
        assert request.path == "/v1/chat/completions"
        assert span["name"] == CHAT_SPAN
        assert attrs["replay.step.kind"] == "llm"


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_agent_is_recorded_over_otlp(
    standin: StandIn, sink: OtlpSink, tmp_path: Path, protocol: str
) -> None:
    proc = run_agent(standin, sink, tmp_path, OTEL_EXPORTER_OTLP_PROTOCOL=protocol)
    for question in QUESTIONS:
        assert f"customer> {question}" in proc.stdout

    spans = exported_spans(sink)
    assert {s["transport"] for s in spans} == {"grpc" if protocol == "grpc" else "http"}
    (agent,) = [s for s in spans if s["name"] == AGENT_SPAN]
    assert agent["kind"] == "INTERNAL"
    assert agent["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert agent["attributes"]["gen_ai.agent.name"] == "support-agent"
    assert agent["resource"]["service.name"] == "support-agent"
    assert agent["scope"] == "otel_replay"

    # One step span per request the stand-in received, in the same order, nothing else.
    steps = step_spans(spans)
    received = standin.received
    assert len(steps) == len(received) == len(spans) - 1
    assert [s["attributes"]["replay.step.index"] for s in steps] == list(range(len(steps)))
    for span, request in zip(steps, received, strict=True):
        assert_step_matches_request(span, request, standin.base_url)
        assert span["parent_span_id"] == agent["span_id"]
        assert span["trace_id"] == agent["trace_id"]
    tool_calls = [r for r in received if r.path.startswith("/tools/")]
    assert [(r.method, r.path) for r in tool_calls] == [
        ("GET", "/tools/orders/A-1234"),
        ("GET", "/tools/weather"),
        ("POST", "/tools/refunds"),
    ]

    # The run id and mode are on every span; the run's facts on the agent's span only.
    run_ids = {s["attributes"]["replay.run.id"] for s in spans}
    assert len(run_ids) == 1 and run_ids.pop().startswith("r_")
    for span in spans:
        attrs = span["attributes"]
        assert attrs["replay.mode"] == "record"
        assert ("vcs.ref.head.revision" in attrs) == (span is agent)
    assert isinstance(agent["attributes"]["vcs.ref.head.revision"], str)
    assert agent["attributes"]["vcs.ref.head.revision"]

    # Chat spans: GenAI attributes, structured content, and hashes that recompute.
    chats = [s for s in steps if s["name"] == CHAT_SPAN]
    assert len(chats) == 6
    tool_schema = {c["attributes"]["replay.tool.schema.version"] for c in chats}
    assert len(tool_schema) == 1
    for index, chat in enumerate(chats):
        attrs = chat["attributes"]
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.provider.name"] == "openai"
        assert attrs["gen_ai.request.model"] == "gpt-4o-mini"
        assert attrs["server.address"] == "127.0.0.1"
        assert attrs["server.port"] == standin.port
        assert attrs["gen_ai.usage.input_tokens"] > 0
        assert "gen_ai.system_instructions" not in attrs  # chat keeps system in the messages
        messages = content(chat, "gen_ai.input.messages")
        for message in messages:
            assert set(message) >= {"role", "parts"}
            assert message["role"] in ("system", "user", "assistant", "tool")
            for part in message["parts"]:
                assert part["type"] in ("text", "tool_call", "tool_call_response")
        assert messages[0]["role"] == "system"
        assert text_of(messages[0]).startswith(SYSTEM_PROMPT)
        if index == 0:
            assert messages[1:] == [
                {"role": "user", "parts": [{"type": "text", "content": QUESTIONS[0]}]}
            ]
        assert attrs["replay.prompt.hash"] == sha(
            jcs({"input_messages": messages, "system_instructions": []})
        )
        definitions = content(chat, "gen_ai.tool.definitions")
        assert [d["name"] for d in definitions] == ["lookup_order", "get_weather", "refund_order"]
        assert attrs["replay.tool.schema.version"] == sha(jcs(definitions))
        (output,) = content(chat, "gen_ai.output.messages")
        assert output["role"] == "assistant"
    # The second call sends back the first one's tool call and the tool's result.
    second = content(chats[1], "gen_ai.input.messages")
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool"]
    (call,) = second[2]["parts"]
    assert call["type"] == "tool_call" and call["name"] == "lookup_order"
    assert call["arguments"] == {"order_id": "A-1234"}
    (result,) = second[3]["parts"]
    assert result["type"] == "tool_call_response" and result["id"] == call["id"]
    assert chats[-1]["attributes"]["gen_ai.request.stream"] is True
    assert_answers_printed(proc.stdout, chats)

    # Metrics: the GenAI client histograms, consistent with the spans.
    metrics = {m["name"]: m for m in sink.wait_for_metrics(2, 10)}
    duration = metrics["gen_ai.client.operation.duration"]
    assert duration["type"] == "histogram" and duration["unit"] == "s"
    assert sum(p["count"] for p in duration["data_points"]) == len(chats)
    usage = metrics["gen_ai.client.token.usage"]
    by_type = {p["attributes"]["gen_ai.token.type"]: p for p in usage["data_points"]}
    assert by_type["input"]["count"] == len(chats)
    assert by_type["input"]["sum"] == sum(
        c["attributes"]["gen_ai.usage.input_tokens"] for c in chats
    )
    assert by_type["output"]["sum"] == sum(
        c["attributes"]["gen_ai.usage.output_tokens"] for c in chats
    )

    # Secrets never reach the wire: not the key, not its prefix, not an auth header.
    wire = sink.raw_bytes()
    assert {r.signal for r in sink.requests()} == {"traces", "metrics"}
    assert SECRET.encode() not in wire
    assert b"sk-live" not in wire
    assert b"Bearer" not in wire
    # ... while the stand-in did receive it, so the check above is not vacuous.
    assert all(r.header("Authorization") == f"Bearer {SECRET}" for r in received[:1])


def test_run_id_from_environment(standin: StandIn, sink: OtlpSink, tmp_path: Path) -> None:
    run_agent(standin, sink, tmp_path, OTEL_REPLAY_RUN_ID="r_fixed_1")
    spans = exported_spans(sink)
    run_ids = {s["name"]: s["attributes"].get("replay.run.id") for s in spans}
    assert set(run_ids.values()) == {"r_fixed_1"}, (
        "OTEL_REPLAY_RUN_ID is ignored inside `otel_replay.run()`: every span should carry "
        f"run id r_fixed_1, got {run_ids} (runs/_run.py: run.__init__ always generates "
        "a new run id)"
    )


def test_disabling_the_instrumentation(standin: StandIn, sink: OtlpSink, tmp_path: Path) -> None:
    proc = run_agent(standin, sink, tmp_path, **instrumentations(ours=False))
    assert proc.stdout.count("agent> ") == len(QUESTIONS)
    assert len(standin.received) == 9  # the agent ran its whole tool loop
    spans = exported_spans(sink, expect_agent_span=False)
    assert not [s for s in spans if s["name"].startswith("chat")]
    assert not step_spans(spans)
    tagged = {
        s["name"]: sorted(k for k in s["attributes"] if k.startswith("replay."))
        for s in spans
        if any(k.startswith("replay.") for k in s["attributes"])
    }
    assert not tagged, (
        "with OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=otel_replay no span may carry the replay "
        f"kit, but these do: {tagged} (runs/_run.py: run.__enter__ adds it even when the "
        "instrumentor never ran)"
    )
    assert b"replay." not in sink.raw_bytes()


def test_no_content_keeps_hashes_but_exports_no_text(
    standin: StandIn, sink: OtlpSink, tmp_path: Path
) -> None:
    run_agent(
        standin, sink, tmp_path, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="NO_CONTENT"
    )
    spans = exported_spans(sink)
    chats = [s for s in spans if s["name"] == CHAT_SPAN]
    assert len(chats) == 6
    for span in spans:
        assert not set(CONTENT_KEYS) & set(span["attributes"]), span["name"]
    for chat in chats:
        attrs = chat["attributes"]
        for key in (
            "replay.request.hash",
            "replay.response.hash",
            "replay.prompt.hash",
            "replay.tool.schema.version",
        ):
            assert HASH.fullmatch(attrs[key]), key
    for span, request in zip(step_spans(spans), standin.received, strict=True):
        assert span["attributes"]["replay.request.hash"] == sha(request.body)
    wire = sink.raw_bytes()
    for text in (*QUESTIONS, SYSTEM_PROMPT, "Get an order's status", "in transit"):
        assert text.encode() not in wire, f"{text!r} was exported despite NO_CONTENT"


def console_objects(stdout: str) -> list[dict[str, Any]]:
    """The JSON objects the console exporter printed (each starts with a line ``{``), among
    the agent's own output lines."""
    decoder = json.JSONDecoder()
    objects: list[dict[str, Any]] = []
    end = 0
    for match in re.finditer(r"^\{$", stdout, re.MULTILINE):
        if match.start() >= end:
            value, end = decoder.raw_decode(stdout, match.start())
            objects.append(value)
    return objects


def test_console_exporter_prints_the_kit(standin: StandIn, tmp_path: Path) -> None:
    proc = run_agent(
        standin,
        None,
        tmp_path,
        OTEL_TRACES_EXPORTER="console",
        OTEL_METRICS_EXPORTER="none",
        # The console exporter and the agent share stdout from two threads: export only at
        # shutdown, after the agent has printed everything, so their lines never interleave.
        OTEL_BSP_SCHEDULE_DELAY="600000",
    )
    spans = [o for o in console_objects(proc.stdout) if "attributes" in o]
    chats = [s for s in spans if s.get("name") == CHAT_SPAN]
    assert len(chats) == 6, proc.stdout
    for chat in chats:
        attrs = chat["attributes"]
        assert HASH.fullmatch(attrs["replay.prompt.hash"])
        assert HASH.fullmatch(attrs["replay.request.hash"])
        assert attrs["replay.mode"] == "record"
        assert json.loads(attrs["gen_ai.input.messages"])[0]["role"] == "system"
    assert '"replay.prompt.hash"' in proc.stdout
    assert '"gen_ai.input.messages"' in proc.stdout
    assert any(s.get("name") == AGENT_SPAN for s in spans)


_HALF_READ = """
import openai
client = openai.OpenAI()
stream = client.chat.completions.create(
    model="gpt-4o-mini",
    messages=[{"role": "user", "content": "Tell me a long story"}],
    stream=True,
)
print(next(iter(stream)).id, flush=True)
# exits here, the stream still open, as an agent that crashes mid-answer does
"""


def test_a_stream_open_at_exit_reaches_the_store_marked_incomplete(
    standin: StandIn, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_", "STANDIN_"))
    } | {
        "OTEL_TRACES_EXPORTER": "replay",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        **instrumentations(),
        "OTEL_REPLAY_STORE": str(store),
        "OPENAI_API_KEY": SECRET,
        "OPENAI_BASE_URL": standin.openai_base_url,
    }
    proc = subprocess.run(
        [str(INSTRUMENT), sys.executable, "-c", _HALF_READ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    shown = subprocess.run(
        [str(Path(sys.executable).parent / "otel-replay"), "show", "latest", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    (step,) = json.loads(shown.stdout)["steps"]
    (received,) = standin.received
    assert step["request_hash"] == sha(received.body)
    assert (step["status_code"], step["stream"], step["complete"]) == (200, True, False)
    assert step["response_size"] > 0  # what the application had read is kept
    assert step["finish_reasons"] == ["error"]  # an answer cut short, not a finished one
