"""urllib3's seam: ``HTTPConnectionPool._make_request``, one attempt on the wire."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any

import wrapt
from opentelemetry.instrumentation.utils import unwrap

from otel_replay._ignore import IgnoreRules
from otel_replay.capture._step import OpenStep, exchange, should_record
from otel_replay.capture.transports._view import (
    RequestView,
    origin,
    raw_headers,
    wrap_on_import,
)

if TYPE_CHECKING:
    from otel_replay.capture._recorder import Recorder

__all__ = ["instrument", "request_url", "urllib3_2"]

_CODING = frozenset({b"content-encoding", b"content-length"})


def instrument(recorder: Recorder, ignore: IgnoreRules) -> Callable[[], None] | None:
    """Wrap ``_make_request`` once urllib3 is imported, when it is 2.x (calls ``ignore``
    matches are not recorded); the undo function, or None without urllib3."""

    def wrap(urllib3: ModuleType) -> Callable[[], None] | None:
        if not urllib3_2(urllib3):
            return None
        pool = urllib3.connectionpool.HTTPConnectionPool
        wrapt.wrap_function_wrapper(pool, "_make_request", _wrapper(recorder, ignore))
        return lambda: unwrap(pool, "_make_request")

    return wrap_on_import("urllib3", wrap)


def urllib3_2(urllib3: ModuleType) -> bool:
    """Whether ``urllib3`` is 2.x, whose seams we wrap."""
    return str(getattr(urllib3, "__version__", "")).startswith("2.")


def request_url(scheme: str, host: str, port: int | None, target: str) -> str:
    """The full URL of a request whose target is ``target`` (a path, or an absolute URL as
    sent to an HTTP proxy) on ``scheme://host:port``."""
    if not target.startswith("/"):
        return target
    return origin(scheme, host, port) + target


def _body(body: Any) -> bytes | None:
    """The exact bytes of an in-memory body, or None for a file or an iterable."""
    if body is None:
        return b""
    if isinstance(body, str):
        return body.encode("utf-8")  # as urllib3 sends text
    if isinstance(body, bytes):
        return body
    if hasattr(body, "read"):
        return None
    try:
        return bytes(memoryview(body))
    except TypeError:
        return None


class _ReadTee:
    """A file-like body that remembers each block urllib3 reads from it."""

    def __init__(self, inner: Any, step: OpenStep) -> None:
        self._inner = inner
        self._step = step
        step.on_request_start()

    def read(self, *args: Any) -> Any:
        block = self._inner.read(*args)
        if block:
            self._step.on_request_chunk(block.encode() if isinstance(block, str) else block)
        return block

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _iter_tee(inner: Any, step: OpenStep) -> Iterator[Any]:
    step.on_request_start()
    for chunk in inner:
        if chunk:
            step.on_request_chunk(chunk.encode() if isinstance(chunk, str) else bytes(chunk))
        yield chunk


def _ignored(ignore: IgnoreRules, pool: Any, target: str) -> bool:
    """Whether an ``OTEL_REPLAY_IGNORE`` rule matches the call to ``target`` (a path, or an
    absolute URL as sent to a proxy) on ``pool``."""
    if not target.startswith("/"):
        return ignore.match_url(target) is not None
    port = pool.port or (443 if pool.scheme == "https" else 80)
    return ignore.match(pool.host, port, target.partition("?")[0]) is not None


