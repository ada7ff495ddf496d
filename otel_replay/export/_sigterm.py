"""SIGTERM: write what the replay exporters hold, then do what the signal would have done.

Python's default for SIGTERM is to die on the spot: no ``atexit``, so no SDK shutdown, and
whatever the exporter has not written yet would be lost. The first exporter built in the main
thread installs :func:`_on_sigterm`, which asks every live exporter to write everything it
holds (bounded by ``OTEL_REPLAY_FLUSH_TIMEOUT_MS``) and then chains: a Python handler installed
before ours is called; ``SIG_IGN`` is honoured; the default disposition is restored and the
signal re-raised, so the process still dies of SIGTERM with the same exit status. An
application that installs its own handler later replaces ours; its handler then decides, and a
clean exit goes through ``atexit`` and the SDK's shutdown, which writes everything too.

The handler takes no lock the interrupted thread could hold: it posts to the writer's queue
(a ``SimpleQueue``) and waits on an event of its own.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import weakref
from types import FrameType
from typing import Any, Protocol

__all__ = ["install", "uninstall"]

_log = logging.getLogger("otel_replay.export")


class _Flushable(Protocol):
    def _flush_on_signal(self) -> None: ...


_exporters: weakref.WeakSet[Any] = weakref.WeakSet()
_previous: Any = None
_installed = False


def install(exporter: _Flushable) -> bool:
    """Flush ``exporter`` on SIGTERM (installing the handler once); False when signals cannot
    be handled here (not the main thread, or no SIGTERM on this platform)."""
    global _previous, _installed  # noqa: PLW0603 - one handler per process
    if not hasattr(signal, "SIGTERM") or threading.current_thread() is not threading.main_thread():
        _log.debug("otel-replay: not in the main thread; no SIGTERM handler installed")
        return False
    if not _installed:
        try:
            _previous = signal.getsignal(signal.SIGTERM)
            signal.signal(signal.SIGTERM, _on_sigterm)
        except (ValueError, OSError) as exc:
            _log.debug("otel-replay: cannot handle SIGTERM here: %s", exc)
            return False
        _installed = True
    _exporters.add(exporter)
    return True


def uninstall(exporter: _Flushable) -> None:
    """Stop flushing ``exporter``; with none left, put the previous handler back (if ours is
    still the installed one and this is the main thread)."""
    global _installed  # noqa: PLW0603
    _exporters.discard(exporter)
    if _exporters or not _installed:
        return
    if threading.current_thread() is not threading.main_thread():
        return  # harmless: with no exporter left our handler only chains
    try:
        if signal.getsignal(signal.SIGTERM) is _on_sigterm:
            signal.signal(signal.SIGTERM, _previous if _previous is not None else signal.SIG_DFL)
    except (ValueError, OSError):
        return
    _installed = False


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    for exporter in list(_exporters):
        try:
            exporter._flush_on_signal()
        except Exception as exc:  # never let ours stand in the way of the signal
            _log.debug("otel-replay: flushing on SIGTERM failed: %r", exc)
    previous = _previous
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
