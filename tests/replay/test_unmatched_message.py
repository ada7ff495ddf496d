"""The unmatched-request error names a hostile recording's values escaped: it reaches the
agent's traceback and test reports, where a raw escape sequence would drive the terminal."""

from __future__ import annotations

import httpx
import pytest

import otel_replay
from otel_replay._canonical import sha256_tag
from otel_replay.errors import UnmatchedRequestError
from otel_replay.replay import Run
from tests.replay._recorded import recorded_step

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\u202e"


def test_a_hostile_recording_is_named_escaped_in_the_unmatched_request_error() -> None:
    step = recorded_step(
        index=0,
        kind="http",
        endpoint=f"GET /orders{HOSTILE}",
        method="GET",
        url=f"http://x.test/orders{HOSTILE}",
        request_body=b"",
        request_hash=sha256_tag(b""),
        status_code=200,
        response_headers=(),
        response_body=b"{}",
        fidelity="exact",
    )
    run = Run(run_id=f"r_{HOSTILE}", source="test", steps=(step,))
    with pytest.raises(UnmatchedRequestError) as caught, otel_replay.replaying(run):
        httpx.post("http://x.test/refunds", content=b"{}")
    message = str(caught.value)
    assert not any(ch in message for ch in "\x1b\x07\u202e")
    assert "GET /orders\\x1b]0;pwned\\x07\\x1b[2J\\u202e" in message
    assert "run 'r_\\x1b]0;pwned" in message
    assert len(message.splitlines()) == 3  # the line, the heading, the one candidate
