"""``diff_runs`` on requests that differ only in what every run writes anew."""

from __future__ import annotations

import json

from otel_replay._canonical import sha256_tag
from otel_replay.replay._model import RecordedStep, Run
from otel_replay.replay._rundiff import diff_runs


def _mcp_post(meta: dict[str, str], **params: object) -> RecordedStep:
    """An MCP client's ``tools/list`` POST over streamable HTTP, with ``_meta`` as sent."""
    message = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}}
    message["params"].update(params)  # type: ignore[attr-defined]
    body = json.dumps(message).encode()
    return RecordedStep(
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
