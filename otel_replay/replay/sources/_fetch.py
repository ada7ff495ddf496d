"""Download a trace source over HTTP(S), within the source limits."""

from __future__ import annotations

import base64
import contextlib
import functools
import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Collection, Mapping
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

import orjson

from otel_replay.errors import SourceError
from otel_replay.redact import Redactor
from otel_replay.replay.sources._limits import Limits, read_bounded

__all__ = ["Downloads", "answer_object", "fetch", "is_url", "shown"]

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


def _redactor(url: str, headers: Mapping[str, str] | None = None) -> Redactor:
    """A redactor that knows the credentials ``url`` and ``headers`` carry, to scrub them
    wherever they recur (a library's error message, a server's, may quote them)."""
    redactor = Redactor()
    sent = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    with contextlib.suppress(ValueError):
        redactor.learn(sent, url)
    return redactor


def fetch(url: str, limits: Limits | None = None) -> bytes:
    """The body ``url`` answers a GET with (any ``#fragment`` is not sent).

    Uses urllib rather than httpx on purpose: in a recording process httpx is instrumented,
    and downloading a trace must not become a step of the run being recorded. Follows http(s)
    redirects only. Raises SourceError naming the URL when the server cannot be reached,
    answers with an error, answers more than the byte bound, or takes longer than the time
    bound (``limits``, default from the environment).
    """
    limits = limits if limits is not None else Limits.from_env()
    body = _get(url, limits, time.monotonic() + limits.timeout_s, same_host=False)
    assert body is not None  # no status is taken for absence
    return body


class Downloads:
    """The requests one source makes to one server, bounded together: the bytes of all
    their answers by ``limits.max_bytes`` (the error names ``named``), their time by
    ``limits.timeout_s`` from this object's making. Redirects to another host or port are
    refused; ``headers`` go with every request and never into a message."""

    def __init__(
        self, limits: Limits, named: str, headers: Mapping[str, str] | None = None
    ) -> None:
        self.limits = limits
        self.named = named
        self._headers = dict(headers or {})
        self._until = time.monotonic() + limits.timeout_s
        self._read = 0

    def get(
        self,
        url: str,
        *,
        named: str | None = None,
        statuses: Mapping[int, str] | None = None,
        absent: Collection[int] = (),
    ) -> bytes | None:
        """The body ``url`` answers, None when its status is one of ``absent`` (a search
        that found nothing). Raises SourceError naming ``named`` (default: the source) as
        :func:`fetch` does, an error status said as ``statuses`` says for its code."""
        body = _get(
            url,
            self.limits,
            self._until,
            same_host=True,
            named=named or self.named,
            headers=self._headers,
            statuses=statuses,
            absent=absent,
        )
        if body is not None:
            self._read += len(body)
            if self._read > self.limits.max_bytes:
                raise self.limits.too_large(self.named, "answers")
        return body


