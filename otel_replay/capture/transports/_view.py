"""A request from urllib3 or aiohttp in the shape :meth:`Recorder.begin` reads (an httpx
``Request``'s)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

__all__ = ["RequestView", "UrlView", "raw_headers"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


class UrlView:
    """The parts of a URL the recorder reads; ``str()`` gives it whole."""

    __slots__ = ("host", "path", "port", "scheme", "text")

    def __init__(self, text: str) -> None:
        parts = urlsplit(text)
        self.text = text
        self.scheme = parts.scheme
        self.host = parts.hostname or ""
        try:
            self.port: int | None = parts.port
        except ValueError:
            self.port = None
        self.path = parts.path or "/"

    def __str__(self) -> str:
        return self.text


class _Headers:
    __slots__ = ("raw",)

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self.raw = raw


class RequestView:
    """One request as sent: ``content`` is the exact body, None when it is streamed (the seam
    tees it through the step as the library reads it)."""

    __slots__ = ("_content", "extensions", "headers", "method", "url")

    def __init__(
        self, method: str, url: str, headers: list[tuple[bytes, bytes]], content: bytes | None
    ) -> None:
        self.method = method.upper()
        self.url = UrlView(url)
        self.headers = _Headers(headers)
        self._content = content
        self.extensions: dict[str, Any] = {}


def _latin1(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    return str(value).encode("latin-1", errors="replace")


def raw_headers(headers: Any) -> list[tuple[bytes, bytes]]:
    """Header pairs as bytes, from a mapping (duplicates kept where it keeps them) or pairs."""
    if headers is None:
        return []
    items: Iterable[tuple[Any, Any]] = headers.items() if hasattr(headers, "items") else headers
    return [(_latin1(k), _latin1(v)) for k, v in items]


def origin(scheme: str, host: str, port: int | None) -> str:
    """``scheme://host[:port]``, the port left out when it is the scheme's default."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    if port is None or _DEFAULT_PORTS.get(scheme) == port:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"
