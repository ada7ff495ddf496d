"""Response-stream tees: pass every chunk to the application unchanged, and remember it.

The tee replaces ``response.stream`` and subclasses the client library's own stream base
classes, because httpx and httpx2 check them with ``isinstance``. It yields each chunk as soon
as the transport produced it (no read-ahead), so streaming behaviour is untouched. The step is
finished exactly once: on exhaustion (complete), on ``close()`` before exhaustion
(incomplete), or on an exception from the transport (failed, then re-raised unchanged).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from otel_replay.capture._step import Step

__all__ = ["tee_classes"]


class _SyncTeeMixin:
    def __init__(self, inner: Any, step: Step) -> None:
        self._inner = inner
        self._step = step

    def __iter__(self) -> Iterator[bytes]:
        step = self._step
        try:
            for chunk in self._inner:
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


class _AsyncTeeMixin:
    def __init__(self, inner: Any, step: Step) -> None:
        self._inner = inner
        self._step = step

    async def __aiter__(self) -> AsyncIterator[bytes]:
        step = self._step
        try:
            async for chunk in self._inner:
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


@cache
def tee_classes(module: ModuleType) -> tuple[type[Any], type[Any]]:
    """The (sync, async) tee classes for ``module`` (``httpx`` or ``httpx2``)."""
    sync = type("SyncTeeStream", (_SyncTeeMixin, module.SyncByteStream), {})
    async_ = type("AsyncTeeStream", (_AsyncTeeMixin, module.AsyncByteStream), {})
    return sync, async_
