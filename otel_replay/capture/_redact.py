"""Redaction at capture, before anything is hashed, exported or stored.

Three rules: secret-bearing headers lose their values; credential-looking query parameters
(and URL user-info) lose theirs; the user's ``OTEL_REPLAY_REDACT`` regexes are applied to
bodies and to the remaining header values. Redaction works on our copies: the application's
request and response are never touched.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import SplitResult, parse_qsl, quote, urlsplit, urlunsplit

__all__ = ["REDACTED", "Redactor"]

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


class Redactor:
    """Applies the redaction rules; build one per instrumentation with the user's patterns."""

    __slots__ = ("_patterns",)

    def __init__(self, patterns: Iterable[re.Pattern[bytes]] = ()) -> None:
        self._patterns = tuple(patterns)

    def body(self, data: bytes) -> bytes:
        """``data`` with every user pattern's matches replaced by ``REDACTED``.

        Returns the same object when there are no patterns, so the common case copies nothing.
        """
        for pattern in self._patterns:
            data = pattern.sub(_REDACTED_BYTES, data)
        return data

    def headers(
        self, headers: Iterable[tuple[bytes, bytes]], drop_coding: bool = False
    ) -> list[tuple[str, str]]:
        """Raw header pairs as text, secret headers blanked and user patterns applied to the
        rest, in one pass (this runs on the application thread for every recorded step);
        without the content coding and length when ``drop_coding`` (the body was decoded
        from its ``Content-Encoding``)."""
        body = self.body  # returns its argument when there are no patterns
        out = []
        for key, value in headers:
            name = key.lower()
            if drop_coding and name in _CODING_HEADERS:
                continue
            text = REDACTED if name in _SECRET_HEADER_BYTES else body(value).decode("latin-1")
            out.append((key.decode("latin-1"), text))
        return out

    def url(self, url: str) -> str:
        """``url`` without user-info and with credential-looking query values redacted."""
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = f"{REDACTED}:{REDACTED}@{netloc.rpartition('@')[2]}"
        query = _redact_query(parts.query) if parts.query else parts.query
        if netloc == parts.netloc and query == parts.query:
            return self.body(url.encode()).decode() if self._patterns else url
        redacted = urlunsplit(SplitResult(parts.scheme, netloc, parts.path, query, parts.fragment))
        return self.body(redacted.encode()).decode() if self._patterns else redacted


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
