"""The capture seams of the HTTP libraries: httpx and httpx2, urllib3 (requests, botocore)
and aiohttp, all handing exchanges to one :class:`~otel_replay.capture._recorder.Recorder`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from otel_replay._ignore import IgnoreRules
from otel_replay.capture.transports import _aiohttp, _urllib3
from otel_replay.capture.transports._aiohttp import (
    REPLAY,
    Middleware,
    closed_by_application,
    wrap_request,
)
from otel_replay.capture.transports._urllib3 import request_url, urllib3_2
from otel_replay.capture.transports._view import raw_headers, wrap_on_import

if TYPE_CHECKING:
    from otel_replay.capture._recorder import Recorder

__all__ = [
    "REPLAY",
    "Middleware",
    "closed_by_application",
    "instrument",
    "raw_headers",
    "request_url",
    "urllib3_2",
    "wrap_on_import",
    "wrap_request",
]


def instrument(recorder: Recorder, ignore: IgnoreRules) -> Callable[[], None]:
    """Wrap the seams of whichever of urllib3 and aiohttp are installed, each once it is
    imported (calls ``ignore`` matches are not recorded); the undo function."""
    seams = (_urllib3.instrument(recorder, ignore), _aiohttp.instrument(recorder, ignore))
    undos = [undo for undo in seams if undo]

    def undo_all() -> None:
        for undo in reversed(undos):
            undo()
        undos.clear()

    return undo_all
