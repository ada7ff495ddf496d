"""How the process ends, for the status of its run.

A run is ``error`` when the application failed, not when one of its steps did and the
application went on (a retried rate limit, a price list that could not be fetched offline).
For a ``run()`` block that is the exception leaving the block; for the process run it is what
ends the process: an exception the main thread did not catch, or ``sys.exit`` called there
with a failing status. :func:`watch` notes either, and at exit ends the process run with it
(``RunEnd.error_type``: the exception's qualified name, or ``exit status N``); the process
run's root span ends with it too (:func:`failure`, ``_failed``).

Not seen: ``raise SystemExit(N)`` written out instead of ``sys.exit(N)``, ``os._exit`` and
death by a signal, which runs no exit hook: the run is then not ended and stays
``incomplete`` (the exporter's SIGTERM handler writes what was recorded and ends the open
spans, ``_process_trace.cut_off``, but hands over no end).
"""

from __future__ import annotations

import atexit
import sys
import threading
from types import TracebackType
from typing import Any, NoReturn

from otel_replay.capture._failed import Failure
from otel_replay.capture._run import end_process_run, qualified_name

__all__ = ["end_at_exit", "failure", "unwatch", "watch"]

_failure: Failure | None = None
_previous_hook: Any = None
_real_exit: Any = None


def watch() -> None:
    """Start noting how the process ends (once; again after :func:`unwatch`). Register it
    after the SDK's providers exist, so the end is handed over before they flush."""
    global _previous_hook, _real_exit
    if _real_exit is not None:
        return
    _previous_hook, _real_exit = sys.excepthook, sys.exit
    sys.excepthook = _excepthook
    sys.exit = _exit
    atexit.register(end_at_exit)


def unwatch() -> None:
    """Stop: give back ``sys.excepthook`` and ``sys.exit`` (unless replaced since)."""
    global _previous_hook, _real_exit  # noqa: PLW0603 - one watch per process
    if _real_exit is None:
        return
    if sys.excepthook is _excepthook:
        sys.excepthook = _previous_hook
    if sys.exit is _exit:
        sys.exit = _real_exit
    atexit.unregister(end_at_exit)
    _previous_hook = _real_exit = None


def failure() -> Failure | None:
    """How the application failed, once it has (an uncaught exception, a failing
    ``sys.exit`` on the main thread); None while it has not."""
    return _failure


def exit_failure(status: object) -> str | None:
    """What ``sys.exit(status)`` says of the run: None for success (None or 0), else
    ``exit status N`` (a message exits with status 1, as Python does)."""
    if status is None or status == 0:
        return None
    return f"exit status {status if isinstance(status, int) else 1}"


def _excepthook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    global _failure  # noqa: PLW0603 - what ended the process
    _failure = Failure(qualified_name(value), value)
    _previous_hook(kind, value, tb)


def _exit(status: object = None, /) -> NoReturn:
    global _failure  # noqa: PLW0603 - what ended the process
    if threading.current_thread() is threading.main_thread():
        error_type = exit_failure(status)
        _failure = None if error_type is None else Failure(error_type)
    _real_exit(status)
    raise AssertionError("unreachable")  # pragma: no cover - sys.exit raised


def end_at_exit() -> None:
    """Hand over the process run's end, as the application ended (at exit)."""
    end_process_run(None if _failure is None else _failure.error_type)
