"""aiohttp's seam: a client middleware of ours, innermost, on every session.

Replay adds its own through :func:`add_middleware`; both stay in stage order."""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

import wrapt
from opentelemetry.instrumentation.utils import unwrap

from otel_replay._ignore import IgnoreRules
from otel_replay.capture._step import OpenStep, exchange, should_record
from otel_replay.capture.transports._view import RequestView, raw_headers, wrap_on_import

if TYPE_CHECKING:
    from otel_replay.capture._recorder import Recorder

__all__ = [
    "CAPTURE",
    "REPLAY",
    "add_middleware",
    "closed_by_application",
    "instrument",
    "request_body",
    "wrap_request",
]

CAPTURE = 0
REPLAY = 1
_STAGE = "_otel_replay_stage"
_CODING = frozenset({b"content-encoding", b"content-length"})

Middleware = Callable[[Any, Callable[[Any], Awaitable[Any]]], Awaitable[Any]]
MiddlewareFor = Callable[[Any, dict[str, Any]], Middleware | None]
"""Makes the middleware for one ``_request`` call (session, keyword arguments), or None."""

# Steps whose response body is still being fed, by id() of their reader: aiohttp's
# StreamReader has __slots__, so the step cannot ride on the reader itself.
_feeding: dict[int, OpenStep] = {}


def add_middleware(
    kwargs: dict[str, Any], session: Any, middleware: Middleware, stage: int
) -> None:
    """Put ``middleware`` at the end of the request's middleware chain (``kwargs`` of
    ``ClientSession._request``), before any of ours of a later ``stage``."""
    setattr(middleware, _STAGE, stage)
    chain = kwargs.get("middlewares")
    current = list(getattr(session, "_middlewares", ()) if chain is None else chain)
    at = len(current)
    for i, existing in enumerate(current):
        if getattr(existing, _STAGE, -1) > stage:
            at = i
            break
    current.insert(at, middleware)
    kwargs["middlewares"] = tuple(current)


def wrap_request(middleware_for: MiddlewareFor, stage: int) -> Callable[[], None] | None:
    """Wrap ``ClientSession._request``, once aiohttp is imported, to add the middleware
    ``middleware_for`` makes to each call (aiohttp 3.12 and later); the undo function, or None
    when aiohttp is not installed."""

    def wrap(aiohttp: ModuleType) -> Callable[[], None] | None:
        if not hasattr(aiohttp, "ClientMiddlewareType"):
            return None  # before 3.12: no middlewares, its calls are not seen

        async def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            middleware = middleware_for(instance, kwargs)
            if middleware is not None:
                kwargs = dict(kwargs)
                add_middleware(kwargs, instance, middleware, stage)
            return await wrapped(*args, **kwargs)

        wrapt.wrap_function_wrapper(aiohttp.ClientSession, "_request", wrapper)
        return lambda: unwrap(aiohttp.ClientSession, "_request")

    return wrap_on_import("aiohttp", wrap)


def instrument(recorder: Recorder, ignore: IgnoreRules) -> Callable[[], None] | None:
    """Record every aiohttp exchange but those ``ignore`` matches; the undo function, or None
    without aiohttp."""

    def middleware_for(session: Any, kwargs: dict[str, Any]) -> Middleware | None:
        if not should_record():
            return None
        decompress = kwargs.get("auto_decompress")
        if decompress is None:
            decompress = getattr(session, "auto_decompress", True)
        return _middleware(recorder, ignore, bool(decompress))

    return wrap_request(middleware_for, CAPTURE)


async def request_body(request: Any) -> bytes | None:
    """The exact bytes of ``request``'s in-memory body (``b""`` without one); None for a
    payload that is streamed (file, async iterable, multipart)."""
    from aiohttp import payload  # noqa: PLC0415

    body = request.body
    if not body:
        return b""
    if isinstance(body, payload.BytesPayload):
        data: bytes = await body.as_bytes()
        return data
    return None


