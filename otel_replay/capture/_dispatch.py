"""The seam: wrappers around the client's single-request dispatch of httpx and httpx2.

``Client._send_single_request`` is where every client hands one request to its transport,
whatever that transport is (the default pool, a mounted proxy, a mock, the OTel httpx
transport). Wrapping it at class level covers clients created before instrumentation, keeps
our span outside the transport (so opentelemetry-instrumentation-httpx's span nests inside
it), and sees each redirect hop as its own step. A call an ``OTEL_REPLAY_IGNORE`` rule matches
(background traffic) passes through untouched: no step, no span of ours.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any

from otel_replay._ignore import IgnoreRules
from otel_replay.capture._exchange import exchange, should_record
from otel_replay.capture._recorder import Recorder
from otel_replay.capture._step import OpenStep
from otel_replay.capture._tee import request_tee_classes, tee_classes

__all__ = ["async_wrapper", "sync_wrapper"]

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
