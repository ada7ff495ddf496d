"""Threads continue the ``run()`` block that started them: a ``threading.Thread`` started, or
a task handed to a ``ThreadPoolExecutor`` (``loop.run_in_executor`` included), inside a block
records into the block's run, under the span current where it was started.

A new thread starts with an empty context, where the block's run (a contextvar) and its span
are not current: its steps would otherwise go to the process run. Only the two are carried,
and only from inside a block; the application's own contextvars stay as Python leaves them.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from concurrent.futures import thread as futures_thread
from functools import partial
from typing import Any, TypeVar

import wrapt
from opentelemetry import context as otel_context
from opentelemetry.context import Context
from opentelemetry.instrumentation.utils import unwrap

from otel_replay.runs._run import BLOCK_RUN, RunState

__all__ = ["carry_into_threads", "stop_carrying"]

T = TypeVar("T")

_carrying = False


def carry_into_threads() -> None:
    """From now on, threads and thread-pool tasks started inside a ``run()`` block belong
    to its run (once; again after :func:`stop_carrying`)."""
    global _carrying  # noqa: PLW0603 - the classes are wrapped once
    if _carrying:
        return
    _carrying = True
    wrapt.wrap_function_wrapper(threading, "Thread.start", _start)
    wrapt.wrap_function_wrapper(futures_thread, "ThreadPoolExecutor.submit", _submit)


def stop_carrying() -> None:
    """Stop carrying runs into threads (the instrumentor goes)."""
    global _carrying  # noqa: PLW0603 - the classes are wrapped once
    if not _carrying:
        return
    _carrying = False
    unwrap(threading.Thread, "start")
    unwrap(futures_thread.ThreadPoolExecutor, "submit")


def _carried() -> tuple[RunState, Context] | None:
    """The calling context's ``run()`` block and OpenTelemetry context (None: in no block)."""
    state = BLOCK_RUN.get()
    return None if state is None else (state, otel_context.get_current())


def _within(
    carried: tuple[RunState, Context], call: Callable[..., T], *args: Any, **kwargs: Any
) -> T:
    """``call(*args, **kwargs)`` in the run and OpenTelemetry context ``carried`` from
    another thread."""
    state, context = carried
    run_token = BLOCK_RUN.set(state)
    context_token = otel_context.attach(context)
    try:
        return call(*args, **kwargs)
    finally:
        otel_context.detach(context_token)
        BLOCK_RUN.reset(run_token)


def _start(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    carried = _carried()
    own = getattr(instance, "__dict__", {})
    if carried is None or not isinstance(instance, threading.Thread) or "run" in own:
        return wrapped(*args, **kwargs)  # "run" in own: started already, or the app's own
    # On the instance, so a subclass's own run() is carried too; gone once it returns, so
    # the thread holds no cycle through it.
    own["run"] = partial(_run_thread, carried, instance, instance.run)
    try:
        return wrapped(*args, **kwargs)
    except BaseException:
        own.pop("run", None)  # no thread started
        raise


def _run_thread(
    carried: tuple[RunState, Context], thread: threading.Thread, run: Callable[[], None]
) -> None:
    try:
        _within(carried, run)
    finally:
        thread.__dict__.pop("run", None)


def _submit(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    carried = _carried()
    if carried is None or not args or _interpreters(instance):
        return wrapped(*args, **kwargs)
    fn, *rest = args
    # The pool's worker threads outlive the block: the ones this submit starts must not
    # carry the run, only the task does.
    token = BLOCK_RUN.set(None)
    try:
        return wrapped(partial(_within, carried, fn), *rest, **kwargs)
    finally:
        BLOCK_RUN.reset(token)


def _interpreters(pool: object) -> bool:
    """An ``InterpreterPoolExecutor`` (Python 3.14): its tasks run in other interpreters,
    which take only what pickles, and record on their own."""
    module = sys.modules.get("concurrent.futures.interpreter")
    kind = getattr(module, "InterpreterPoolExecutor", None)
    return kind is not None and isinstance(pool, kind)
