"""Replay for aiohttp: a client middleware that answers each hop from the recording, before
any connection is made."""

from __future__ import annotations

import asyncio
import collections
import inspect
import time
from collections.abc import Awaitable, Callable
from functools import cache
from typing import Any

from opentelemetry import context
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY

from otel_replay import errors
from otel_replay.capture.transports import (
    REPLAY,
    Middleware,
    closed_by_application,
    raw_headers,
    wrap_request,
)
from otel_replay.envelope import module_class
from otel_replay.errors import UnmatchedRequestError
from otel_replay.replay._faults import injected_error
from otel_replay.replay._match import Matcher
from otel_replay.replay._session import (
    Answer,
    ReplaySession,
    cancelled_by_program,
    interruption,
)

__all__ = ["install"]

_LIMIT = 2**16
# What aiohttp raises when a ClientTimeout's ``total`` runs out: asyncio's own TimeoutError
# (the builtin since Python 3.11), not a ClientError; recorded by either name.
_TIMEOUTS = frozenset({"TimeoutError", "asyncio.TimeoutError", "asyncio.exceptions.TimeoutError"})


def install(session: ReplaySession) -> Callable[[], None] | None:
    """Serve every aiohttp request from ``session``; the undo function, or None without
    aiohttp 3.12+."""

    def middleware_for(client: Any, kwargs: dict[str, Any]) -> Middleware | None:
        return _middleware(session)

    return wrap_request(middleware_for, REPLAY)


