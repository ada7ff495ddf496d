"""The seam: wrappers around the client's single-request dispatch of httpx and httpx2.

``Client._send_single_request`` is where every client hands one request to its transport,
whatever that transport is (the default pool, a mounted proxy, a mock, the OTel httpx
transport). Wrapping it at class level covers clients created before instrumentation, keeps
our span outside the transport (so opentelemetry-instrumentation-httpx's span nests inside
it), and sees each redirect hop as its own step. A call an ``OTEL_REPLAY_IGNORE`` rule matches
(background traffic) passes through untouched: no step, no span of ours.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

from otel_replay._ignore import IgnoreRules
from otel_replay.capture._recorder import Recorder
from otel_replay.capture._step import OpenStep, exchange, should_record

if TYPE_CHECKING:
    from otel_replay.capture._step import OpenStep

__all__ = ["async_wrapper", "request_tee_classes", "sync_wrapper", "tee_classes"]

Wrapped = Callable[..., Any]
_PORTS = {"https": 443, "http": 80}


def _begin(
    recorder: Recorder,
    ignore: IgnoreRules,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    request_tee: type[Any],
) -> OpenStep | None:
    if not should_record():  # suppressed, or a hooked layer above records this exchange
        return None
    request = args[0] if args else kwargs["request"]
    try:
        url = request.url
        if ignore and ignore.match(url.host, url.port or _PORTS.get(url.scheme), url.path):
            return None
        step = recorder.begin(request)
        if step.streams_request:
            stream = request.stream
            if isinstance(stream, request_tee):  # sent again: tee the body once, for this step
                stream = stream._inner
            request.stream = request_tee(stream, step)
        return step
    except Exception as exc:
        recorder.warn_once("starting a step", exc)
        return None


def _adopt(recorder: Recorder, step: OpenStep, response: Any, tee: type[Any]) -> None:
    try:
        step.on_response(response.status_code, response.headers.raw)
        content = getattr(response, "_content", None)
        if content is not None:
            # In-memory transports (mocks, ASGI/WSGI apps) hand back an already-read body:
            # there is no stream to tee and no close to wait for.
            step.on_chunk(content)
            step.finish(complete=True)
        else:
            stream = tee(response.stream, step)
            response.stream = stream
            recorder.open_steps.track(stream, step)
    except Exception as exc:
        recorder.warn_once("teeing a response", exc)
        step.finish(complete=False)


def sync_wrapper(recorder: Recorder, module: ModuleType, ignore: IgnoreRules) -> Callable[..., Any]:
    """A wrapt wrapper for ``module.Client._send_single_request``; calls ``ignore`` matches
    are not recorded."""
    tee = tee_classes(module)[0]
    request_tee = request_tee_classes(module)[0]

    def wrapper(wrapped: Wrapped, instance: Any, args: tuple[Any, ...], kwargs: Any) -> Any:
        step = _begin(recorder, ignore, args, kwargs, request_tee)
        if step is None:
            return wrapped(*args, **kwargs)
        with exchange(step):
            response = wrapped(*args, **kwargs)
        _adopt(recorder, step, response, tee)
        return response

    return wrapper


def async_wrapper(
    recorder: Recorder, module: ModuleType, ignore: IgnoreRules
) -> Callable[..., Awaitable[Any]]:
    """A wrapt wrapper for ``module.AsyncClient._send_single_request``; calls ``ignore``
    matches are not recorded."""
    tee = tee_classes(module)[1]
    request_tee = request_tee_classes(module)[1]

    async def wrapper(wrapped: Wrapped, instance: Any, args: tuple[Any, ...], kwargs: Any) -> Any:
        step = _begin(recorder, ignore, args, kwargs, request_tee)
        if step is None:
            return await wrapped(*args, **kwargs)
        with exchange(step):
            response = await wrapped(*args, **kwargs)
        _adopt(recorder, step, response, tee)
        return response

    return wrapper


class _Tee:
    """What every tee holds: the stream it wraps and the step it feeds."""

    def __init__(self, inner: Any, step: OpenStep) -> None:
        self._inner = inner
        self._step = step


class _SyncTeeMixin(_Tee):
    _pass: Iterator[bytes] | None = None  # the one pass over the stream, once begun

    def __iter__(self) -> Iterator[bytes]:
        step = self._step
        if self._pass is None:
            self._pass = iter(self._inner)
        try:
            for chunk in self._pass:
                step.on_chunk(chunk)
                yield chunk
        except GeneratorExit:
            raise
        except BaseException as exc:
            step.fail(exc)
            raise
        step.finish(complete=True)

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._step.finish(complete=False)


class _AsyncTeeMixin(_Tee):
    _pass: AsyncIterator[bytes] | None = None  # the one pass over the stream, once begun

    async def __aiter__(self) -> AsyncIterator[bytes]:
        step = self._step
        if self._pass is None:
            self._pass = self._inner.__aiter__()
        try:
            async for chunk in self._pass:
                step.on_chunk(chunk)
                yield chunk
        except GeneratorExit:
            raise
        except BaseException as exc:
            step.fail(exc)
            raise
        step.finish(complete=True)

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._step.finish(complete=False)


class _SyncRequestTeeMixin(_Tee):
    def __iter__(self) -> Iterator[bytes]:
        step = self._step
        step.on_request_start()  # a body sent again (a rewound upload) is recorded once
        for chunk in self._inner:
            step.on_request_chunk(chunk)
            yield chunk

    def close(self) -> None:
        self._inner.close()


class _AsyncRequestTeeMixin(_Tee):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        step = self._step
        step.on_request_start()
        async for chunk in self._inner:
            step.on_request_chunk(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


@cache
def request_tee_classes(module: ModuleType) -> tuple[type[Any], type[Any]]:
    """The (sync, async) request-body tee classes for ``module`` (``httpx`` or ``httpx2``)."""
    sync = type("SyncRequestTeeStream", (_SyncRequestTeeMixin, module.SyncByteStream), {})
    async_ = type("AsyncRequestTeeStream", (_AsyncRequestTeeMixin, module.AsyncByteStream), {})
    return sync, async_


@cache
def tee_classes(module: ModuleType) -> tuple[type[Any], type[Any]]:
    """The (sync, async) tee classes for ``module`` (``httpx`` or ``httpx2``)."""
    sync = type("SyncTeeStream", (_SyncTeeMixin, module.SyncByteStream), {})
    async_ = type("AsyncTeeStream", (_AsyncTeeMixin, module.AsyncByteStream), {})
    return sync, async_
