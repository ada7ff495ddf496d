"""The replay transport: serves recorded responses to ``httpx`` or ``httpx2`` clients."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from functools import cache
from types import ModuleType
from typing import Any

from opentelemetry import context
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY

from otel_replay.capture import REQUEST_HASH_EXTENSION
from otel_replay.envelope import module_class
from otel_replay.replay._faults import injected_error
from otel_replay.replay._match import Matcher
from otel_replay.replay._session import (
    Answer,
    ReplaySession,
    cancelled_by_program,
    interruption,
)

__all__ = ["transport_classes"]


def _wait(matcher: Matcher, awaited: frozenset[int]) -> None:
    """Block until the replay has asked for the steps ``awaited`` (see ``Matcher.wait``)."""
    if awaited:
        matcher.wait(awaited)


def _error(module: ModuleType, answer: Answer, request: Any) -> BaseException:
    """The transport error a step recorded, as the client library's own exception class (an
    interruption as itself)."""
    interrupted = interruption(answer.error_type)
    if interrupted is not None:
        return interrupted
    name = (answer.error_type or "TransportError").rsplit(".", 1)[-1]
    message = f"replayed {answer.error_type or 'transport error'} (as recorded)"
    injected = injected_error(answer.error_type, "httpx")
    if injected is not None:
        name, message = injected
    cls = module_class(module, name, module.TransportError) or module.TransportError
    return cls(message, request=request)  # type: ignore[no-any-return]


@cache
def transport_classes(module: ModuleType) -> tuple[type[Any], type[Any]]:
    """``(sync, async)`` replay transport classes for ``httpx`` or ``httpx2``.

    Both take ``(session, fallback=None)``; ``fallback`` is the transport a request with no
    recorded match is sent to when the session is not strict.
    """

    class WholeStream(module.SyncByteStream, module.AsyncByteStream):  # type: ignore[misc,name-defined]
        """A body served in one piece at once."""

        def __init__(self, body: bytes) -> None:
            self._body = body

        def __iter__(self) -> Iterator[bytes]:
            # Once, as a network stream: read again (the openai SDK drains a stream after
            # its last event), it has nothing more.
            body, self._body = self._body, b""
            if body:
                yield body

        async def __aiter__(self) -> AsyncIterator[bytes]:
            body, self._body = self._body, b""
            if body:
                yield body

    class ChunkStream(module.SyncByteStream):  # type: ignore[misc,name-defined]
        def __init__(self, answer: Answer, request: Any, started: float, matcher: Matcher) -> None:
            self._answer, self._request, self._started = answer, request, started
            self._matcher = matcher
            self._pieces: Iterator[bytes] | None = None

        def __iter__(self) -> Iterator[bytes]:
            # One pass, as a network stream: iterated again, it goes on where it stopped. A
            # for loop, unlike ``yield from``, leaves the pass open when this iteration is
            # given up.
            if self._pieces is None:
                self._pieces = self._serve()
            for piece in self._pieces:  # noqa: UP028 - yield from would close the pass
                yield piece

        def _serve(self) -> Iterator[bytes]:
            answer = self._answer
            for i, (chunk, due) in enumerate(zip(answer.chunks, answer.times, strict=True)):
                if due:
                    delay = self._started + due / 1e9 - time.perf_counter()
                    if delay > 0:
                        time.sleep(delay)
                if answer.awaits:
                    _wait(self._matcher, answer.awaits[i])
                if not answer.unsent:
                    yield chunk
                elif piece := self._matcher.deliverable(chunk, answer.unsent[i]):
                    yield piece
            if answer.awaits:
                _wait(self._matcher, answer.awaits[-1])
            if answer.error_type is not None:
                raise _error(module, answer, self._request)

    class AsyncChunkStream(module.AsyncByteStream):  # type: ignore[misc,name-defined]
        def __init__(self, answer: Answer, request: Any, started: float, matcher: Matcher) -> None:
            self._answer, self._request, self._started = answer, request, started
            self._matcher = matcher
            self._pieces: AsyncIterator[bytes] | None = None

        async def __aiter__(self) -> AsyncIterator[bytes]:
            if self._pieces is None:  # one pass, as ChunkStream's
                self._pieces = self._serve()
            async for piece in self._pieces:
                yield piece

        async def _serve(self) -> AsyncIterator[bytes]:
            answer = self._answer
            for i, (chunk, due) in enumerate(zip(answer.chunks, answer.times, strict=True)):
                if due:
                    delay = self._started + due / 1e9 - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                if answer.awaits:
                    await self._matcher.wait_async(answer.awaits[i])
                if not answer.unsent:
                    yield chunk
                elif piece := self._matcher.deliverable(chunk, answer.unsent[i]):
                    yield piece
            if answer.awaits:
                await self._matcher.wait_async(answer.awaits[-1])
            if answer.error_type is not None:
                if cancelled_by_program(answer.error_type):
                    await asyncio.get_running_loop().create_future()  # until it lets go
                raise _error(module, answer, self._request)

    def _live(fallback: Any, request: Any) -> Any:
        if fallback is None:
            raise module.ConnectError("no recorded match and no live transport", request=request)
        return fallback

    def send_live(session: ReplaySession, fallback: Any, request: Any) -> Any:
        """``request`` sent by the live transport, the session told how it ended."""
        live = session.sent_live()
        try:
            response = _live(fallback, request).handle_request(request)
        except Exception as exc:
            session.live_ended(live, None, exc)
            raise
        session.live_ended(live, response.status_code)
        return response

    async def send_live_async(session: ReplaySession, fallback: Any, request: Any) -> Any:
        """:func:`send_live` for async clients."""
        live = session.sent_live()
        try:
            response = await _live(fallback, request).handle_async_request(request)
        except Exception as exc:
            session.live_ended(live, None, exc)
            raise
        session.live_ended(live, response.status_code)
        return response

    def respond(answer: Answer, request: Any, stream: Any) -> Any:
        if answer.status_code is None:
            raise _error(module, answer, request)
        return module.Response(
            answer.status_code, headers=answer.headers, stream=stream, request=request
        )

    class ReplayTransport(module.BaseTransport):  # type: ignore[misc,name-defined]
        """Answers every request from a replay session (sync clients)."""

        def __init__(self, session: ReplaySession, fallback: Any = None) -> None:
            self.session = session
            self.fallback = fallback

        def handle_request(self, request: Any) -> Any:
            started = time.perf_counter()
            telemetry = bool(context.get_value(_SUPPRESS_INSTRUMENTATION_KEY))
            answer = self.session.answer(
                request.method,
                str(request.url),
                b"" if telemetry else request.read(),
                request.extensions.get(REQUEST_HASH_EXTENSION),
                request.headers.raw,
                telemetry=telemetry,
            )
            if answer is None:
                return send_live(self.session, self.fallback, request)
            whole = answer.whole
            if whole is not None:
                return respond(answer, request, WholeStream(whole))
            return respond(
                answer, request, ChunkStream(answer, request, started, self.session.matcher)
            )

        def close(self) -> None:
            if self.fallback is not None:
                self.fallback.close()

    class AsyncReplayTransport(module.AsyncBaseTransport):  # type: ignore[misc,name-defined]
        """Answers every request from a replay session (async clients)."""

        def __init__(self, session: ReplaySession, fallback: Any = None) -> None:
            self.session = session
            self.fallback = fallback

        async def handle_async_request(self, request: Any) -> Any:
            started = time.perf_counter()
            telemetry = bool(context.get_value(_SUPPRESS_INSTRUMENTATION_KEY))
            answer = self.session.answer(
                request.method,
                str(request.url),
                b"" if telemetry else await request.aread(),
                request.extensions.get(REQUEST_HASH_EXTENSION),
                request.headers.raw,
                telemetry=telemetry,
            )
            if answer is None:
                return await send_live_async(self.session, self.fallback, request)
            whole = answer.whole
            if whole is not None:
                return respond(answer, request, WholeStream(whole))
            return respond(
                answer, request, AsyncChunkStream(answer, request, started, self.session.matcher)
            )

        async def aclose(self) -> None:
            if self.fallback is not None:
                await self.fallback.aclose()

    return ReplayTransport, AsyncReplayTransport
