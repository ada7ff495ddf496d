"""Download a trace source over HTTP(S), within the source limits."""

from __future__ import annotations

import contextlib
import functools
import http.client
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit

from otel_replay.errors import SourceError
from otel_replay.redact import Redactor
from otel_replay.replay.sources._limits import Limits, read_bounded

__all__ = ["fetch", "is_url", "shown"]

_CONNECT_TIMEOUT_S = 30.0


def is_url(ref: str) -> bool:
    """True when ``ref`` is an http(s) URL."""
    return ref.lower().startswith(("http://", "https://"))


def shown(url: str) -> str:
    """``url`` as messages and reports name it: without the ``#fragment``, user-info and
    credential-looking query values redacted (a source URL may carry a token)."""
    address = url.split("#", 1)[0]
    return _shown(_redactor(address), address)


def _shown(redactor: Redactor, address: str) -> str:
    try:
        return redactor.url(address)
    except ValueError:  # too malformed to split (http://[::1): nothing to find in it either
        return address


def _redactor(url: str) -> Redactor:
    """A redactor that knows the credentials ``url`` carries, to scrub them wherever they
    recur (a library's error message may quote the URL)."""
    redactor = Redactor()
    with contextlib.suppress(ValueError):
        redactor.learn((), url)
    return redactor


def fetch(
    url: str,
    limits: Limits | None = None,
    *,
    named: str | None = None,
    same_host: bool = False,
    statuses: Mapping[int, str] | None = None,
    until: float | None = None,
) -> bytes:
    """The body ``url`` answers a GET with (any ``#fragment`` is not sent).

    Uses urllib rather than httpx on purpose: in a recording process httpx is instrumented,
    and downloading a trace must not become a step of the run being recorded. Follows http(s)
    redirects only, and with ``same_host`` only those to the same host and port. Raises
    SourceError naming the URL (or ``named``) when the server cannot be reached, answers with
    an error (said as ``statuses`` says for its code, when it does), answers more than the
    byte bound, or takes longer than the time bound (``limits``, default from the environment;
    a source read in several requests passes the ``time.monotonic()`` its bound ends at as
    ``until``).
    """
    limits = limits if limits is not None else Limits.from_env()
    address = url.split("#", 1)[0]
    redactor = _redactor(address)
    target = named if named is not None else _shown(redactor, address)
    seconds = limits.timeout_s if until is None else until - time.monotonic()
    if seconds <= 0:
        raise _late(target, limits)
    deadline = _Deadline(seconds)
    opener = _opener(deadline, urlsplit(address).netloc if same_host else None)
    connect_timeout = min(_CONNECT_TIMEOUT_S, seconds)
    try:
        request = urllib.request.Request(  # ValueError for a malformed URL: http://[::1
            address, headers={"Accept": "application/json", "User-Agent": "otel-replay"}
        )
        with deadline, opener.open(request, timeout=connect_timeout) as response:
            # read1 returns what one read of the socket gives, so the deadline can cut a
            # slow body.
            body = read_bounded(response.read1, target, limits, "answers")
    except SourceError:  # past the byte bound: already one line naming the source
        raise
    except urllib.error.HTTPError as exc:
        exc.close()  # it holds the connection
        said = (statuses or {}).get(exc.code)
        if said is not None:
            raise SourceError(f"{target}: {said} (HTTP {exc.code})") from None
        raise SourceError(f"{target}: the server answered HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
        if deadline.expired:
            raise _late(target, limits) from None
        reason = str(getattr(exc, "reason", None) or exc) or type(exc).__name__
        reason = redactor.body(reason.encode(errors="replace")).decode(errors="replace")
        raise SourceError(f"{target}: cannot download ({reason})") from None
    if deadline.expired:  # the shut socket read as the end of the body
        raise _late(target, limits)
    return body


def _late(target: str, limits: Limits) -> SourceError:
    return SourceError(
        f"{target}: the download took longer than {limits.timeout_s:g} s "
        "(download it, then give the file)"
    )


class _Deadline:
    """A timer that shuts down every socket registered with it when the time is up."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed
        sock.shutdown(socket.SHUT_RDWR)


def _opener(deadline: _Deadline, host: str | None = None) -> urllib.request.OpenerDirector:
    """An opener for http and https only (a redirect elsewhere is refused, and one to another
    ``host`` than this ``host:port``, when given) whose connections register their sockets
    with ``deadline``."""

    def tracked(base: type[http.client.HTTPConnection]) -> Any:
        class Tracked(base):  # type: ignore[valid-type,misc]
            def connect(self) -> None:
                super().connect()
                deadline.track(self.sock)

        return Tracked

    plain, secure = tracked(http.client.HTTPConnection), tracked(http.client.HTTPSConnection)

    class Http(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(plain, req)

    class Https(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            context = getattr(self, "_context", None)
            return self.do_open(functools.partial(secure, context=context), req)

    class Redirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(
            self, req: urllib.request.Request, fp: Any, code: int, msg: str, hdrs: Any, newurl: str
        ) -> urllib.request.Request | None:
            elsewhere = urlsplit(urljoin(req.full_url, newurl)).netloc
            if host is not None and elsewhere.lower() != host.lower():
                fp.close()  # it holds the connection
                # A ValueError, reported as the reason the download failed.
                raise ValueError(f"redirected to another host, {elsewhere}; not followed")
            return super().redirect_request(req, fp, code, msg, hdrs, newurl)

    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),
        urllib.request.UnknownHandler(),
        Http(),
        Https(),
        urllib.request.HTTPDefaultErrorHandler(),
        Redirect(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener
