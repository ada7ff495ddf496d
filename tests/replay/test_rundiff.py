"""``diff_runs`` on requests that differ only in what every run writes anew."""

from __future__ import annotations

import json
from dataclasses import replace

from otel_replay._canonical import sha256_tag
from otel_replay.replay._model import RecordedStep, Run
from otel_replay.replay._rundiff import diff_runs
from tests.replay._recorded import recorded_step


def _mcp_post(meta: dict[str, str], **params: object) -> RecordedStep:
    """An MCP client's ``tools/list`` POST over streamable HTTP, with ``_meta`` as sent."""
    message = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}}
    message["params"].update(params)  # type: ignore[attr-defined]
    body = json.dumps(message).encode()
    return recorded_step(
        index=0,
        kind="http",
        endpoint="POST /mcp",
        method="POST",
        url="http://127.0.0.1:8931/mcp",
        request_body=body,
        request_hash=sha256_tag(body),
        status_code=200,
        response_headers=(),
        response_body=b'{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}',
        fidelity="exact",
    )


def _runs(a: RecordedStep, b: RecordedStep) -> tuple[Run, Run]:
    return Run("r_a", "test", (a,)), Run("r_b", "test", (b,))


def test_the_trace_context_an_mcp_client_sends_is_no_change() -> None:
    # Each run is a trace of its own: a recording and its identical replay send other ids.
    a = _mcp_post({"traceparent": "00-5b6bb8acde6a9691f4c0cae6ac5c36d6-f12726d1d5af2ec3-03"})
    b = _mcp_post({"traceparent": "00-33f4378e5ab23f9b13c85698a113da80-7122623f9e3e35bb-03"})
    assert diff_runs(*_runs(a, b)).identical


def test_what_else_differs_beside_the_trace_context_is_named() -> None:
    a = _mcp_post({"traceparent": "00-5b6bb8acde6a9691f4c0cae6ac5c36d6-f12726d1d5af2ec3-03"})
    b = _mcp_post(
        {"traceparent": "00-33f4378e5ab23f9b13c85698a113da80-7122623f9e3e35bb-03"}, cursor="2"
    )
    (pair,) = diff_runs(*_runs(a, b)).pairs
    assert pair.status == "changed"
    assert [(c.field, c.recorded, c.replayed) for c in pair.changes] == [
        ("body $.params.cursor", None, "2")
    ]


def _step(index: int, kind: str, name: str, within: int | None = None) -> RecordedStep:
    body = json.dumps({"call": name}).encode()
    method, url = ("TOOL", f"tool:{name}") if kind == "tool" else ("GET", f"http://x.test/{name}")
    return recorded_step(
        index=index,
        kind=kind,
        endpoint=url if kind == "tool" else f"GET /{name}",
        method=method,
        url=url,
        request_body=body,
        request_hash=sha256_tag(body),
        status_code=200,
        response_headers=(),
        response_body=b'{"ok":true}',
        fidelity="exact",
        within=within,
    )


def test_what_a_tool_did_inside_is_no_difference_when_the_other_run_served_it() -> None:
    # Recorded: the tool fetched two pages (steps 2 and 3, inside step 1). Its replay served
    # the tool from the recording: the same tool step, nothing inside it.
    recording = Run(
        "r_a",
        "test",
        (
            _step(0, "http", "first"),
            _step(1, "tool", "lookup"),
            _step(2, "http", "page-1", within=1),
            _step(3, "http", "page-2", within=1),
            _step(4, "http", "last"),
        ),
    )
    replay = Run(
        "r_b",
        "test",
        (_step(0, "http", "first"), _step(1, "tool", "lookup"), _step(2, "http", "last")),
    )
    result = diff_runs(recording, replay)
    assert result.identical
    assert [(p.a and p.a.step.index, p.b and p.b.step.index, p.status) for p in result.pairs] == [
        (0, 0, "same"),
        (1, 1, "same"),
        (2, None, "inside"),
        (3, None, "inside"),
        (4, 2, "same"),
    ]
    assert result.counts()["inside"] == 2
    backwards = diff_runs(replay, recording)
    assert backwards.identical and backwards.counts()["inside"] == 2
    # Both ran the tool's body: what it did inside is compared like any step.
    changed = Run(
        "r_c", "test", (*recording.steps[:3], _step(3, "http", "page-9", 1), recording.steps[4])
    )
    pairs = diff_runs(recording, changed).pairs
    assert [p.status for p in pairs] == ["same", "same", "same", "changed", "same"]


def test_a_damaged_within_chain_still_shows_every_step_once() -> None:
    # Steps made inside a step the run lacks, or inside each other: outer steps.
    steps = (
        _step(0, "http", "a", within=7),
        _step(1, "tool", "t", within=2),
        _step(2, "tool", "u", within=1),
        _step(3, "http", "b", within=1),
    )
    pairs = diff_runs(Run("r_a", "test", steps), Run("r_b", "test", steps)).pairs
    assert sorted(p.a.step.index for p in pairs if p.a is not None) == [0, 1, 2, 3]
    assert sorted(p.b.step.index for p in pairs if p.b is not None) == [0, 1, 2, 3]


def _call(index: int, name: str, asked: str, answer: bytes = b'{"ok":true}') -> RecordedStep:
    body = json.dumps({"ask": asked}).encode()
    return recorded_step(
        index=index,
        kind="http",
        endpoint=f"POST /{name}",
        method="POST",
        url=f"http://x.test/{name}",
        request_body=body,
        request_hash=sha256_tag(body),
        status_code=200,
        response_headers=(),
        response_body=answer,
        fidelity="exact",
    )


def test_a_retry_only_one_run_made_is_added_not_paired_with_a_later_call() -> None:
    # B: a fork with a 429 injected at step 0 (the client asks again) and the first lookup's
    # answer overridden, so every later chat differs from A's.
    a = [
        _call(0, "chat", "where is A-1?"),
        _call(1, "lookup", "A-1"),
        _call(2, "chat", "A-1 shipped"),
        _call(3, "lookup", "A-2"),
        _call(4, "chat", "final"),
    ]
    b = [
        _call(0, "chat", "where is A-1?", b'{"error":"rate_limit"}'),
        _call(1, "chat", "where is A-1?"),
        _call(2, "lookup", "A-1", b'{"lost":true}'),
        _call(3, "chat", "A-1 lost"),
        _call(4, "lookup", "A-2"),
        _call(5, "chat", "final, lost"),
    ]
    pairs = diff_runs(Run("r_a", "test", tuple(a)), Run("r_b", "test", tuple(b))).pairs
    shown = [
        (
            None if p.a is None else p.a.step.index,
            None if p.b is None else p.b.step.index,
            p.status,
        )
        for p in pairs
    ]
    assert shown == [
        (0, 0, "changed"),
        (None, 1, "added"),
        (1, 2, "changed"),
        (2, 3, "changed"),
        (3, 4, "same"),
        (4, 5, "changed"),
    ]


def test_a_retry_of_a_request_only_one_run_made_is_added() -> None:
    # B: a fork with the lookup's answer overridden (so every later chat differs from A's)
    # and a 429 injected at the weather chat: the client asks again, a request A never made.
    a = [
        _call(0, "chat", "where is A-1?"),
        _call(1, "lookup", "A-1"),
        _call(2, "chat", "A-1 shipped"),
        _call(3, "chat", "weather? (A-1 shipped)"),
        _call(4, "chat", "final"),
    ]
    limited = _call(3, "chat", "weather? (A-1 lost)", b'{"error":"rate_limit"}')
    b = [
        _call(0, "chat", "where is A-1?"),
        _call(1, "lookup", "A-1", b'{"lost":true}'),
        _call(2, "chat", "A-1 lost"),
        RecordedStep(replace(limited.step, status_code=429, complete=False), "POST /chat", "exact"),
        _call(4, "chat", "weather? (A-1 lost)"),
        _call(5, "chat", "final, lost"),
    ]
    pairs = diff_runs(Run("r_a", "test", tuple(a)), Run("r_b", "test", tuple(b))).pairs
    shown = [
        (
            None if p.a is None else p.a.step.index,
            None if p.b is None else p.b.step.index,
            p.status,
        )
        for p in pairs
    ]
    assert shown == [
        (0, 0, "same"),
        (1, 1, "changed"),
        (2, 2, "changed"),
        (3, 3, "changed"),
        (None, 4, "added"),
        (4, 5, "changed"),
    ]


def test_what_a_fork_changed_is_in_the_json_as_in_the_text() -> None:
    """``diff --json`` names the steps a fork changed on purpose (``replay.fork.change``),
    as the text's ``changed in B: …`` lines do, so a machine tells the change from what
    followed it."""
    recording = (_call(0, "lookup", "A-1"), _call(1, "refund", "A-1"))
    lost = replace(
        _call(0, "lookup", "A-1", b'{"status":"lost"}'),
        attributes={"replay.fork.change": "override @lost.json"},
    )
    live = replace(_call(1, "refund", "A-1"), attributes={"replay.fork.change": "live"})
    result = diff_runs(Run("r_a", "test", recording), Run("r_fork", "test", (lost, live)))
    forked = result.to_json()["forked"]
    assert forked == [
        {"run": "B", "step": 0, "endpoint": "POST /lookup", "change": "override @lost.json"},
        {"run": "B", "step": 1, "endpoint": "POST /refund", "change": "live"},
    ]
    backwards = diff_runs(Run("r_fork", "test", (lost, live)), Run("r_a", "test", recording))
    assert [(f["run"], f["step"]) for f in backwards.to_json()["forked"]] == [("A", 0), ("A", 1)]
    assert (
        diff_runs(Run("r_a", "test", recording), Run("r_b", "test", recording)).to_json()["forked"]
        == []
    )
