"""Replay for the HTTP libraries beside httpx: urllib3 (and through it requests and
botocore) and aiohttp, each answered from the session before it connects anywhere."""

from __future__ import annotations

from collections.abc import Callable

from otel_replay.replay._session import ReplaySession

__all__ = ["install"]


def install(session: ReplaySession) -> Callable[[], None]:
    """Serve urllib3 and aiohttp requests from ``session`` (whichever are installed); the
    undo function."""
    from otel_replay.replay.transports import _aiohttp, _urllib3  # noqa: PLC0415 - optional

    undos = [undo for undo in (_urllib3.install(session), _aiohttp.install(session)) if undo]

    def undo_all() -> None:
        for undo in reversed(undos):
            undo()
        undos.clear()

    return undo_all
