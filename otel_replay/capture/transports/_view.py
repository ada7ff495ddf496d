"""What the urllib3 and aiohttp seams share: a request in the shape :meth:`Recorder.begin`
reads (an httpx ``Request``'s), and wrapping a library once it is imported."""

from __future__ import annotations

import functools
import importlib.util
import sys
import threading
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

import wrapt

__all__ = ["RequestView", "UrlView", "raw_headers", "wrap_on_import"]

Undo = Callable[[], None]

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


def wrap_on_import(module: str, wrap: Callable[[ModuleType], Undo | None]) -> Undo | None:
    """Call ``wrap`` with ``module`` once it is imported (at once if it is already), so that a
    process which never uses the library does not pay for importing it. The undo function
    takes ``wrap``'s wrapping off, or keeps it from happening; None when the library is not
    installed."""
    if module not in sys.modules and not _installed(module.partition(".")[0]):
        return None
    pending = _Pending(wrap)
    wrapt.register_post_import_hook(pending.imported, module)
    return pending.undo


@functools.cache
def _installed(package: str) -> bool:
    """Whether ``package`` can be imported; asked once per process (every replay, every
    marked test, wraps the same libraries, and a search of the path is not free)."""
    return importlib.util.find_spec(package) is not None


class _Pending:
    """One wrapping waiting for its module; undone, it lets go of ``wrap`` (and whatever
    ``wrap`` holds, a recorder or a replay session), though the import hook stays."""

    def __init__(self, wrap: Callable[[ModuleType], Undo | None]) -> None:
        self._wrap: Callable[[ModuleType], Undo | None] | None = wrap
        self._undo: Undo | None = None
        self._lock = threading.Lock()

    def imported(self, module: ModuleType) -> None:
        with self._lock:
            if self._wrap is not None:
                self._undo, self._wrap = self._wrap(module), None

    def undo(self) -> None:
        with self._lock:
            self._wrap = None
            if self._undo is not None:
                self._undo()
                self._undo = None
