"""MCP over HTTP: the order-desk agent reaching a real ``MCPServer`` that runs on a local port,
over streamable HTTP and over SSE, recorded under ``opentelemetry-instrument``, its database
changed, then replayed through the CLI with the stand-in AND the MCP server gone.

Each ``call_tool`` is one tool step (its ``tools/call`` POST a step within it, never asked
again when the tool is served); the session's own traffic (initialize, the tool listings,
the server's event stream, DELETE at close) is plain HTTP steps, served back in a replay.
The agent lists the tools again before each question, as MCP adapters that do not cache
the listing do, so its JSON-RPC ids after a served call must be those recorded."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from otel_replay.replay.sources import load_run
from tests.export._support import ROOT
from tests.frameworks._support import (
    HERE,
    Recording,
    record,
    refunds,
    replay,
    replay_identically,
    tool_spans,
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _serving(database: Path, transport: str) -> tuple[subprocess.Popen[bytes], str]:
    """The MCP server over ``transport`` on a free port, once it accepts connections."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, str(HERE / "_mcp_http_server.py"), str(database), str(port), transport],
        env={"PATH": "", "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            assert server.poll() is None, "the MCP server exited"
            time.sleep(0.05)
    path = "/sse" if transport == "sse" else "/mcp"
    return server, f"http://127.0.0.1:{port}{path}"


def _recorded(root: Path, transport: str, run_id: str) -> Recording:
    """Recorded with the server up; the server stopped before anything is replayed."""
    server, url = _serving(root / "orders.sqlite", transport)
    try:
        return record(root, "_mcp_http_agent.py", run_id, url, transport)
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def streamable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recording]:
    yield _recorded(tmp_path_factory.mktemp("mcp-http"), "streamable-http", "r_mcp_http")


@pytest.fixture(scope="module")
def sse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recording]:
    yield _recorded(tmp_path_factory.mktemp("mcp-sse"), "sse", "r_mcp_sse")


def _http_steps(recording: Recording) -> list[tuple[str, str | None, int | None]]:
    """(method, JSON-RPC method, the tool step it was made within) of each HTTP step."""
    run = load_run(recording.run_id, store=str(recording.store))
    found = []
    for recorded in run.steps:
        step = recorded.step
        if step.kind != "http":
            continue
        body = json.loads(step.request_body) if step.request_body else None
        found.append((step.method, body["method"] if body else None, step.within))
    return found


def _diverges_at_the_first_model_call(recording: Recording) -> None:
    """Replayed with another system prompt, the run diverges at its first model call (after
    the MCP session's set-up, served identically), says why, and writes nothing."""
    run = load_run(recording.run_id, store=str(recording.store))
    first = next(s.step.index for s in run.steps if s.step.kind == "llm")
    assert first > 0  # the session was set up first
    done = replay(recording, AGENT_SYSTEM="You are the order desk of Contoso. Use the tools.")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"diverged — step {first} differs" in done.stdout
    assert "system instructions" in done.stdout and "Contoso" in done.stdout
    assert "network attempts: 0" in done.stdout
    assert refunds(recording.database) == 0


def _world_untouched(recording: Recording) -> None:
    """The server's database as the test left it after recording: no refund written again."""
    with closing(sqlite3.connect(recording.database)) as db, db:
        assert db.execute("SELECT count(*) FROM refunds").fetchone()[0] == 0
        assert db.execute("SELECT status FROM orders").fetchall() == [("delivered",)]


def test_each_call_tool_is_one_step_and_the_session_is_http_steps(streamable: Recording) -> None:
    tools = tool_spans(streamable)
    assert [(t["gen_ai.tool.name"], t["replay.tool.effect"]) for t in tools] == [
        ("lookup_order", "read"),  # readOnlyHint: true
        ("refund_order", "write"),  # readOnlyHint: false
        ("get_weather", "write"),  # no hint, not named in OTEL_REPLAY_READ_TOOLS
    ]
    assert json.loads(tools[1]["gen_ai.tool.call.result"])["structuredContent"]["status"] == (
        "issued"
    )
    lookup, refund, weather = (t["replay.step.index"] for t in tools)
    assert _http_steps(streamable) == [
        ("POST", "initialize", None),
        ("POST", "notifications/initialized", None),
        ("GET", None, None),  # the server's event stream, open for the whole session
        ("POST", "tools/list", None),
        ("POST", "tools/call", lookup),  # within its tool step
        ("POST", "tools/list", None),
        ("POST", "tools/call", refund),
        ("POST", "tools/list", None),
        ("POST", "tools/call", weather),
        ("DELETE", None, None),
    ]


def test_streamable_http_replays_identically_with_the_server_gone(
    streamable: Recording,
) -> None:
    assert '[tool] refund_order -> {\n  "refund_id": "R-' in streamable.printed
    done = replay_identically(streamable)
    table = done.stdout.split("): identical", 1)[1]
    # Nothing differs for the trace context the client puts in each request's _meta, the
    # ids after a served call are those recorded, and the event stream is opened once.
    assert "canonical" in table and "differs" not in table and "repeated" not in table
    assert table.count("GET /mcp") == 1 and table.count("tool:") == 3
    reported = [line for line in done.stdout.splitlines() if "[progress]" in line]
    assert len(reported) == 3 and reported[0] == "  [progress] 0.0/2.0: checking order A-1234"
    _world_untouched(streamable)


def test_streamable_http_a_changed_system_prompt_diverges_at_the_first_call(
    streamable: Recording,
) -> None:
    _diverges_at_the_first_model_call(streamable)
    _world_untouched(streamable)


def test_sse_replays_identically_with_the_server_gone(sse: Recording) -> None:
    # Every answer comes over the one GET /sse stream, after the POST that asked for it:
    # served at once it would answer requests not sent yet.
    assert [(m, rpc) for m, rpc, _ in _http_steps(sse)][:4] == [
        ("GET", None),
        ("POST", "initialize"),
        ("POST", "notifications/initialized"),
        ("POST", "tools/list"),
    ]
    assert [t["gen_ai.tool.name"] for t in tool_spans(sse)] == [
        "lookup_order",
        "refund_order",
        "get_weather",
    ]
    done = replay(sse)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(sse.printed)
    assert "): identical" in done.stdout and "network attempts: 0" in done.stdout
    # The stream's recorded answers to the tools/call POSTs a served tool never sent are left
    # out: the session would drop them, or fail on one that comes as it closes.
    assert "unknown/late request id" not in done.stderr
    assert "Traceback" not in done.stderr
    table = done.stdout.split("): identical", 1)[1]
    assert "differs" not in table and "repeated" not in table
    assert table.count("GET /sse") == 1
    _world_untouched(sse)


def test_sse_a_changed_system_prompt_diverges_at_the_first_call(sse: Recording) -> None:
    _diverges_at_the_first_model_call(sse)
    _world_untouched(sse)
