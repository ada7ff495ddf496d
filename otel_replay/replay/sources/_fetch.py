"""Download an OTLP JSON source over HTTP(S)."""

from __future__ import annotations

import urllib.error
import urllib.request

from otel_replay.errors import SourceError

__all__ = ["fetch", "is_url"]

_MAX_BYTES = 1 << 30


def is_url(ref: str) -> bool:
    """True when ``ref`` is an http(s) URL."""
    return ref.lower().startswith(("http://", "https://"))


def fetch(url: str, *, timeout: float = 30.0) -> bytes:
    """The body ``url`` answers a GET with (any ``#fragment`` is not sent).

    Uses urllib rather than httpx on purpose: in a recording process httpx is instrumented,
    and downloading a trace must not become a step of the run being recorded. Raises
    SourceError naming the URL when the server cannot be reached or answers with an error.
    """
    target = url.split("#", 1)[0]
    request = urllib.request.Request(
        target, headers={"Accept": "application/json", "User-Agent": "otel-replay"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body: bytes = response.read(_MAX_BYTES + 1)
    except urllib.error.HTTPError as exc:
        exc.close()  # it holds the connection
        raise SourceError(f"{target}: the server answered HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise SourceError(f"{target}: cannot download ({reason})") from None
    if len(body) > _MAX_BYTES:
        raise SourceError(f"{target}: the answer is larger than {_MAX_BYTES} bytes")
    return body
