"""Injected faults (``--inject N=FAULT``): what step N answers in place of its recording, once.

The first request step N answers gets the fault instead (once in the whole program: the
matcher's account says whether it fired, :meth:`Matcher.divert`), and the step counts as not
served: the program's retry matches step N by content, as any request does, and gets its
recorded answer. Both attempts are requests of the replay (the first one's ``forked`` is
``inject FAULT``: :attr:`ServedStep.injected`) and steps of the fork's recording. A program
that does not retry leaves step N unused, which the replay reports.

A transport fault travels to the replay transports as an :class:`Answer` whose
``error_type`` is one of the markers below; each transport raises its library's own
exception for it (:func:`injected_error`), so the application and its SDK meet what a real
timeout, disconnection or cut stream raises there. An HTTP fault is a response like any
other; a tool fault is the tool's call raising :class:`~otel_replay.errors.InjectedToolError`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from otel_replay._canonical import canonical_json
from otel_replay.envelope import INJECTED_ERROR, Served
from otel_replay.replay._fork import Fault
from otel_replay.replay._model import RecordedStep

if TYPE_CHECKING:
    from otel_replay.replay._session import Answer

__all__ = ["injected_answer", "injected_error", "injected_served"]

_PREFIX = "otel_replay.injected."
_TIMEOUT = _PREFIX + "timeout"
_DISCONNECT = _PREFIX + "disconnect"
_STREAM_CUT = _PREFIX + "stream-cut"

# The class each library raises for the real thing, and the message it says it with.
_CLASSES: dict[str, dict[str, str]] = {
    "httpx": {
        _TIMEOUT: "ReadTimeout",
        _DISCONNECT: "RemoteProtocolError",
        _STREAM_CUT: "RemoteProtocolError",
    },
    "aiohttp": {
        _TIMEOUT: "ServerTimeoutError",
        _DISCONNECT: "ServerDisconnectedError",
        _STREAM_CUT: "ClientPayloadError",
    },
    "urllib3": {
        _TIMEOUT: "ReadTimeoutError",
        _DISCONNECT: "ProtocolError",
        _STREAM_CUT: "ProtocolError",
    },
}
_MESSAGES = {
    _TIMEOUT: "The read operation timed out",
    _DISCONNECT: "Server disconnected without sending a response.",
    _STREAM_CUT: "peer closed connection without sending complete message body",
}

# Error bodies as the providers send them, by the ``type`` they give a status.
_PROVIDER_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def injected_error(error_type: str | None, library: str) -> tuple[str, str] | None:
    """For an injected transport fault's ``error_type``, the name of the exception class
    ``library`` (``httpx``, ``aiohttp``, ``urllib3``) raises for the real thing, and its
    message; None for any other ``error_type``."""
    if error_type is None or not error_type.startswith(_PREFIX):
        return None
    message = f"{_MESSAGES[error_type]} (injected by otel-replay)"
    return _CLASSES[library][error_type], message


def injected_answer(fault: Fault, step: RecordedStep, recorded: Answer) -> Answer:
    """What a request answered by ``step`` gets under ``fault`` (``recorded``: the answer it
    would have had)."""
    if fault.kind == "http":
        status = fault.status or 500
        body = fault.body if fault.body is not None else _provider_error(step, status)
        headers = (("content-type", _content_type(body)),) if body else ()
        return replace(
            recorded,
            status_code=status,
            headers=headers,
            chunks=(body,),
            times=(0,),
            error_type=None,
            awaits=(),
            complete=True,
        )
    if fault.kind == "stream-cut":
        left = fault.cut_at or 0
        chunks: list[bytes] = []
        times: list[int] = []
        for chunk, due in zip(recorded.chunks, recorded.times, strict=True):
            if left <= 0:
                break
            chunks.append(chunk[:left])
            times.append(due)
            left -= len(chunk)
        return replace(
            recorded,
            chunks=tuple(chunks),
            times=tuple(times),
            error_type=_STREAM_CUT,
            awaits=(),
            complete=False,
        )
    marker = _TIMEOUT if fault.kind == "timeout" else _DISCONNECT
    return replace(
        recorded,
        status_code=None,
        headers=(),
        chunks=(),
        times=(),
        error_type=marker,
        awaits=(),
        complete=False,
    )


def injected_served(fault: Fault, step: RecordedStep, served: Served) -> Served:
    """What a tool call answered by ``step`` gets under a ``tool-error`` fault: the call
    raises :class:`~otel_replay.errors.InjectedToolError` with the fault's message."""
    message = fault.message or f"injected by otel-replay at step {step.index}"
    body = canonical_json({"type": INJECTED_ERROR, "message": message})
    return replace(served, body=body, error_type=INJECTED_ERROR, shape=None)


def _provider_error(step: RecordedStep, status: int) -> bytes:
    """The error body the step's provider sends with ``status`` (a model step; nothing for
    another HTTP step)."""
    if step.kind != "llm":
        return b""
    kind = _PROVIDER_TYPES.get(status, "api_error")
    message = f"HTTP {status} injected by otel-replay at step {step.index}"
    if step.endpoint.startswith("anthropic."):
        return canonical_json({"type": "error", "error": {"type": kind, "message": message}})
    error = {"message": message, "type": kind, "param": None, "code": None}
    return canonical_json({"error": error})


def _content_type(body: bytes) -> str:
    return "application/json" if body.lstrip()[:1] in (b"{", b"[") else "text/plain"
