"""Replay for urllib3 (and requests and botocore above it): recorded answers from the
connection, before it ever connects."""

from __future__ import annotations

import http
import http.client
import io
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import wrapt
from opentelemetry import context
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY
from opentelemetry.instrumentation.utils import unwrap

from otel_replay.capture.transports import raw_headers, request_url, urllib3_2, wrap_on_import
from otel_replay.envelope import module_class
from otel_replay.errors import UnmatchedConnectionError, UnmatchedRequestError
from otel_replay.replay._faults import injected_error
from otel_replay.replay._session import Answer, ReplaySession, interruption

__all__ = ["install"]

_ANSWER = "_otel_replay_answer"
_LIVE = "_otel_replay_live"  # the order of a request sent live, until its response


def install(session: ReplaySession) -> Callable[[], None] | None:
    """Serve urllib3 2.x connections from ``session``, once urllib3 is imported; the undo
    function, or None without urllib3."""

    def wrap(urllib3: ModuleType) -> Callable[[], None] | None:
        if not urllib3_2(urllib3):
            return None
        conn = urllib3.connection.HTTPConnection
        pool = urllib3.connectionpool.HTTPSConnectionPool
        wrapt.wrap_function_wrapper(conn, "request", _request(session))
        wrapt.wrap_function_wrapper(conn, "getresponse", _getresponse(session))
        for name in ("_validate_conn", "_prepare_proxy"):
            wrapt.wrap_function_wrapper(pool, name, _skip_connecting(session))

        def undo() -> None:
            unwrap(conn, "request")
            unwrap(conn, "getresponse")
            for name in ("_validate_conn", "_prepare_proxy"):
                unwrap(pool, name)

        return undo

    return wrap_on_import("urllib3", wrap)


