"""In-process transports for capture tests: real httpx/httpx2 clients, no sockets."""

from __future__ import annotations

import importlib
import sys
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any, ClassVar

import pytest

MODULES = ["httpx"] + (["httpx2"] if sys.version_info >= (3, 11) else [])


@pytest.fixture(params=MODULES)
def client_module(request: pytest.FixtureRequest) -> ModuleType:
    """httpx, then httpx2 (where the interpreter supports it)."""
    return importlib.import_module(request.param)


class Failure(Exception):
    """Raised by a scripted stream at its failure point."""


def scripted_transport(
    module: ModuleType,
    chunks: list[bytes],
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
    fail_after: int | None = None,
    fail_with: BaseException | None = None,
) -> tuple[Any, Any]:
    """A (sync, async) pair of transports whose response streams yield ``chunks`` one by one,
    raising ``fail_with`` after ``fail_after`` chunks when set. Each records the requests."""
    response_headers = headers or {"content-type": "text/event-stream"}

    class SyncStream(module.SyncByteStream):  # type: ignore[name-defined,misc]
        def __iter__(self) -> Iterator[bytes]:
            for i, chunk in enumerate(chunks):
                if fail_after is not None and i == fail_after:
                    raise fail_with or Failure("mid-stream")
                yield chunk

    class AsyncStream(module.AsyncByteStream):  # type: ignore[name-defined,misc]
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for i, chunk in enumerate(chunks):
                if fail_after is not None and i == fail_after:
                    raise fail_with or Failure("mid-stream")
                yield chunk

    class Sync(module.BaseTransport):  # type: ignore[name-defined,misc]
        requests: ClassVar[list[Any]] = []

        def handle_request(self, request: Any) -> Any:
            request.read()
            self.requests.append(request)
            return module.Response(status, headers=response_headers, stream=SyncStream())

    class Async(module.AsyncBaseTransport):  # type: ignore[name-defined,misc]
        requests: ClassVar[list[Any]] = []

        async def handle_async_request(self, request: Any) -> Any:
            await request.aread()
            self.requests.append(request)
            return module.Response(status, headers=response_headers, stream=AsyncStream())

    return Sync(), Async()
