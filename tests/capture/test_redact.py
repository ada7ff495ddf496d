"""Redaction rules, on our copies only."""

from __future__ import annotations

import base64
import json
import re

import pytest

from otel_replay.redact import REDACTED, Redactor


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


KEY = "sk-live-0a1b2c3d4e5f"


def _learned() -> Redactor:
    redactor = Redactor([re.compile(rb"CUSTOM-[0-9]{4}")])
    redactor.learn([(b"Authorization", f"Bearer {KEY}".encode())], "https://h/v1/chat")
    return redactor


def test_credential_keys_lose_their_string_values_and_the_json_stays_valid() -> None:
    body = json.dumps(
        {
            "api_key": "ak-1",
            "max_tokens": 5,
            "logprobs": [{"token": "Hi"}],
            "meta": {"clientSecret": "cs-2", "password": None},
            "tools": [{"properties": {"api_key": {"type": "string"}}}],
        }
    ).encode()
    out = json.loads(Redactor().body(body))
    assert out["api_key"] == REDACTED and out["meta"]["clientSecret"] == REDACTED
    assert out["max_tokens"] == 5 and out["logprobs"] == [{"token": "Hi"}]
    assert out["meta"]["password"] is None  # not a string: nothing to hide
    assert out["tools"] == [{"properties": {"api_key": {"type": "string"}}}]


