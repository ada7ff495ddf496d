"""Exit work run before ``atexit``, while the interpreter still runs thread pools.

See docs/architecture.md, "Export"."""

from __future__ import annotations

import concurrent.futures.thread
import logging
import threading
import weakref
from collections.abc import Callable

__all__ = ["alone", "before_shutdown"]

_log = logging.getLogger("otel_replay")

_hooks: list[tuple[int, weakref.WeakMethod[Callable[[], object]]]] = []
_lock = threading.Lock()
_registered = False


def before_shutdown(method: Callable[[], object], priority: int) -> None:
    """Have ``method`` (a bound method, held weakly) run when the process exits, before its
    thread pools stop. Where that cannot be arranged (no such hook in this Python, or the
    interpreter is already exiting) it does nothing: the caller's ``atexit`` hook does it."""
    global _registered  # noqa: PLW0603 - one hook per process
    with _lock:
        _hooks.append((priority, weakref.WeakMethod(method)))
        if _registered:
            return
        register = getattr(threading, "_register_atexit", None)
        if register is None:
            return
        try:
            register(_run)
        except RuntimeError:  # the interpreter is exiting already
            return
        _registered = True


def alone() -> bool:
    """True when no thread but the calling one may still record: every other non-daemon
    thread has ended. Daemon threads are abandoned at exit; a thread pool's workers are not
    counted (what they still have to run runs after this, and is written by the ``atexit``
    hooks)."""
    pool_workers = getattr(concurrent.futures.thread, "_threads_queues", {})
    me = threading.current_thread()
    return not any(
        t is not me and not t.daemon and t.is_alive() and t not in pool_workers
        for t in threading.enumerate()
    )


def _run() -> None:
    with _lock:
        hooks = sorted(_hooks, key=lambda hook: -hook[0])
        _hooks.clear()
    for _, ref in hooks:
        method = ref()
        if method is None:
            continue
        try:
            method()
        except Exception as exc:  # the caller's atexit hook tries again
            _log.debug("otel-replay: exit work before shutdown failed: %r", exc)
