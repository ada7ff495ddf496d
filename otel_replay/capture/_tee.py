"""Stream tees: pass every chunk on unchanged, and remember it.

Response tees stand between the transport and the application; request tees stand between a
streamed request body (a generator, a multipart upload) and the transport, which is the only
place the exact bytes of such a body ever exist.

The tee replaces ``response.stream`` and subclasses the client library's own stream base
classes, because httpx and httpx2 check them with ``isinstance``. It yields each chunk as soon
as the transport produced it (no read-ahead), so streaming behaviour is untouched. The step is
finished exactly once: on exhaustion (complete), on ``close()`` before exhaustion
(incomplete), or on an exception from the transport (failed, then re-raised unchanged).

A response tee is one pass over its stream, however often it is iterated: iterating it again
goes on where the last iteration stopped, as a network stream does (the openai SDK drains
``response.stream`` once more after the ``[DONE]`` event). A stream that starts over when
iterated again (httpx's ``ByteStream``, an in-memory mock, a replay's recorded chunks) would
otherwise hand the application the body twice and record it twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from otel_replay.capture._step import OpenStep

__all__ = ["request_tee_classes", "tee_classes"]


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
