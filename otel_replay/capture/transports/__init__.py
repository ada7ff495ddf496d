"""Capture for the HTTP libraries beside httpx: urllib3 (and through it requests and
botocore) and aiohttp.

Each library has one seam, wrapped at class level so clients made before instrumentation are
covered: urllib3's ``HTTPConnectionPool._make_request`` (one attempt on the wire, below
urllib3's retries and redirects) and aiohttp's ``ClientSession._request``, which puts a client
middleware of ours innermost in the chain, so it sees each hop's final request. Both hand the
exchange to the same :class:`~otel_replay.capture._recorder.Recorder` as httpx, so redaction,
hashing, codecs, spans and the hand-off are shared, and so are the ``OTEL_REPLAY_IGNORE``
rules (calls they match are not recorded).
"""

from __future__ import annotations

from collections.abc import Callable

from otel_replay._ignore import IgnoreRules
from otel_replay.capture._recorder import Recorder
from otel_replay.capture.transports._aiohttp import (
    REPLAY,
    Middleware,
    closed_by_application,
    wrap_request,
)
from otel_replay.capture.transports._urllib3 import request_url
from otel_replay.capture.transports._view import raw_headers

__all__ = [
    "REPLAY",
    "Middleware",
    "closed_by_application",
    "instrument",
    "raw_headers",
    "request_url",
    "wrap_request",
]


def instrument(recorder: Recorder, ignore: IgnoreRules) -> Callable[[], None]:
    """Wrap the seams of whichever of urllib3 and aiohttp are installed (calls ``ignore``
    matches are not recorded); the undo function."""
    from otel_replay.capture.transports import _aiohttp, _urllib3  # noqa: PLC0415 - optional

    seams = (_urllib3.instrument(recorder, ignore), _aiohttp.instrument(recorder, ignore))
    undos = [undo for undo in seams if undo]

    def undo_all() -> None:
        for undo in reversed(undos):
            undo()
        undos.clear()

    return undo_all