def _middleware(recorder: Recorder, ignore: IgnoreRules, decompress: bool) -> Middleware:
    async def record(request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        step = await _begin(recorder, ignore, request)
        if step is None:
            return await handler(request)
        with exchange(step):
            response = await handler(request)
        _adopt(recorder, step, response, decompress)
        return response

    return record


async def _begin(recorder: Recorder, ignore: IgnoreRules, request: Any) -> OpenStep | None:
    if not should_record() or "Upgrade" in request.headers:  # websockets are not covered
        return None
    try:
        url = request.url
        if ignore and ignore.match(url.host or "", url.port, url.path) is not None:
            return None
        content = await request_body(request)
        view = RequestView(request.method, str(request.url), raw_headers(request.headers), content)
        step = recorder.begin(view)
        if content is None:
            _tee_payload(request.body, step)
        return step
    except Exception as exc:
        recorder.warn_once("starting a step", exc)
        return None


class _WriterTee:
    """A stream writer that remembers what the payload writes through it."""

    def __init__(self, inner: Any, step: OpenStep) -> None:
        self._inner = inner
        self._step = step

    async def write(self, chunk: Any, *args: Any, **kwargs: Any) -> Any:
        if chunk:
            self._step.on_request_chunk(bytes(chunk))
        return await self._inner.write(chunk, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _tee_payload(body: Any, step: OpenStep) -> None:
    write_with_length = body.write_with_length

    async def teed(writer: Any, content_length: Any) -> Any:
        step.on_request_start()
        return await write_with_length(_WriterTee(writer, step), content_length)

    body.write_with_length = teed


def _adopt(recorder: Recorder, step: OpenStep, response: Any, decompress: bool) -> None:
    try:
        headers = list(response.raw_headers)
        if decompress and any(k.lower() == b"content-encoding" for k, _ in headers):
            # aiohttp feeds the body decompressed: the coding headers no longer describe it.
            headers = [(k, v) for k, v in headers if k.lower() not in _CODING]
        step.on_response(response.status, headers)
        content = response.content
        # What arrived with the head is in the reader already; the rest is teed as it comes.
        for chunk in list(getattr(content, "_buffer", ())):
            step.on_chunk(bytes(chunk))
        if content.exception() is not None:
            step.fail(content.exception())
        elif content.is_eof():
            step.finish(complete=True)
        else:
            content.__class__ = _tee_class(type(content))
            _feeding[id(content)] = step
            recorder.open_steps.track(response, step)
            weakref.finalize(response, _feeding.pop, id(content), None)
    except Exception as exc:
        recorder.warn_once("teeing a response", exc)
        step.finish(complete=False)


class _TeeReader:
    """Mixed into a StreamReader class: remembers what the connection feeds it."""

    __slots__ = ()

    def feed_data(self, data: bytes, *args: Any) -> Any:
        step = _feeding.get(id(self))
        if step is not None and data:
            step.on_chunk(bytes(data))
        return super().feed_data(data, *args)  # type: ignore[misc]

    def feed_eof(self) -> None:
        super().feed_eof()  # type: ignore[misc]
        step = _feeding.pop(id(self), None)
        if step is not None:
            step.finish(complete=True)

    def set_exception(self, exc: BaseException, *args: Any) -> None:
        super().set_exception(exc, *args)  # type: ignore[misc]
        step = _feeding.pop(id(self), None)
        if step is not None:
            if exc is closed_by_application():
                step.finish(complete=False)  # released or closed before the end
            else:
                step.fail(exc)


_tee_classes: dict[type[Any], type[Any]] = {}


def _tee_class(reader: type[Any]) -> type[Any]:
    """``reader``'s class with :class:`_TeeReader` mixed in (same layout, so an instance can
    take it as its class)."""
    teed = _tee_classes.get(reader)
    if teed is None:
        name = f"Teed{reader.__name__}"
        teed = _tee_classes[reader] = type(name, (_TeeReader, reader), {"__slots__": ()})
    return teed


@cache
def closed_by_application() -> object:
    """The exception aiohttp puts into a response's reader when the application releases or
    closes the response early."""
    from aiohttp import client_reqrep  # noqa: PLC0415

    return getattr(client_reqrep, "_CONNECTION_CLOSED_EXCEPTION", None)
