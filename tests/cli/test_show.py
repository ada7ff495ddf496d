"""``otel-replay show RUN``: steps in order with previews, tool calls, timing and tokens."""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

import otel_replay
from examples.support_agent import CONVERSATION
from otel_replay._canonical import sha256_tag
from tests.cli._checks import assert_bad_input
from tests.cli._recording import CLAUDE, CLAUDE_PROMPT, ERRORS, SUPPORT, Recorded
from tests.export._support import Pipeline

Invoke = Callable[..., Result]


def _steps(stdout: str) -> list[str]:
    """The step rows of the table (they start with the step index)."""
    return [line for line in stdout.splitlines() if line[:1].isdigit()]


def _json(invoke: Invoke, store: Path, run: str) -> dict:
    result = invoke("show", run, "--json", "--store", str(store))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_support_run_step_by_step(invoke: Invoke, store: Path) -> None:
    result = invoke("show", SUPPORT, "--store", str(store))
    assert result.exit_code == 0 and result.stderr == ""
    header, *_ = result.stdout.splitlines()
    assert header.startswith(f"run {SUPPORT}  ok  ") and "9 steps" in header and "seed 7" in header
    rows = _steps(result.stdout)
    assert [row.split()[:2] for row in rows] == [
        [str(i), kind]
        for i, kind in enumerate(["llm", "http", "llm", "llm", "http", "llm", "llm", "http", "llm"])
    ]
    first_question, weather_question, refund_question = CONVERSATION
    assert "gpt-4o-mini" in rows[0] and first_question in rows[0]
    assert 'lookup_order({"order_id":"A-1234"})' in rows[0]
    assert "GET 127.0.0.1:" in rows[1] and "/tools/orders/A-1234" in rows[1]
    assert '{"order_id":"A-1234","status":"in transit"' in rows[1]
    assert f"{first_question} [+1 tool result]" in rows[2] and "A-1234" in rows[2].split("]")[1]
    assert weather_question in rows[3] and 'get_weather({"city":"Paris"})' in rows[3]
    assert "/tools/weather?city=Paris" in rows[4]
    assert refund_question in rows[6] and "refund_order(" in rows[6]
    assert "POST 127.0.0.1:" in rows[7] and "/tools/refunds" in rows[7] and rows[7].endswith("201")
    assert all(row.endswith("200") for i, row in enumerate(rows) if i != 7)


def test_timing_and_tokens_come_from_the_recording(
    invoke: Invoke, store: Path, recorded: Recorded
) -> None:
    document = _json(invoke, store, SUPPORT)
    steps = document["steps"]
    rows = _steps(invoke("show", SUPPORT, "--store", str(store)).stdout)
    spans = {
        s["attributes"]["replay.step.index"]: s["attributes"]
        for s in recorded.spans[SUPPORT]
        if "replay.step.index" in s["attributes"]
    }
    for step, row in zip(steps, rows, strict=True):
        attrs = spans[step["index"]]
        if step["kind"] == "llm":
            assert (step["tokens_in"], step["tokens_out"]) == (
                attrs["gen_ai.usage.input_tokens"],
                attrs["gen_ai.usage.output_tokens"],
            )
            assert f"{step['tokens_in']}/{step['tokens_out']}" in row
        assert f"{step['duration_ms']:.1f}" in row
    streamed = [s for s in steps if s["stream"]]
    assert [s["index"] for s in streamed] == [6, 8]
    for step in streamed:
        ttfc = spans[step["index"]]["gen_ai.response.time_to_first_chunk"] * 1e3
        assert step["time_to_first_chunk_ms"] == pytest.approx(ttfc)
        assert 0 < step["time_to_first_chunk_ms"] < step["duration_ms"]
        assert f"{step['time_to_first_chunk_ms']:.1f}" in rows[step["index"]]


def test_json_has_the_messages_parsed(invoke: Invoke, store: Path, recorded: Recorded) -> None:
    document = _json(invoke, store, SUPPORT)
    assert document["run"]["run_id"] == SUPPORT and document["run"]["step_count"] == 9
    steps = document["steps"]
    assert [s["index"] for s in steps] == list(range(9))
    first = steps[0]
    assert first["input_messages"][-1] == {
        "role": "user",
        "parts": [{"type": "text", "content": CONVERSATION[0]}],
    }
    ((call,),) = [s["tool_calls"] for s in steps[:1]]
    assert call["name"] == "lookup_order" and call["arguments"] == {"order_id": "A-1234"}
    assert call["id"] == first["output_messages"][0]["parts"][0]["id"]
    assert first["finish_reasons"] == ["tool_calls"]
    tool = steps[1]
    assert tool["kind"] == "http" and tool["method"] == "GET"
    assert tool["url"].endswith("/tools/orders/A-1234") and tool["status_code"] == 200
    step = recorded.steps[SUPPORT][1]
    assert tool["response_body"] == step.response_body.decode()
    assert tool["request_hash"] == step.request_hash
    assert tool["span_id"] == f"{step.span_id:016x}"
    assert steps[2]["input_messages"][-1]["parts"][0]["type"] == "tool_call_response"
    assert steps[8]["output_messages"][0]["parts"][-1]["type"] == "text"


