"""The replay session's exact-bytes path: a request equal to a recorded body is answered
by its hash without being redacted first; anything else is redacted before it is compared
or reported."""

from __future__ import annotations

import re

import pytest

from otel_replay._canonical import sha256_tag
from otel_replay.errors import UnmatchedRequestError
from otel_replay.redact import Redactor
from otel_replay.replay import Run
from otel_replay.replay._session import ReplaySession
from tests.replay._recorded import recorded_step

URL = "http://llm.test/v1/chat/completions"
KEY = b"sk-live-0123456789"


def _run(*bodies: bytes) -> Run:
    steps = tuple(
        recorded_step(
            index=n,
            kind="llm",
            endpoint="openai.chat_completions",
            method="POST",
            url=URL,
            request_body=body,
            request_hash=sha256_tag(body),
            status_code=200,
            response_headers=(("content-type", "application/json"),),
            response_body=b'{"n": %d}' % n,
            fidelity="exact",
        )
        for n, body in enumerate(bodies)
    )
    return Run(run_id="r_exact", source="test", steps=steps)


def _ask(session: ReplaySession, body: bytes, url: str = URL) -> bytes:
    answer = session.answer("POST", url, body, None, [(b"authorization", b"Bearer " + KEY)])
    assert answer is not None
    return b"".join(answer.chunks)


def test_bytes_equal_to_a_recording_match_it_whatever_the_redaction_says_today() -> None:
    # Recorded before the user asked for order numbers to be redacted: the same bytes sent
    # again are the same request.
    recorded = b'{"model": "m", "messages": [{"role": "user", "content": "order A-7"}]}'
    session = ReplaySession(_run(recorded), redactor=Redactor([re.compile(rb"A-\d+")]))
    assert _ask(session, recorded) == b'{"n": 0}'
    (served,) = session.result.steps
    assert (served.how, served.changes, served.request_hash) == ("hash", (), sha256_tag(recorded))


def test_a_secret_sent_in_the_body_is_redacted_before_it_is_matched() -> None:
    redacted = b'{"model": "m", "messages": [{"role": "user", "content": "key REDACTED"}]}'
    session = ReplaySession(_run(redacted))
    sent = redacted.replace(b"REDACTED", KEY)
    assert _ask(session, sent) == b'{"n": 0}'
    (served,) = session.result.steps
    assert (served.how, served.request_hash) == ("hash", sha256_tag(redacted))


def test_an_unmatched_request_is_reported_redacted() -> None:
    session = ReplaySession(_run(b'{"model": "m", "messages": []}'))
    sent = b'{"query": "' + KEY + b'"}'
    with pytest.raises(UnmatchedRequestError) as failure:
        _ask(session, sent, "http://llm.test/v1/search")
    assert KEY.decode() not in str(failure.value)
    (refused,) = session.result.steps
    assert refused.request_hash == sha256_tag(sent.replace(KEY, b"REDACTED"))
