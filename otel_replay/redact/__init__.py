"""Redaction at capture, on our copies, before anything is hashed, exported or stored."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import SplitResult, parse_qsl, quote, unquote, urlsplit, urlunsplit

from otel_replay.redact._json_text import (
    ANY_ESCAPE,
    CREDENTIAL_KEY,
    HIDING_ESCAPE,
    credential_values,
    may_name_credentials,
    rewrite_escaped_strings,
)
from otel_replay.redact._secrets import Secrets
from otel_replay.redact._stream_text import redact_stream

__all__ = ["AUTH_VALUE", "CREDENTIAL_KEY", "CREDENTIAL_NAME", "REDACTED", "Redactor"]

REDACTED = "REDACTED"
_REDACTED_BYTES = REDACTED.encode()

SECRET_HEADERS = frozenset(
    {
        "authorization",
        "x-api-key",
        "api-key",
        "cookie",
        "set-cookie",
        "proxy-authorization",
        "x-goog-api-key",
        "ocp-apim-subscription-key",
    }
)

_SECRET_HEADER_BYTES = frozenset(name.encode() for name in SECRET_HEADERS)
_CODING_HEADERS = frozenset({b"content-encoding", b"content-length"})

# Matched against the lower-cased parameter name with separators removed.
_SECRET_QUERY = re.compile(
    r"(key|apikey|token|secret|password|passwd|pwd|signature|sig|credential|auth|session"
    r"|accesskeyid|securitytoken|code)$"
)

# These two patterns and CREDENTIAL_KEY are also the Collector's `redaction` processor's (its
# blocked_key_patterns and blocked_values in collector-config/otelcol.yaml; a test keeps them
# equal): each is written in the syntax Python's `re` and Go's RE2 share (no look-around, no
# backreference) and matches a raw name as well as the one folded here.

CREDENTIAL_NAME = (
    r"(?i)(api[-_.]?key|subscription[-_.]?key|token|secret|password|passwd|auth"
    r"|authorization|credentials?|session|signature|cookie)$"
)
"""A header name or span attribute key that names a credential (``x-api-key``,
``http.request.header.authorization``); not "tokens", which ends rate-limit headers a replay
keeps and the token counts of ``gen_ai.usage``."""

AUTH_VALUE = r"^\s*(?i:bearer|basic|digest)\s+\S.*"
"""A value that carries an auth scheme's credential (``Bearer sk-…``), matched whole: the
processor masks what a pattern matches, so the match runs to the end of the line."""

_TOKEN_CHAR = rb"(?:[A-Za-z0-9._~+/-]|\\/)"  # RFC 6750's token68, and JSON's escaped "/"
_BEARER = re.compile(
    rb"\b(?i:bearer)[ \t]+(%s*(?:[0-9_~+/-]|\\/)%s*=*)" % (_TOKEN_CHAR, _TOKEN_CHAR)
)
"""A bearer token written out in text (``Authorization: Bearer sk-live-…`` echoed in a tool's
result or an error): its token, when it has a digit or punctuation (prose's "bearer
instruments" has none) and is at least :data:`_BEARER_MIN` long."""

_BEARER_MIN = 16

_SECRET_HEADER_NAME = re.compile(CREDENTIAL_NAME.encode())
_AUTH_VALUE = re.compile(AUTH_VALUE.encode())

_ESCAPE_DEPTH = 3
"""JSON in a string in a string…: how deep the escaped-string pass decodes."""


_WORD_MAX = 16
"""A credential key's value of letters only and shorter than this reads as a word, not a
secret: it is redacted where it stands but not learned."""

_MEMO_MAX = 4096
"""Header pairs remembered at most by each of the redactor's memos; a memo that fills up is
emptied and starts again (headers that change every request, a date or a request id, would
otherwise grow it without end)."""


class Redactor:
    """Applies the redaction rules; build one per instrumentation with the user's patterns.

    Secret-bearing headers, values with an auth scheme (``Bearer …``), credential query
    parameters and URL user-info lose their values, and every value so seen is scrubbed from
    every later body, header and URL; the string values of credential JSON keys
    (``api_key``…) are redacted, in JSON nested in strings too, and learned as well; the
    user's patterns apply to
    raw bytes, decoded JSON strings and a stream's assembled text. Thread-safe; learned
    secrets are shared by every thread that uses it.

    Clients send the same headers with every request, so it remembers which header names are
    credentials and how each pair reads redacted (forgotten whenever a secret is learned).
    """

    __slots__ = (
        "_header_memo",
        "_header_names",
        "_patterns",
        "_plain",
        "_seen",
        "_url_memo",
        "secrets",
    )

    def __init__(self, patterns: Iterable[re.Pattern[bytes]] = ()) -> None:
        self._patterns = tuple(patterns)
        self.secrets = Secrets()
        self._header_names: dict[bytes, bool] = {}
        self._seen: set[bytes] = set()
        self._plain: set[tuple[bytes, bytes]] = set()
        """Header pairs known to hold no credential (nothing for :meth:`learn` to learn)."""
        self._header_memo: tuple[tuple[bytes, ...], dict[tuple[bytes, bytes], tuple[str, str]]]
        self._header_memo = ((), {})
        """The learned secrets, and header pairs as :meth:`headers` gives them with those
        secrets scrubbed: one object, so a thread never files a pair under other secrets."""
        self._url_memo: tuple[tuple[bytes, ...], dict[str, str]] = ((), {})
        """The learned secrets, and URLs as :meth:`url` gives them with those secrets scrubbed
        (an application calls the same few URLs)."""

    def learn(self, headers: Iterable[tuple[bytes, bytes]], url: str) -> None:
        """Learn the secret values a request sends in its credential headers, credential
        query parameters and URL user-info. Call before redacting the request."""
        plain = self._plain
        for pair in headers:
            if pair in plain:
                continue
            key, value = pair
            if self._secret_header(key.lower(), value):
                if value not in self._seen:
                    if len(self._seen) < 1024:
                        self._seen.add(value)
                    self.secrets.learn_header(value)
            else:
                if len(plain) >= _MEMO_MAX:
                    plain.clear()
                plain.add(pair)
        if "@" in url or "?" in url:
            self.secrets.learn(_url_secrets(url))

    def body(self, data: bytes, stream: bool = False) -> bytes:
        """``data`` redacted; ``stream``: it is an event stream or newline-delimited JSON,
        whose assembled text is redacted too. The same object when nothing changed."""
        data = self._text(data, 0)
        if stream and (self._patterns or self.secrets.values or _may_bear(data)):
            data = redact_stream(data, self._spans, _REDACTED_BYTES)
        return data

    def _text(self, data: bytes, depth: int) -> bytes:
        for pattern in self._patterns:
            data = pattern.sub(_REDACTED_BYTES, data)
        keys = may_name_credentials(data)
        if keys:
            # A value sent under a credential key is a secret wherever it recurs (a tool's
            # error message quoting its password argument): learned, then scrubbed below.
            data = credential_values(data, self._learn_values)
        data = self.secrets.scrub(data, _REDACTED_BYTES)
        if _may_bear(data):
            data = _BEARER.sub(_redact_token, data)
        # Every escape starts with a backslash: without one (most bodies), no string token
        # reads differently decoded, and one memchr saves the escape pattern's scan.
        if depth < _ESCAPE_DEPTH and b"\\" in data:
            if self._patterns or keys:
                escape = ANY_ESCAPE
            elif self.secrets.values:
                escape = HIDING_ESCAPE
            else:
                return data
            data = rewrite_escaped_strings(data, escape, lambda text: self._text(text, depth + 1))
        return data

    def _learn_values(self, values: list[str]) -> None:
        """Learn the values of credential JSON keys, but a lone word of letters shorter than
        :data:`_WORD_MAX` (``"auth": "optional"``): scrubbed everywhere, it would redact
        ordinary text."""
        self.secrets.learn(v for v in values if not (v.isalpha() and len(v) < _WORD_MAX))

    def _spans(self, text: bytes) -> list[tuple[int, int]]:
        """Where a pattern or a learned secret occurs in ``text``."""
        found = [match.span() for pattern in self._patterns for match in pattern.finditer(text)]
        if _may_bear(text):
            found += [m.span(1) for m in _BEARER.finditer(text) if _is_token(m)]
        for secret in self.secrets.values:
            at = text.find(secret)
            while at >= 0:
                found.append((at, at + len(secret)))
                at = text.find(secret, at + 1)
        return found

    def headers(
        self, headers: Iterable[tuple[bytes, bytes]], drop_coding: bool = False
    ) -> list[tuple[str, str]]:
        """Raw header pairs as text, secret headers blanked and the other rules applied to the
        rest, in one pass (this runs on the application thread for every recorded step);
        without the content coding and length when ``drop_coding`` (the body was decoded
        from its ``Content-Encoding``)."""
        secrets = self.secrets.values
        for_secrets, memo = self._header_memo
        if for_secrets is not secrets or len(memo) >= _MEMO_MAX:
            memo = {}
            self._header_memo = (secrets, memo)
        out = []
        for pair in headers:
            done = memo.get(pair)
            if done is not None:
                if not drop_coding or pair[0].lower() not in _CODING_HEADERS:
                    out.append(done)
                continue
            key, value = pair
            name = key.lower()
            if drop_coding and name in _CODING_HEADERS:
                continue
            if self._secret_header(name, value):
                done = (key.decode("latin-1"), REDACTED)
            else:
                done = (key.decode("latin-1"), self._value(value).decode("latin-1"))
                memo[pair] = done  # never a credential's value, even as a key
            out.append(done)
        return out

    def _value(self, value: bytes) -> bytes:
        for pattern in self._patterns:
            value = pattern.sub(_REDACTED_BYTES, value)
        return self.secrets.scrub(value, _REDACTED_BYTES)

    def _secret_header(self, name: bytes, value: bytes) -> bool:
        secret = self._header_names.get(name)
        if secret is None:
            folded = name.lower().replace(b"-", b"").replace(b"_", b"")
            secret = name in _SECRET_HEADER_BYTES or bool(_SECRET_HEADER_NAME.search(folded))
            if len(self._header_names) < 4096:
                self._header_names[name] = secret
        return secret or _AUTH_VALUE.match(value) is not None

    def url(self, url: str) -> str:
        """``url`` without user-info and with credential-looking query values redacted."""
        secrets = self.secrets.values
        for_secrets, memo = self._url_memo
        if for_secrets is not secrets or len(memo) >= _MEMO_MAX:
            memo = {}
            self._url_memo = (secrets, memo)
        done = memo.get(url)
        if done is None:
            done = memo[url] = self._redacted_url(url)
        return done

    def _redacted_url(self, url: str) -> str:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = f"{REDACTED}:{REDACTED}@{netloc.rpartition('@')[2]}"
        query = _redact_query(parts.query) if parts.query else parts.query
        if netloc != parts.netloc or query != parts.query:
            url = urlunsplit(SplitResult(parts.scheme, netloc, parts.path, query, parts.fragment))
        if self._patterns or self.secrets.values:
            return self._value(url.encode()).decode()
        return url


def _may_bear(data: bytes) -> bool:
    """Whether ``data`` may hold a bearer token (two substring scans, no regex)."""
    return b"earer" in data or b"EARER" in data


def _is_token(match: re.Match[bytes]) -> bool:
    return match.end(1) - match.start(1) >= _BEARER_MIN


def _redact_token(match: re.Match[bytes]) -> bytes:
    if not _is_token(match):
        return match.group(0)
    return match.group(0)[: match.start(1) - match.start(0)] + _REDACTED_BYTES


def _url_secrets(url: str) -> list[str]:
    parts = urlsplit(url)
    found: list[str] = []
    if parts.password:
        found += (parts.password, unquote(parts.password))
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if _is_secret_param(name):
            found += (value, quote(value, safe=""))
    return found


def _redact_query(query: str) -> str:
    pairs = parse_qsl(query, keep_blank_values=True)
    if not any(_is_secret_param(name) for name, _ in pairs):
        return query
    return "&".join(
        f"{quote(name, safe='')}={REDACTED if _is_secret_param(name) else quote(value, safe='')}"
        for name, value in pairs
    )


def _is_secret_param(name: str) -> bool:
    folded = name.lower().replace("-", "").replace("_", "").replace(".", "")
    return _SECRET_QUERY.search(folded) is not None