def test_errors_and_cut_streams_are_shown(invoke: Invoke, store: Path) -> None:
    result = invoke("show", ERRORS, "--store", str(store))
    header, *_ = result.stdout.splitlines()
    assert header.startswith(f"run {ERRORS}  error (openai.APIConnectionError)  record  ")
    assert "· 2 steps (2 failed) ·" in header
    assert "tokens" not in header  # neither call reported usage: unknown, not "0 / 0"
    limited, cut = _steps(result.stdout)
    assert "standin-error" in limited and limited.endswith("429 rate_limit_exceeded")
    assert '{"error":{"message":"Rate limit' in limited  # the provider's error body
    assert "standin-cut" in cut and cut.endswith("RemoteProtocolError incomplete")
    steps = _json(invoke, store, ERRORS)["steps"]
    assert [(s["status_code"], s["complete"]) for s in steps] == [(429, False), (200, False)]
    assert steps[1]["stream"] and steps[1]["output_messages"][0]["finish_reason"] == "error"


def test_recorded_text_is_never_read_as_markup(invoke: Invoke, store: Path) -> None:
    result = invoke("show", CLAUDE, "--store", str(store))
    (row,) = _steps(result.stdout)
    assert "claude-sonnet-4-6" in row and CLAUDE_PROMPT[:40] in row
    assert "[bold red]urgent" in row and 'lookup_order({"order_id":"A-1234"})' in row
    (step,) = _json(invoke, store, CLAUDE)["steps"]
    assert step["provider"] == "anthropic" and step["system_instructions"]
    assert step["input_messages"][-1]["parts"][-1]["content"] == CLAUDE_PROMPT
    assert [(c["name"], c["arguments"]) for c in step["tool_calls"]] == [
        ("lookup_order", {"order_id": "A-1234"})
    ]


def test_without_content_in_the_spans_the_bodies_are_decoded(
    invoke: Invoke, store: Path, bare: Path
) -> None:
    """Spans recorded with NO_CONTENT: the provider codecs read the stored bodies instead."""
    full = _json(invoke, store, SUPPORT)["steps"]
    decoded = _json(invoke, bare, SUPPORT)["steps"]
    for ours, theirs in zip(full, decoded, strict=True):
        for key in ("input_messages", "output_messages", "tool_calls", "url", "request_body"):
            assert ours.get(key) == theirs.get(key), (ours["index"], key)
    assert _steps(invoke("show", SUPPORT, "--store", str(bare)).stdout)[0].split()[:4] == [
        "0",
        "llm",
        "gpt-4o-mini",
        "Hi!",
    ]


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("latest", CLAUDE),
        ("r_20261121T0900", SUPPORT),
        ("r_20261121T090500", ERRORS),
        (CLAUDE, CLAUDE),
    ],
)
def test_a_run_is_named_by_id_prefix_or_latest(
    invoke: Invoke, store: Path, ref: str, expected: str
) -> None:
    assert _json(invoke, store, ref)["run"]["run_id"] == expected


def test_a_path_no_file_has_is_no_such_file_beside_a_damaged_store(
    invoke: Invoke, store: Path, tmp_path: Path
) -> None:
    (store / "index.sqlite").write_bytes(b"not a database")
    for verb in (("show",), ("export", "../nope/x.jsonl", str(tmp_path / "b"))):
        args = (*verb, "../nope/x.jsonl") if len(verb) == 1 else verb
        line = assert_bad_input(invoke(*args, "--store", str(store)))
        assert line == "Error: no such file: ../nope/x.jsonl"