def _skip_connecting(session: ReplaySession) -> Callable[..., Any]:
    """Connecting before the request is sent: not while a replay answers requests (only an
    OpenTelemetry export in a replay that is not strict goes out as it would)."""

    def skip(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        if not session.strict and context.get_value(_SUPPRESS_INSTRUMENTATION_KEY):
            return wrapped(*args, **kwargs)
        return None

    return skip


def _target(conn: Any, url: str) -> str:
    host = getattr(conn, "_tunnel_host", None) or conn.host
    port = getattr(conn, "_tunnel_port", None) if getattr(conn, "_tunnel_host", None) else conn.port
    scheme = "https" if conn.default_port == 443 else "http"
    return request_url(scheme, host, port, url)


def _body_bytes(body: Any, method: str, blocksize: int) -> tuple[bytes, bool]:
    """The bytes urllib3 would send for ``body`` and whether it would stream them (chunked)."""
    from urllib3.util.request import body_to_chunks  # noqa: PLC0415

    made = body_to_chunks(body, method=method, blocksize=blocksize)
    if made.chunks is None:
        return b"", False
    data = b"".join(c.encode("utf-8") if isinstance(c, str) else bytes(c) for c in made.chunks)
    return data, made.content_length is None


def _request(session: ReplaySession) -> Callable[..., Any]:
    def request(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        names = ("method", "url", "body", "headers")
        call = dict(zip(names, args, strict=False)) | kwargs
        method, url = call["method"], call["url"]
        target = _target(instance, url)
        if context.get_value(_SUPPRESS_INSTRUMENTATION_KEY):  # an OpenTelemetry export
            answer = session.answer(method, target, b"", telemetry=True)
            if answer is None:
                return wrapped(*args, **kwargs)
            setattr(instance, _ANSWER, (answer, method, call))
            return None
        body, streamed = _body_bytes(call.get("body"), method, instance.blocksize)
        try:
            answer = session.answer(method, target, body, None, raw_headers(call.get("headers")))
        except UnmatchedRequestError as exc:
            raise UnmatchedConnectionError(str(exc)) from None
        if answer is None:  # not strict, or past a fork's live point: live, the body as read
            call["body"] = iter((body,)) if streamed else body
            live = session.sent_live()
            try:
                sent = wrapped(**call)
            except Exception as exc:
                session.live_ended(live, None, exc)
                raise
            if live is not None:  # its response tells how it ended
                setattr(instance, _LIVE, live)
            return sent
        if answer.status_code is None:
            raise _transport_error(answer, instance, target)
        setattr(instance, _ANSWER, (answer, method, call))
        return None

    return request


def _getresponse(session: ReplaySession) -> Callable[..., Any]:
    def getresponse(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        served = instance.__dict__.pop(_ANSWER, None)
        if served is None:
            live = instance.__dict__.pop(_LIVE, None)
            if live is None:
                return wrapped(*args, **kwargs)
            try:
                response = wrapped(*args, **kwargs)
            except Exception as exc:
                session.live_ended(live, None, exc)
                raise
            session.live_ended(live, response.status)
            return response
        answer, method, call = served
        return _response(answer, method, call)

    return getresponse


def _transport_error(answer: Answer, conn: Any, url: str) -> BaseException:
    """The error a step recorded before any response, as urllib3 raised it (an interruption
    as itself)."""
    from urllib3 import exceptions  # noqa: PLC0415

    interrupted = interruption(answer.error_type)
    if interrupted is not None:
        return interrupted

    name = (answer.error_type or "").rsplit(".", 1)[-1]
    message = f"replayed {answer.error_type or 'transport error'} (as recorded)"
    injected = injected_error(answer.error_type, "urllib3")
    if injected is not None:
        name, message = injected
        if name == "ProtocolError":  # the server closed the connection: no response
            return exceptions.ProtocolError(
                "Connection aborted.", http.client.RemoteDisconnected(message)
            )
    if cls := module_class(exceptions, name, exceptions.NewConnectionError):
        return cls(conn, message)  # type: ignore[no-any-return]
    if cls := module_class(exceptions, name, exceptions.ReadTimeoutError):
        return cls(None, url, message)  # type: ignore[no-any-return]
    return exceptions.ProtocolError(message)


def _wire(answer: Answer) -> tuple[list[bytes], list[int]]:
    """The response as HTTP/1.1 bytes, in segments with the time each is due."""
    status = answer.status_code or 0
    phrase = _phrase(status)
    chunked = len(answer.chunks) > 1 or answer.error_type is not None
    head = [f"HTTP/1.1 {status} {phrase}"]
    head += [f"{name}: {value}" for name, value in answer.headers]
    if chunked:
        head.append("Transfer-Encoding: chunked")
    else:
        head.append(f"Content-Length: {sum(len(c) for c in answer.chunks)}")
    segments = [("\r\n".join(head) + "\r\n\r\n").encode("latin-1", errors="replace")]
    times = [0]
    for chunk, due in zip(answer.chunks, answer.times, strict=True):
        if chunk:
            segments.append(b"%x\r\n%b\r\n" % (len(chunk), chunk) if chunked else chunk)
            times.append(due)
    if chunked and answer.error_type is None:
        segments.append(b"0\r\n\r\n")  # a stream recorded cut short stops without its end
        times.append(times[-1])
    return segments, times


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""


class _Wire(io.RawIOBase):
    """The recorded response's bytes, a segment at most per read, each when it is due."""

    def __init__(self, segments: list[bytes], times: list[int]) -> None:
        self._segments = segments
        self._times = times
        self._index = 0
        self._offset = 0
        self._started = time.perf_counter()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._index >= len(self._segments):
            return 0
        if self._offset == 0 and self._times[self._index]:
            delay = self._started + self._times[self._index] / 1e9 - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        segment = self._segments[self._index]
        size = min(len(buffer), len(segment) - self._offset)
        buffer[:size] = segment[self._offset : self._offset + size]
        self._offset += size
        if self._offset == len(segment):
            self._index += 1
            self._offset = 0
        return size


class _Socket:
    """What ``http.client.HTTPResponse`` reads a response from."""

    def __init__(self, wire: _Wire) -> None:
        self._wire = wire

    def makefile(self, *args: Any, **kwargs: Any) -> io.BufferedReader:
        return io.BufferedReader(self._wire)


def _response(answer: Answer, method: str, call: dict[str, Any]) -> Any:
    from urllib3 import HTTPHeaderDict, HTTPResponse  # noqa: PLC0415

    wire = _Wire(*_wire(answer))
    original = http.client.HTTPResponse(_Socket(wire), method=method)  # type: ignore[arg-type]
    original.begin()
    return HTTPResponse(
        body=original,
        headers=HTTPHeaderDict(list(original.msg.items())),
        status=original.status,
        version=original.version,
        version_string="HTTP/1.1",
        reason=original.reason,
        preload_content=call.get("preload_content", True),
        decode_content=call.get("decode_content", True),
        original_response=original,
        enforce_content_length=call.get("enforce_content_length", True),
        request_method=method,
        request_url=call["url"],
    )