def _middleware(session: ReplaySession) -> Middleware:
    async def serve(request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        if "Upgrade" in request.headers:  # websockets are not replayed: the guard decides
            return await handler(request)
        url = str(request.url)
        if context.get_value(_SUPPRESS_INSTRUMENTATION_KEY):  # an OpenTelemetry export
            answer = session.answer(request.method, url, b"", telemetry=True)
        else:
            body = await request.body.as_bytes() if request.body else b""
            headers = raw_headers(request.headers)
            try:
                answer = session.answer(request.method, url, body, None, headers)
            except UnmatchedRequestError as exc:
                raise errors.UnmatchedAiohttpRequestError(str(exc)) from None
        if answer is None:  # not strict, or past a fork's live point: live
            live = session.sent_live()
            try:
                response = await handler(request)
            except Exception as exc:
                session.live_ended(live, None, exc)
                raise
            session.live_ended(live, response.status)
            return response
        if answer.status_code is None:
            raise _error(answer)
        return await _response(request, answer, session.matcher)

    return serve


def _error(answer: Answer) -> BaseException:
    """The client error a step recorded, as the aiohttp class of that name when it is one (an
    interruption as itself, a total timeout as asyncio's TimeoutError)."""
    import aiohttp  # noqa: PLC0415

    interrupted = interruption(answer.error_type)
    if interrupted is not None:
        return interrupted

    name = (answer.error_type or "").rsplit(".", 1)[-1]
    message = f"replayed {answer.error_type or 'transport error'} (as recorded)"
    injected = injected_error(answer.error_type, "aiohttp")
    if injected is not None:
        name, message = injected
    elif answer.error_type in _TIMEOUTS:  # caught as a timeout, as in the recording
        return asyncio.TimeoutError(message)
    if cls := module_class(aiohttp, name, aiohttp.ClientError):
        try:
            return cls(message)  # type: ignore[no-any-return]
        except TypeError:  # a class that wants more than a message
            pass
    return aiohttp.ClientConnectionError(message)


class _Protocol:
    """The stand-in connection's protocol: what a response and its body reader ask of it."""

    connected = True
    upgraded = False

    def __init__(self, message: Any, reader: Any) -> None:
        self._message = message
        self.reader = reader

    async def read(self) -> tuple[Any, Any]:
        return self._message, self.reader

    def pause_reading(self) -> None:
        pass

    def resume_reading(self, *args: Any, **kwargs: Any) -> None:
        pass


class _Connection:
    """The stand-in connection a served response holds and releases."""

    transport = None

    def __init__(self, protocol: _Protocol) -> None:
        self.protocol = protocol
        self._callbacks: list[Callable[[], None]] = []

    def add_callback(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    def _done(self) -> None:
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def release(self) -> None:
        self._done()

    def close(self) -> None:
        self._done()

    @property
    def closed(self) -> bool:
        return not self._callbacks


@cache
def _reader_class() -> type[Any]:
    from aiohttp import StreamReader  # noqa: PLC0415

    class ReplayReader(StreamReader):
        """A body reader fed one recorded chunk each time a read waits for data.

        A response the program lets go before reading it all (a 429 it backs off on by its
        status alone) is fed the rest of the recorded body, then its recorded end, as it lets
        go: a socket delivers the body whether the program reads it or not, and every
        recorded chunk came before the program let go in the recording. So what watches the
        reader (the capture recording this replay) sees what was served, as it saw what the
        server sent."""

        __slots__ = (
            "_otel_answer",
            "_otel_complete",
            "_otel_error",
            "_otel_held",
            "_otel_matcher",
            "_otel_pending",
            "_otel_started",
        )
        _otel_answer: Answer  # for what its pieces wait for and leave out (``Answer``)
        _otel_complete: bool
        _otel_error: Exception | None
        _otel_held: bool  # ended by the program's own cancellation (``cancelled_by_program``)
        _otel_matcher: Matcher
        _otel_pending: collections.deque[tuple[bytes, int, int]]  # chunk, due, its number
        _otel_started: float

        def _otel_feed(self, chunk: bytes) -> None:
            self.feed_data(chunk)
            if self._http_chunk_splits is not None:
                self.end_http_chunk_receiving()

        async def _wait(self, func_name: str) -> None:
            pending, answer, matcher = self._otel_pending, self._otel_answer, self._otel_matcher
            if pending:
                chunk, due, number = pending.popleft()
                if due:
                    delay = self._otel_started + due / 1e9 - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                if answer.awaits:
                    await matcher.wait_async(answer.awaits[number])
                if answer.unsent:
                    chunk = matcher.deliverable(chunk, answer.unsent[number])
                if chunk:  # else the read waits again, for the next piece
                    self._otel_feed(chunk)
                return
            if answer.awaits:
                await matcher.wait_async(answer.awaits[-1])
            if self._otel_held:
                await asyncio.get_running_loop().create_future()  # until the program lets go
            if self._otel_error is not None:
                self.set_exception(self._otel_error)
                raise self._otel_error
            else:
                self.feed_eof()

        def set_exception(self, exc: BaseException, *args: Any) -> None:
            if exc is closed_by_application() and not self.is_eof():
                pending = self._otel_pending
                while pending:
                    self._otel_feed(pending.popleft()[0])
                if self._otel_error is not None:
                    exc, args = self._otel_error, ()  # it came before the program let go
                elif self._otel_complete:
                    self.feed_eof()
            super().set_exception(exc, *args)

    return ReplayReader


def _reader(
    answer: Answer,
    matcher: Matcher,
    protocol: Any,
    loop: asyncio.AbstractEventLoop,
    chunked: bool,
) -> Any:
    reader = _reader_class()(protocol, _LIMIT, loop=loop)
    reader._otel_answer, reader._otel_matcher = answer, matcher
    reader._otel_pending = collections.deque(
        (chunk, due, number)
        for number, (chunk, due) in enumerate(zip(answer.chunks, answer.times, strict=True))
        if chunk
    )
    reader._otel_started = time.perf_counter()
    reader._otel_held = cancelled_by_program(answer.error_type)
    failed = answer.error_type is not None and not reader._otel_held
    reader._otel_error = _error(answer) if failed else None
    reader._otel_complete = answer.complete
    if chunked:
        reader.begin_http_chunk_receiving()
    return reader


@cache
def _takes_stream_writer(response_class: type[Any]) -> bool:
    return "stream_writer" in inspect.signature(response_class).parameters


class _Written:
    """What a response made without a writer asks of the request's stream writer."""

    def __init__(self, size: int) -> None:
        self.output_size = size


async def _response(request: Any, answer: Answer, matcher: Matcher) -> Any:
    from aiohttp.helpers import TimerNoop  # noqa: PLC0415
    from aiohttp.http import HttpVersion11  # noqa: PLC0415
    from aiohttp.http_parser import RawResponseMessage  # noqa: PLC0415
    from multidict import CIMultiDict, CIMultiDictProxy  # noqa: PLC0415

    status = answer.status_code
    assert status is not None
    chunked = len(answer.chunks) > 1 or answer.error_type is not None
    headers = list(answer.headers)
    if chunked:
        headers.append(("Transfer-Encoding", "chunked"))
    else:
        headers.append(("Content-Length", str(sum(len(c) for c in answer.chunks))))
    loop = asyncio.get_running_loop()
    protocol = _Protocol(None, None)
    protocol.reader = _reader(answer, matcher, protocol, loop, chunked)
    protocol._message = RawResponseMessage(
        version=HttpVersion11,
        code=status,
        reason=_reason(status),
        headers=CIMultiDictProxy(CIMultiDict(headers)),
        raw_headers=tuple(
            (k.encode("latin-1", "replace"), v.encode("latin-1", "replace")) for k, v in headers
        ),
        should_close=False,
        compression=None,
        upgrade=False,
        chunked=chunked,
    )
    options: dict[str, Any] = {
        "writer": None,
        "continue100": None,
        "timer": TimerNoop(),
        "request_info": request.request_info,
        "traces": getattr(request, "_traces", []),
        "loop": loop,
        "session": getattr(request, "session", None),
    }
    response_class = request.response_class
    if _takes_stream_writer(response_class):
        options["stream_writer"] = _Written(0)
    response = response_class(request.method, request.original_url, **options)
    await response.start(_Connection(protocol))
    return response


def _reason(status: int) -> str:
    import http  # noqa: PLC0415

    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""