def test_a_run_imported_as_latest_does_not_take_the_newest_recordings_place(
    invoke: Invoke, store: Path, tmp_path: Path
) -> None:
    """``latest`` is the newest recording even when an older run's id is "latest" (ids are
    data, from any file): that run is named by a prefix."""
    llm = _inline_chat({"content": "o"})
    trace = _write_steps(tmp_path / "latest.json", "latest", [llm])
    older = trace.read_text().replace('"18000000000', '"17000000000')  # 2023, before CLAUDE
    trace.write_text(older)
    assert invoke("import", str(trace), "--store", str(store)).exit_code == 0
    assert _json(invoke, store, "latest")["run"]["run_id"] == CLAUDE
    assert _json(invoke, store, "lates")["run"]["run_id"] == "latest"
    assert "latest" in invoke("runs", "--store", str(store)).stdout


def test_an_ambiguous_prefix_lists_the_candidates(invoke: Invoke, store: Path) -> None:
    result = invoke("show", "r_20261121T09", "--store", str(store))
    assert_bad_input(result, "'r_20261121T09'", "ambiguous", SUPPORT, ERRORS, CLAUDE)


def test_an_unknown_run_is_named(invoke: Invoke, store: Path) -> None:
    result = invoke("show", "r_nope", "--store", str(store))
    assert_bad_input(result, "'r_nope'", str(store))


EVIL = "\x1b]0;owned\x07\x1b[2J\x00\x9b31m\u202e"
_RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e]")  # all a terminal acts on


def _inline_chat(answer: dict[str, str]) -> dict[str, str]:
    """The string attributes of a Chat Completions step whose bodies travel inline, the model
    answering ``answer``."""
    request = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    response = json.dumps({"id": "c", "model": "m", "choices": [{"message": answer}]})
    return {
        "replay.step.kind": "llm",
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "m",
        "url.full": "https://api.openai.com/v1/chat/completions",
        "replay.request.body": request,
        "replay.request.hash": sha256_tag(request.encode()),
        "replay.response.body": response,
        "replay.response.hash": sha256_tag(response.encode()),
    }


def _write_steps(path: Path, run_id: str, steps: list[dict[str, str]]) -> Path:
    """An OTLP JSON file at ``path`` holding one step span of run ``run_id`` per item of
    ``steps`` (its string attributes), each answered 200."""
    spans = [
        {
            "traceId": "1" * 32,
            "spanId": f"{n + 1:016x}",
            "name": "step",
            "startTimeUnixNano": str(1_800_000_000 * 10**9 + n),
            "endTimeUnixNano": str(1_800_000_000 * 10**9 + n + 10**6),
            "attributes": [
                {"key": "replay.run.id", "value": {"stringValue": run_id}},
                {"key": "replay.step.index", "value": {"intValue": str(n)}},
                {"key": "replay.response.status_code", "value": {"intValue": "200"}},
                *({"key": k, "value": {"stringValue": v}} for k, v in attrs.items()),
            ],
        }
        for n, attrs in enumerate(steps)
    ]
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    return path


def _hostile_trace(path: Path) -> Path:
    """An OTLP file whose model name, prompt, answer, tool name, arguments and error type
    carry terminal escapes, a NUL, a C1 CSI and a bidi override."""
    request = json.dumps({"model": "m", "messages": [{"role": "user", "content": "q" + EVIL}]})
    answer = {"role": "assistant", "content": "a" + EVIL}
    response = json.dumps({"id": "c", "model": "m", "choices": [{"message": answer}]})
    arguments, result = json.dumps({"id" + EVIL: 1}), json.dumps({"message": "m" + EVIL})
    llm = {
        "replay.step.kind": "llm",
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "m" + EVIL,
        "url.full": "https://api.openai.com/v1/chat/completions",
        "replay.request.body": request,
        "replay.request.hash": sha256_tag(request.encode()),
        "replay.response.body": response,
        "replay.response.hash": sha256_tag(response.encode()),
    }
    tool = {
        "replay.step.kind": "tool",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "look" + EVIL,
        "gen_ai.tool.call.arguments": arguments,
        "replay.request.hash": sha256_tag(arguments.encode()),
        "gen_ai.tool.call.result": result,
        "replay.response.hash": sha256_tag(result.encode()),
        "error.type": "Boom" + EVIL,
    }
    return _write_steps(path, "r_evil", [llm, tool])