def _begin(
    recorder: Recorder,
    ignore: IgnoreRules,
    pool: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """The step for this call and the (possibly teed) arguments to make it with."""
    if not should_record():
        return None, args, kwargs
    try:
        names = ("conn", "method", "url", "body", "headers")
        bound = dict(zip(names, args, strict=False)) | kwargs
        if ignore and _ignored(ignore, pool, bound["url"]):
            return None, args, kwargs
        url = request_url(pool.scheme, pool.host, pool.port, bound["url"])
        body = bound.get("body")
        content = _body(body)
        step = recorder.begin(
            RequestView(bound["method"], url, raw_headers(bound.get("headers")), content)
        )
        if content is None:
            tee = _ReadTee(body, step) if hasattr(body, "read") else _iter_tee(body, step)
            if len(args) > 3:
                args = (*args[:3], tee, *args[4:])
            else:
                kwargs = {**kwargs, "body": tee}
        return step, args, kwargs
    except Exception as exc:
        recorder.warn_once("starting a step", exc)
        return None, args, kwargs


def _wrapper(recorder: Recorder, ignore: IgnoreRules) -> Callable[..., Any]:
    def wrapper(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        step, args, kwargs = _begin(recorder, ignore, instance, args, kwargs)
        if step is None:
            return wrapped(*args, **kwargs)
        with exchange(step):
            response = wrapped(*args, **kwargs)
        _adopt(recorder, step, response, kwargs.get("decode_content", True))
        return response

    return wrapper


def _adopt(recorder: Recorder, step: OpenStep, response: Any, decode_content: bool) -> None:
    try:
        headers = raw_headers(response.headers)
        body = getattr(response, "_body", None)
        if body is not None:
            # Read in the constructor (preload_content): decoded already when it was asked to
            # be, so the coding headers no longer describe it.
            if decode_content and any(k.lower() == b"content-encoding" for k, _ in headers):
                headers = [(k, v) for k, v in headers if k.lower() not in _CODING]
            step.on_response(response.status, headers)
            if body:
                step.on_chunk(body if isinstance(body, bytes) else str(body).encode())
            step.finish(complete=True)
            return
        step.on_response(response.status, headers)
        _tee(response, step)
        if response.length_remaining == 0 or _exhausted(response):
            step.finish(complete=True)
        else:
            recorder.open_steps.track(response, step)
    except Exception as exc:
        recorder.warn_once("teeing a response", exc)
        step.finish(complete=False)


def _exhausted(response: Any) -> bool:
    fp = response._fp
    if fp is None:
        return True
    closed = getattr(fp, "isclosed", None)
    return bool(closed()) if closed is not None else bool(getattr(fp, "closed", False))


def _tee(response: Any, step: OpenStep) -> None:
    """Put the tees on ``response``'s raw sources, as attributes of the object itself."""
    cls = type(response)
    ref = weakref.ref(response)
    # urllib3 closes the response just before it raises on a bad or missing chunk-size line
    # (a stream cut off): that close must not end the step before the error does.
    in_chunk_line = False

    def raw_read(*args: Any, **kwargs: Any) -> Any:
        this = ref()
        try:
            data = cls._raw_read(this, *args, **kwargs)
        except BaseException as exc:
            step.fail(exc)
            raise
        if data:
            step.on_chunk(data)
        if this is not None and (_exhausted(this) or this.length_remaining == 0):
            step.finish(complete=True)
        return data

    def handle_chunk(*args: Any, **kwargs: Any) -> Any:
        try:
            data = cls._handle_chunk(ref(), *args, **kwargs)
        except BaseException as exc:
            step.fail(exc)
            raise
        if data:
            step.on_chunk(data)
        return data

    def update_chunk_length(*args: Any, **kwargs: Any) -> Any:
        nonlocal in_chunk_line
        this = ref()
        in_chunk_line = True
        try:
            result = cls._update_chunk_length(this, *args, **kwargs)
        except BaseException as exc:
            step.fail(exc)
            raise
        finally:
            in_chunk_line = False
        if this is not None and this.chunk_left == 0:  # the last chunk: the body is whole
            step.finish(complete=True)
        return result

    def close(*args: Any, **kwargs: Any) -> Any:
        try:
            return cls.close(ref(), *args, **kwargs)
        finally:
            if not in_chunk_line:
                step.finish(complete=False)  # a no-op once the body was read whole

    response._raw_read = raw_read
    response._handle_chunk = handle_chunk
    response._update_chunk_length = update_chunk_length
    response.close = close
