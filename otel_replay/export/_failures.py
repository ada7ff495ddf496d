"""Failures of the exporter: logged once per kind, never raised into the application."""

from __future__ import annotations

import logging
import threading

__all__ = ["Failures"]

_log = logging.getLogger("otel_replay.export")


class Failures:
    """Logs the first failure of each kind as a warning; later ones of that kind at debug.

    Messages name the store and the error's one-line message (store errors never quote
    bodies or headers), never a body.
    """

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def report(self, kind: str, message: str, *args: object) -> None:
        """Log ``message % args`` for a failure of ``kind``."""
        with self._lock:
            first = kind not in self._seen
            self._seen.add(kind)
        _log.log(logging.WARNING if first else logging.DEBUG, "otel-replay: " + message, *args)

    def recovered(self, kind: str, message: str, *args: object) -> None:
        """Log that failures of ``kind`` stopped (only if one was reported), and re-arm it."""
        with self._lock:
            if kind not in self._seen:
                return
            self._seen.discard(kind)
        _log.warning("otel-replay: " + message, *args)