@pytest.mark.subprocess
def test_recorded_text_never_drives_the_terminal(invoke: Invoke, tmp_path: Path) -> None:
    """Every verb prints what a recording holds with its control characters escaped: the
    tables, the headers and the replay report as ``\\x1b``, ``--json`` as ``\\u001b``,
    ``\\u009b`` (the same JSON values)."""
    trace, store = _hostile_trace(tmp_path / "evil.json"), str(tmp_path / "s")
    assert invoke("import", str(trace), "--store", store).exit_code == 0
    verbs = [("show", "r_evil"), ("runs",), ("diff", "r_evil", "r_evil")]
    for args in [*verbs, *((*args, "--json") for args in verbs)]:
        result = invoke(*args, "--store", store)
        assert result.exit_code == 0, result.output
        assert not _RAW.search(result.output), (args, result.output)
    shown = invoke("show", "r_evil", "--store", store).stdout
    escaped = "\\x1b]0;owned\\x1b[2J\\x00\\x9b31m\\u202e"  # rich drops the BEL itself
    for text in ("m" + escaped, "q" + escaped, "a" + escaped, "Boom" + escaped):
        assert text in shown
    (llm, tool) = _json(invoke, tmp_path / "s", "r_evil")["steps"]
    assert llm["model"] == "m" + EVIL and tool["error_type"] == "Boom" + EVIL
    replayed = invoke("replay", str(trace), "--", sys.executable, "-c", "pass")
    assert replayed.exit_code == 1 and "tool:look" + escaped in replayed.stdout
    assert not _RAW.search(replayed.output), replayed.output


def test_a_run_id_that_reads_like_a_path_names_the_run(invoke: Invoke, tmp_path: Path) -> None:
    """A run imported under an id holding ``/`` (ids are data) is named by that id in every
    verb, as no file has that name; a name no run or file has is still "no such file"."""
    llm = _inline_chat({"role": "assistant", "content": "hello"})
    run_id = "../team/run-7"
    trace = _write_steps(tmp_path / "slash.json", run_id, [llm])
    store = str(tmp_path / "s")
    assert invoke("import", str(trace), "--store", store).exit_code == 0
    shown = invoke("show", run_id, "--store", store)
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.startswith(f"run {run_id}  ") and "hello" in shown.stdout
    diffed = invoke("diff", run_id, run_id, "--store", store)
    assert diffed.exit_code == 0 and "identical: 1 step" in diffed.stdout, diffed.output
    bundle = tmp_path / "bundle"
    exported = invoke("export", run_id, str(bundle), "--store", store)
    assert exported.exit_code == 0, exported.output
    assert json.loads((bundle / "bundle.json").read_text())["run"]["id"] == run_id
    report = tmp_path / "r.html"
    written = invoke("report", run_id, "-o", str(report), "--store", store)
    assert written.exit_code == 0 and run_id in report.read_text(), written.output
    line = assert_bad_input(invoke("show", "../team/run-8", "--store", store))
    assert line == "Error: no such file: ../team/run-8"


def test_a_model_call_is_shown_from_its_bodies_not_another_reading_of_them(
    invoke: Invoke, tmp_path: Path
) -> None:
    """A model call whose span content an agent framework's instrumentation wrote (the
    OpenAI Agents bridge writes a tool call as its Python repr, and leaves the tool result
    out of the prompt): ``show`` reads the recorded bodies, as the HTML report does, and
    lists the tool call as ``name(arguments)``."""
    question = {"role": "user", "content": "Where is A-1?"}
    call = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    asked = {"role": "assistant", "content": None, "tool_calls": [call]}
    result = {"role": "tool", "tool_call_id": "call_1", "content": "shipped"}
    first = json.dumps({"model": "m", "messages": [question]})
    second = json.dumps({"model": "m", "messages": [question, asked, result]})
    calls = {
        "id": "c1",
        "model": "m",
        "choices": [{"message": asked, "finish_reason": "tool_calls"}],
    }
    said = {"role": "assistant", "content": "It shipped."}
    done = {"id": "c2", "model": "m", "choices": [{"message": said, "finish_reason": "stop"}]}
    their_prompt = json.dumps(
        [{"role": "user", "parts": [{"type": "text", "content": "Where is A-1?"}]}]
    )
    repr_call = "ResponseFunctionToolCall(arguments='{}', call_id='call_1', name='lookup')"
    their_answer = json.dumps(
        [{"role": "assistant", "parts": [{"type": "text", "content": repr_call}]}]
    )
    steps = [
        {
            "replay.step.kind": "llm",
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "m",
            "http.request.method": "POST",
            "url.full": "https://api.openai.com/v1/chat/completions",
            "replay.request.body": sent,
            "replay.request.hash": sha256_tag(sent.encode()),
            "replay.response.body": json.dumps(got),
            "replay.response.hash": sha256_tag(json.dumps(got).encode()),
            "gen_ai.input.messages": their_prompt,
            "gen_ai.output.messages": their_answer,
        }
        for sent, got in ((first, calls), (second, done))
    ]
    trace = _write_steps(tmp_path / "bridge.json", "r_bridge", steps)
    result_ = invoke("show", str(trace))
    assert result_.exit_code == 0, result_.output
    rows = _steps(result_.stdout)
    assert "lookup({})" in rows[0] and "ResponseFunctionToolCall" not in result_.stdout
    assert "Where is A-1? [+1 tool result]" in rows[1]


def test_a_body_nested_past_what_json_reads_is_shown_as_text(
    invoke: Invoke, tmp_path: Path
) -> None:
    """A model call and an HTTP call whose bodies nest 100,000 arrays deep (a hostile tool
    backend; orjson and json both refuse them): ``show`` lists both steps, each such body as
    its text, instead of failing with a RecursionError."""
    deep = "[" * 100_000 + "]" * 100_000
    request = '{"model": "m", "messages": [{"role": "user", "content": "q"}], "x": ' + deep + "}"
    answer = {"role": "assistant", "content": "a"}
    response = json.dumps({"id": "c", "model": "m", "choices": [{"message": answer}]})
    body = '{"deep": ' + deep + "}"
    chat = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai"}
    kinds = [
        ("llm", "https://api.openai.com/v1/chat/completions", request, response, chat),
        ("http", "http://tools.test/deep", body, body, {}),
    ]
    steps = [
        {
            "replay.step.kind": kind,
            "gen_ai.request.model": "m",
            "http.request.method": "POST",
            "url.full": url,
            "replay.request.body": sent,
            "replay.request.hash": sha256_tag(sent.encode()),
            "replay.response.body": got,
            "replay.response.hash": sha256_tag(got.encode()),
            **codec,
        }
        for kind, url, sent, got, codec in kinds
    ]
    trace = _write_steps(tmp_path / "deep.json", "r_deep", steps)
    store = tmp_path / "s"
    imported = invoke("import", str(trace), "--store", str(store))
    assert imported.exit_code == 0, imported.output
    result = invoke("show", "r_deep", "--store", str(store))
    assert result.exit_code == 0, result.output
    rows = _steps(result.stdout)
    assert [row.split()[:2] for row in rows] == [["0", "llm"], ["1", "http"]]
    assert '{"deep": [[[[' in rows[1]
    steps = _json(invoke, store, "r_deep")["steps"]
    assert steps[1]["response_body"] == body


def test_a_step_made_inside_another_is_marked_with_it(invoke: Invoke, tmp_path: Path) -> None:
    """A tool whose body calls a tool that calls a tool: the inner steps are marked ``└ tool
    in N`` (indented by depth), a note says what that means, and ``--json`` has ``within``."""

    @otel_replay.tool(effect="read")
    def stock(item: str) -> int:
        return 3

    @otel_replay.tool(effect="read")
    def warehouse(item: str) -> dict[str, int]:
        return {"stock": stock(item)}

    @otel_replay.tool(effect="read")
    def lookup(order_id: str) -> dict[str, int]:
        return warehouse("headphones")

    with Pipeline(tmp_path / "store") as pipe:
        lookup("A-1")
        otel_replay.now()
        run_id = pipe.run.run_id
    result = invoke("show", run_id, "--store", str(tmp_path / "store"))
    assert result.exit_code == 0, result.output
    rows = [row.split()[:6] for row in _steps(result.stdout)]
    assert rows[:3] == [
        ["0", "tool", "lookup", "(read:", "declared)", '{"order_id":"A-1"}'],
        ["1", "└", "tool", "in", "0", "warehouse"],
        ["2", "└", "tool", "in", "1", "stock"],
    ]
    assert rows[3][:3] == ["3", "value", "now"]  # an outer step again
    assert "  └ tool in 1" in _steps(result.stdout)[2]  # one level deeper
    assert result.stdout.splitlines()[-1].startswith("└ in N: made inside step N, by its body")
    steps = _json(invoke, tmp_path / "store", run_id)["steps"]
    assert [step.get("within") for step in steps] == [None, 0, 1, None]


def test_reading_a_store_never_waits_for_a_writers_lock(invoke: Invoke, store: Path) -> None:
    """``show`` and ``runs`` while a recording holds the index's write lock: they read, and
    close without writing (a reader that took the lock at exit would wait up to the busy
    timeout, then fail)."""
    writer = sqlite3.connect(store / "index.sqlite", isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        shown = invoke("show", SUPPORT, "--store", str(store), "--json")
        listed = invoke("runs", "--store", str(store), "--json")
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["run"]["run_id"] == SUPPORT
    assert listed.exit_code == 0, listed.output
    assert SUPPORT in {run["run_id"] for run in json.loads(listed.stdout)}
