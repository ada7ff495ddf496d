"""Exit work done while the interpreter still runs thread pools: before ``atexit``.

A process that ends (its main thread returns, raises or calls ``sys.exit``) first runs
threading's exit hooks, then joins its non-daemon threads, then runs ``atexit``. Among
threading's hooks, ``concurrent.futures`` shuts its thread pools down: from then on every
``submit`` raises ``cannot schedule new futures after interpreter shutdown``. A remote
store's client needs one to connect (s3fs, through aiobotocore and aiohttp, builds its SSL
context and resolves host names with ``asyncio.to_thread``), and s3fs closes its client from
``atexit`` too (a weakref finalizer, at a point that depends on when the process made its
first one): a write made from ``atexit`` (the tracer provider's shutdown, the exporter's exit
flush) fails, and a short process that never wrote before its end lost every step.

:func:`before_shutdown` callbacks run first, from a threading exit hook registered after
``concurrent.futures``' own (they run in reverse order), highest ``priority`` first, once: the
capture ends what is open and pushes the spans out, the exporters write everything and, when
no other thread may still record (:func:`alone`), close the store. The owners keep their
``atexit`` hooks for what comes later (another thread still running, the application's own
exit hooks): on a local store they work as before, on a remote one as far as its client
still does.
"""

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
