"""Redaction rules, on our copies only."""

from __future__ import annotations

import re

import pytest

from otel_replay.capture._redact import REDACTED, Redactor


@pytest.mark.parametrize(
    "name",
    ["Authorization", "x-api-key", "API-Key", "cookie", "Set-Cookie", "proxy-authorization"],
)
def test_secret_headers_lose_their_values(name: str) -> None:
    raw = [(name.encode(), b"sk-live-123"), (b"content-type", b"application/json")]
    assert Redactor().headers(raw) == [(name, REDACTED), ("content-type", "application/json")]


def test_decoded_bodies_lose_their_coding_headers() -> None:
    raw = [(b"Content-Encoding", b"gzip"), (b"Content-Length", b"31"), (b"x-id", b"7")]
    assert Redactor().headers(raw, drop_coding=True) == [("x-id", "7")]
    assert len(Redactor().headers(raw)) == 3


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://h/p?city=Paris", "https://h/p?city=Paris"),
        ("https://h/p?api_key=sk1&city=Paris", f"https://h/p?api_key={REDACTED}&city=Paris"),
        (
            "https://h/p?access_token=t&X-Amz-Signature=s",
            f"https://h/p?access_token={REDACTED}&X-Amz-Signature={REDACTED}",
        ),
        ("https://user:pw@h/p", f"https://{REDACTED}:{REDACTED}@h/p"),
        ("https://h/p?sig=abc&code=xyz", f"https://h/p?sig={REDACTED}&code={REDACTED}"),
    ],
)
def test_url_credentials(url: str, expected: str) -> None:
    assert Redactor().url(url) == expected


def test_user_patterns_apply_to_bodies_headers_and_urls() -> None:
    redactor = Redactor([re.compile(rb"acct-[0-9]+")])
    assert redactor.body(b'{"account":"acct-991"}') == b'{"account":"REDACTED"}'
    assert redactor.headers([(b"x-account", b"acct-7")]) == [("x-account", REDACTED)]
    assert redactor.url("https://h/acct-12/x") == "https://h/REDACTED/x"


def test_no_patterns_returns_the_same_object() -> None:
    body = b"payload"
    assert Redactor().body(body) is body
