"""Answers on a shared event stream to requests a replay never makes.

An MCP client over SSE sends each JSON-RPC request as a POST and reads every answer (and the
progress it reports) on one long ``GET`` stream. A tool step served from the recording makes
none of the requests its body made, yet the recorded stream still holds their answers:
delivered, they reach a session that never sent them (which drops them, or fails on one that
comes as it closes). A replay leaves those events out, and only those: an event is left out
when it answers a JSON-RPC request made within a tool step, came while that step ran, and the
replay served the tool without making the request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from otel_replay._bodies import header, is_sse
from otel_replay.codecs import parse_sse
from otel_replay.replay._model import RecordedStep, Run

__all__ = ["Unsent", "UnsentAnswers", "without_unsent"]

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n")

_Key = tuple[str, Any]  # ("id", request id) or ("token", progress token)


@dataclass(frozen=True, slots=True)
class Unsent:
    """An event, bytes ``start:end`` of its piece, answering the request of step ``within``,
    which tool step ``tool``'s body made."""

    start: int
    end: int
    tool: int
    within: int


@dataclass(frozen=True, slots=True)
class _Request:
    tool: int
    within: int
    since_ns: int  # the request started
    until_ns: int  # its tool step ended


def _message(data: str) -> Mapping[str, Any] | None:
    if not data.startswith("{"):
        return None
    try:
        message = json.loads(data)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than json reads
        return None
    return message if isinstance(message, dict) and message.get("jsonrpc") == "2.0" else None


def _key(kind: str, value: Any) -> Iterator[_Key]:
    """``(kind, value)`` when ``value`` can name a request: a JSON-RPC id or progress token is
    a string or a whole number (anything else, hostile or not, names none)."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        yield (kind, value)


def _request_keys(message: Mapping[str, Any]) -> Iterator[_Key]:
    """What an answer to this request names it by: its id, and its progress token."""
    if "method" not in message:
        return
    yield from _key("id", message.get("id"))
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict):
        yield from _key("token", meta.get("progressToken"))


def _answer_keys(message: Mapping[str, Any]) -> Iterator[_Key]:
    """The request a message answers (a response) or reports on (progress, cancellation)."""
    if "method" not in message:
        yield from _key("id", message.get("id"))
        return
    params = message.get("params")
    if isinstance(params, dict):
        yield from _key("token", params.get("progressToken"))
        yield from _key("id", params.get("requestId"))


def _events(piece: bytes) -> Iterator[tuple[int, int, Mapping[str, Any]]]:
    """(start, end, message) of each JSON-RPC event of a piece made of whole events; nothing
    for a piece that ends within an event."""
    if b'"jsonrpc"' not in piece or not piece.endswith((b"\n\n", b"\r\n\r\n")):
        return
    start = 0
    for end in _EVENT_END.finditer(piece):
        for event in parse_sse(piece[start : end.end()]):
            message = _message(event.data)
            if message is not None:
                yield start, end.end(), message
        start = end.end()


class UnsentAnswers:
    """The events of a run's streamed responses that answer requests made within tool steps."""

    def __init__(self, run: Run) -> None:
        by_index = {recorded.step.index: recorded for recorded in run.steps}
        self._requests: dict[_Key, list[_Request]] = {}
        for recorded in run.steps:
            step = recorded.step
            tool = by_index.get(step.within) if step.within is not None else None
            body = recorded.request_body
            if tool is None or not body or step.start_ns <= 0:
                continue
            message = _message(body.decode("utf-8", "replace"))
            if message is None:
                continue
            request = _Request(tool.step.index, step.index, step.start_ns, tool.step.end_ns)
            for key in _request_keys(message):
                self._requests.setdefault(key, []).append(request)

    def find(
        self, recorded: RecordedStep, pieces: Sequence[bytes], ats: Sequence[int]
    ) -> tuple[tuple[Unsent, ...], ...]:
        """For each piece of ``recorded``'s response (that came ``ats`` ns after its request),
        the events answering a request made within a tool step; () when there are none."""
        content_type = header(recorded.step.response_headers, "content-type")
        if not self._requests or not is_sse(content_type) or recorded.step.start_ns <= 0:
            return ()
        found = tuple(
            tuple(self._in_piece(piece, recorded.step.start_ns + at))
            for piece, at in zip(pieces, ats, strict=True)
        )
        return found if any(found) else ()

    def _in_piece(self, piece: bytes, came_ns: int) -> Iterator[Unsent]:
        for start, end, message in _events(piece):
            for key in _answer_keys(message):
                for request in self._requests.get(key, ()):
                    if request.since_ns <= came_ns <= request.until_ns:
                        yield Unsent(start, end, request.tool, request.within)
                        break


def without_unsent(piece: bytes, unsent: Iterable[Unsent], served: Callable[[int], int]) -> bytes:
    """``piece`` without the events answering requests the replay did not make: their tool
    step was served (``served(index)`` true) and the request never asked."""
    dropped = sorted({(u.start, u.end) for u in unsent if served(u.tool) and not served(u.within)})
    if not dropped:
        return piece
    kept, at = [], 0
    for start, end in dropped:
        kept.append(piece[at:start])
        at = end
    kept.append(piece[at:])
    return b"".join(kept)