def _get(
    url: str,
    limits: Limits,
    until: float,
    *,
    same_host: bool,
    named: str | None = None,
    headers: Mapping[str, str] | None = None,
    statuses: Mapping[int, str] | None = None,
    absent: Collection[int] = (),
) -> bytes | None:
    """:func:`fetch` with the options of :class:`Downloads` (``same_host``: redirects stay
    on the host and port)."""
    address = url.split("#", 1)[0]
    address, headers = _basic_auth(address, headers or {})
    redactor = _redactor(url.split("#", 1)[0], headers)
    target = named if named is not None else _shown(redactor, url.split("#", 1)[0])
    seconds = until - time.monotonic()
    if seconds <= 0:
        raise _late(target, limits)
    deadline = _Deadline(seconds)
    opener = _opener(deadline, urlsplit(address).netloc if same_host else None)
    connect_timeout = min(_CONNECT_TIMEOUT_S, seconds)
    try:
        request = urllib.request.Request(  # ValueError for a malformed URL: http://[::1
            address,
            headers={"Accept": "application/json", "User-Agent": "otel-replay", **(headers or {})},
        )
        with deadline:
            try:
                with opener.open(request, timeout=connect_timeout) as response:
                    # read1 returns what one read of the socket gives, so the deadline can
                    # cut a slow body.
                    body = read_bounded(response.read1, target, limits, "answers")
                    if response.length and not deadline.expired:  # the server hung up
                        raise SourceError(
                            f"{target}: the answer was cut short after {len(body)} bytes of "
                            f"{len(body) + response.length}"
                        )
            except urllib.error.HTTPError as exc:
                with exc:  # it holds the connection
                    if exc.code in absent:
                        return None
                    said = (statuses or {}).get(exc.code)
                    if said is None:
                        why = _reason(exc, redactor)
                        said = f"the server answered HTTP {exc.code} {exc.reason}{why}"
                    else:
                        said = f"{said} (HTTP {exc.code})"
                raise SourceError(f"{target}: {said}") from None
    except SourceError:  # already one line naming the source
        raise
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
        if deadline.expired or time.monotonic() >= until:  # the socket's timeout came first
            raise _late(target, limits) from None
        reason = str(getattr(exc, "reason", None) or exc) or type(exc).__name__
        reason = redactor.body(reason.encode(errors="replace")).decode(errors="replace")
        raise SourceError(f"{target}: cannot download ({reason})") from None
    if deadline.expired:  # the shut socket read as the end of the body
        raise _late(target, limits)
    return body


def _basic_auth(address: str, headers: Mapping[str, str]) -> tuple[str, Mapping[str, str]]:
    """``address`` without its user-info, and ``headers`` with that user-info as HTTP Basic
    credentials (as curl sends them): urllib would take ``user:pw@host`` for a host name."""
    try:
        parts = urlsplit(address)
        user, password = parts.username, parts.password
    except ValueError:  # too malformed to split: the request names it
        return address, headers
    if user is None and password is None:
        return address, headers
    pair = f"{unquote(user or '')}:{unquote(password or '')}".encode()
    bare = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return bare, {"Authorization": f"Basic {base64.b64encode(pair).decode()}", **headers}


def _reason(error: urllib.error.HTTPError, redactor: Redactor) -> str:
    """What the server's error answer says, as `` (…)``: the message of its JSON, or its
    text, on one line, at most 200 characters; nothing when it says nothing readable."""
    try:
        head = error.read(4096)
    except (OSError, http.client.HTTPException):
        return ""
    text = redactor.body(head).decode(errors="replace")
    line = " ".join((_message(text) or text).split())
    if not line or not line.isprintable() or line.startswith("<"):  # an HTML page: nothing
        return ""
    return f" ({line if len(line) <= 200 else line[:199] + '…'})"


def _message(text: str) -> str | None:
    """The message of a JSON error answer: Jaeger's ``{"error": {"message": …}}``,
    FastAPI's (Phoenix's) ``{"detail": …}``."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, dict):
        value = value.get("error", value)
    if isinstance(value, dict):
        value = value.get("message", value.get("detail"))
    return value if isinstance(value, str) else None


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
            followed = super().redirect_request(req, fp, code, msg, hdrs, newurl)
            if followed is not None and elsewhere.lower() != urlsplit(req.full_url).netloc.lower():
                followed.remove_header("Authorization")  # credentials stay with their host
            return followed

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


def answer_object(body: bytes | None, named: str, kind: str = "a JSON object") -> Mapping[str, Any]:
    """A server's answer ``body`` read as a JSON object; SourceError naming the source
    ``named`` when it is not JSON, or not an object (``kind`` says what was expected)."""
    try:
        value = orjson.loads(body or b"")
    except orjson.JSONDecodeError as exc:
        raise SourceError(f"{named}: the server's answer is not JSON ({exc})") from None
    if not isinstance(value, Mapping):
        raise SourceError(f"{named}: the server's answer is not {kind}")
    return value