@pytest.mark.parametrize(
    "key",
    ["passwd", "pwd", "auth", "oauth", "credentials", "bearer",
     "token", "github_token", "refreshToken"],
)  # fmt: skip
def test_every_key_naming_a_credential_loses_its_value(key: str) -> None:
    body = json.dumps({key: "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "q": "ok"}).encode()
    out = Redactor().body(body)
    assert b"ghp_" not in out
    assert json.loads(out) == {key: REDACTED, "q": "ok"}


def test_a_session_id_is_kept() -> None:
    # An agent framework's conversation (the OpenAI Agents SDK's session_id): the replayed
    # program must get its own back.
    body = json.dumps({"session_id": "desk-7", "sessionId": "support-2026-11-29"}).encode()
    assert Redactor().body(body) is body


def test_a_log_probabilitys_token_is_kept() -> None:
    body = json.dumps(
        {"logprobs": {"content": [{"token": "Hello", "logprob": -0.1, "bytes": [72]}]}}
    ).encode()
    assert Redactor().body(body) is body


def test_json_nested_in_a_string_is_redacted_in_place() -> None:
    arguments = json.dumps({"user": "ann", "password": "hunter2-hunter2"})
    body = json.dumps({"tool_calls": [{"function": {"arguments": arguments}}], "n": "é\n"})
    out = Redactor().body(body.encode())
    inner = json.loads(json.loads(out)["tool_calls"][0]["function"]["arguments"])
    assert inner == {"user": "ann", "password": REDACTED}
    assert out.endswith(body.encode()[body.index(', "n"') :])  # the rest keeps its bytes


def test_learned_values_are_scrubbed_raw_and_json_escaped() -> None:
    redactor = _learned()
    escaped = KEY.replace("-", "\\u002d").replace("s", "\\u0073", 1)
    body = f'{{"a":"raw {KEY}","b":"esc {escaped}","c":"\\u0043USTOM-1234"}}'.encode()
    out = redactor.body(body)
    assert json.loads(out) == {"a": "raw REDACTED", "b": "esc REDACTED", "c": REDACTED}
    assert KEY not in json.loads(out).values()
    assert redactor.url(f"https://h/echo/{KEY}") == "https://h/echo/REDACTED"


def test_values_too_short_to_be_secrets_are_not_learned() -> None:
    redactor = Redactor()
    redactor.learn([(b"x-api-key", b"test")], "https://h/p?key=1")
    body = b'{"text":"test 1"}'
    assert redactor.body(body) is body


def test_a_secret_split_across_stream_events_is_removed_from_each() -> None:
    redactor = _learned()
    text = f"Your key is {KEY}, code CUSTOM-9876. Bye"
    pieces = [text[at : at + 4] for at in range(0, len(text), 4)]
    lines = [
        b"data: " + json.dumps({"choices": [{"delta": {"content": p}}]}).encode() for p in pieces
    ]
    stream = b"\n\n".join([b"event: ping", *lines, b"data: [DONE]"]) + b"\n\n"
    out = redactor.body(stream, stream=True)
    events = [line for line in out.split(b"\n") if line.startswith(b"data: {")]
    assert len(events) == len(pieces)
    assembled = "".join(json.loads(e[6:])["choices"][0]["delta"]["content"] for e in events)
    assert assembled == "Your key is REDACTED, code REDACTED. Bye"
    assert out.startswith(b"event: ping\n\n") and out.endswith(b"data: [DONE]\n\n")
    untouched = [line for line in stream.split(b"\n") if line.startswith(b"data: {")]
    assert events[0] == untouched[0]  # events holding no part of a secret keep their bytes


def test_headers_naming_or_carrying_credentials_and_learned_values() -> None:
    redactor = _learned()
    raw = [
        (b"x-debug-auth", b"Bearer whatever-it-is"),
        (b"x-forwarded", b"Basic YW5uOnB3"),
        (b"x-session-token", b"t0k3n-value"),
        (b"x-echo", f"got {KEY}".encode()),
        (b"x-ratelimit-remaining-tokens", b"9000"),
        (b"idempotency-key", b"stainless-retry-1"),
    ]
    assert redactor.headers(raw) == [
        ("x-debug-auth", REDACTED),
        ("x-forwarded", REDACTED),
        ("x-session-token", REDACTED),
        ("x-echo", "got REDACTED"),
        ("x-ratelimit-remaining-tokens", "9000"),
        ("idempotency-key", "stainless-retry-1"),
    ]


def test_basic_credentials_and_url_secrets_are_learned() -> None:
    redactor = Redactor()
    token = base64.b64encode(b"ann:pw-basic-5566").decode()
    redactor.learn(
        [(b"authorization", f"Basic {token}".encode())],
        "https://ann:pw-userinfo-77@h/p?api_key=qk-query-9999&city=Paris",
    )
    body = b'{"a":"pw-basic-5566 pw-userinfo-77 qk-query-9999 Paris"}'
    assert redactor.body(body) == b'{"a":"REDACTED REDACTED REDACTED Paris"}'


@pytest.mark.parametrize(
    "header",
    [
        b"SSWS 00okta-TOKEN-123456",
        b"Klaviyo-API-Key pk_live_abcdef1234",
        b"OAuth\tsf-TOKEN-00aa11bb",
    ],
    ids=["okta", "klaviyo", "tab"],
)
def test_the_credential_after_any_auth_scheme_is_learned(header: bytes) -> None:
    redactor = Redactor()
    redactor.learn([(b"authorization", header)], "https://h/p")
    token = header.split()[-1]
    assert redactor.body(b'{"echo":"bad token ' + token + b'"}') == b'{"echo":"bad token REDACTED"}'
    cookies = Redactor()  # a cookie header's pairs are no scheme and its credential
    cookies.learn([(b"cookie", b"a=1; theme=dark-mode-enabled")], "https://h/p")
    assert cookies.body(b'{"t":"theme=dark"}') == b'{"t":"theme=dark"}'


def test_a_header_redacted_before_a_secret_was_learned_is_scrubbed_after() -> None:
    redactor = Redactor()
    echoed = [(b"x-debug-echo", b"token sk-live-abcdef12 seen"), (b"content-type", b"text/plain")]
    assert redactor.headers(echoed)[0] == ("x-debug-echo", "token sk-live-abcdef12 seen")
    redactor.learn([(b"authorization", b"Bearer sk-live-abcdef12")], "https://h/p")
    assert redactor.headers(echoed)[0] == ("x-debug-echo", f"token {REDACTED} seen")
    assert redactor.headers(echoed, drop_coding=True)[1] == ("content-type", "text/plain")


def test_a_url_redacted_before_a_secret_was_learned_is_scrubbed_after() -> None:
    redactor = Redactor()
    url = "https://h/v1/files/sk-live-abcdef12/content"
    assert redactor.url(url) == url
    redactor.learn([(b"authorization", b"Bearer sk-live-abcdef12")], "https://h/p")
    assert redactor.url(url) == f"https://h/v1/files/{REDACTED}/content"
    assert (
        redactor.url("https://u:pw@h/p?key=v")
        == f"https://{REDACTED}:{REDACTED}@h/p?key={REDACTED}"
    )


def test_headers_seen_before_do_not_stop_a_new_credential_being_learned() -> None:
    redactor = Redactor()
    plain = [(b"user-agent", b"OpenAI/Python 3.57.0")]
    for _ in range(3):
        redactor.learn(plain, "https://h/p")
    redactor.learn([*plain, (b"x-api-key", b"key-0123456789")], "https://h/p")
    assert redactor.body(b'{"echo": "key-0123456789"}') == b'{"echo": "REDACTED"}'


def test_learned_values_inside_one_another_are_each_scrubbed() -> None:
    redactor = Redactor()
    redactor.learn([(b"authorization", b"Bearer sk-live-abcdef12")], "https://h/p")
    text = b"Bearer sk-live-abcdef12 and sk-live-abcdef12 alone"
    assert redactor.body(text) == f"{REDACTED} and {REDACTED} alone".encode()
    assert redactor.body(b"no secret here") == b"no secret here"


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "apiKey",
        "clientSecret",
        "password",
        "passwd",
        "db_passwd",
        "PASSWD",
        "passphrase",
        "access_token",
        "refreshToken",
        "Authorization",
        "private_key",
        "aws.secret_access_key",
    ],
)
def test_every_kind_of_credential_key_is_redacted_raw_spaced_and_nested(key: str) -> None:
    secret = "hunter2-hunter2"
    raw = json.dumps({"user": "ann", key: secret}).encode()
    spaced = f'{{"user":"ann","{key}" :"{secret}"}}'.encode()
    nested = json.dumps({"arguments": raw.decode()}).encode()
    for body in (raw, spaced, nested):
        out = Redactor().body(body)
        assert secret.encode() not in out, body
        assert REDACTED.encode() in out
        assert json.loads(out)  # still JSON


def test_keys_that_only_resemble_credentials_keep_their_values() -> None:
    body = json.dumps({"max_tokens": "5", "keyboard": "qwerty", "token": "Hi"}).encode()
    assert Redactor().body(body) is body


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            b'{"r":"use Authorization: Bearer sk-live-0a1b2c3d4e5f"}',
            b'{"r":"use Authorization: Bearer REDACTED"}',
        ),
        (b'{"r":"bearer eyJhbGci.eyJzdWIi.Sfl\\/KxwRJSMe"}', b'{"r":"bearer REDACTED"}'),
        (b"BEARER ABCDEFGHIJKLMNOP0123 next", b"BEARER REDACTED next"),
    ],
)
def test_a_bearer_token_spelled_out_in_a_body_is_redacted(text: bytes, expected: bytes) -> None:
    assert Redactor().body(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        b"the bearer instrumentation works",  # prose: no digit or punctuation
        b"Bearer abc-123",  # too short to be a credential
        b"a bearer bond of 1,000 dollars",
    ],
)
def test_prose_about_bearers_is_kept(text: bytes) -> None:
    assert Redactor().body(text) is text


def test_a_bearer_token_split_across_stream_events_is_removed_from_each() -> None:
    # As a model streams it: the token in pieces, the scheme one word.
    pieces = ["Send Authorization:", " Bearer", " tok-9f8e", "7d6c5b4a", "3921 with it"]
    stream = b"".join(
        b"data: " + json.dumps({"choices": [{"delta": {"content": p}}]}).encode() + b"\n\n"
        for p in pieces
    )
    out = Redactor().body(stream, stream=True)
    assembled = "".join(
        json.loads(line[6:])["choices"][0]["delta"]["content"]
        for line in out.split(b"\n")
        if line.startswith(b"data: ")
    )
    assert assembled == "Send Authorization: Bearer REDACTED with it"
