"""Worker processes: the ticket a fresh (spawn, forkserver) worker gets from its parent,
and what a ``Pool`` worker cannot let escape."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

import wrapt

from otel_replay.errors import UnmatchedInPoolError, UnmatchedRequestError

__all__ = [
    "add_part",
    "at_worker_exit",
    "at_worker_start",
    "in_pool_worker",
    "remove_part",
    "unmatched",
]

_log = logging.getLogger("otel_replay")

TICKET_KEY = "otel_replay"
"""The key of the ticket in multiprocessing's start-up data (a dict of parts by name)."""

_parts: dict[str, tuple[Callable[[], Any], Callable[[Any], None]]] = {}
_hooked = False


def add_part(name: str, make: Callable[[], Any], accept: Callable[[Any], None]) -> None:
    """Put part ``name`` on the tickets of the workers started from now on: ``make()`` (in
    the parent, while the start-up data is pickled; None: nothing to hand over) must return
    plain picklable data, which the worker passes to ``accept`` before its code runs. A
    part of the same name is replaced."""
    global _hooked  # noqa: PLW0603 - multiprocessing is hooked once per process
    _parts[name] = (make, accept)
    if not _hooked:
        _hooked = True
        # When multiprocessing.spawn is imported (at once when it already is): importing it
        # here would cost every recorded process what only some use.
        wrapt.register_post_import_hook(_hook, "multiprocessing.spawn")


def remove_part(name: str) -> None:
    """Stop handing part ``name`` over (the stage that added it is going)."""
    _parts.pop(name, None)


class _Ticket:
    """The ticket in a worker's start-up data: it becomes a dict of parts as it is pickled,
    when multiprocessing passes the descriptors a part names along."""

    def __reduce__(self) -> tuple[type[dict[str, Any]], tuple[dict[str, Any]]]:
        payload: dict[str, Any] = {}
        for name, (make, _) in list(_parts.items()):
            try:
                value = make()
            except Exception as exc:  # the worker starts without this part, never fails
                _log.warning("otel-replay: cannot hand %s over to a worker process: %r", name, exc)
                continue
            if value is not None:
                payload[name] = value
        return (dict, (payload,))


def _get_preparation_data(
    wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any
) -> Any:
    data = wrapped(*args, **kwargs)
    if _parts and isinstance(data, dict):
        data[TICKET_KEY] = _Ticket()
    return data


def _prepare(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    data = args[0] if args else kwargs.get("data")
    ticket = data.pop(TICKET_KEY, None) if isinstance(data, dict) else None
    if isinstance(ticket, dict):
        # Before the worker imports its parent's main module, which may record steps itself.
        for name, value in ticket.items():
            part = _parts.get(name)
            if part is None:
                continue
            try:
                part[1](value)
            except Exception as exc:
                _log.warning(
                    "otel-replay: this worker process could not take over %s from the process "
                    "that started it (%r); it records and replays on its own",
                    name,
                    exc,
                )
    return wrapped(*args, **kwargs)


def _hook(module: ModuleType) -> None:
    wrapt.wrap_function_wrapper(module, "get_preparation_data", _get_preparation_data)
    wrapt.wrap_function_wrapper(module, "prepare", _prepare)


def in_pool_worker() -> bool:
    """True when called, at any depth, from a task of a ``multiprocessing.Pool`` worker.

    Such a worker catches ``Exception`` around each task and nothing else: any other
    exception ends the worker and leaves the pool waiting for the task's result forever."""
    pool = sys.modules.get("multiprocessing.pool")
    code = getattr(getattr(pool, "worker", None), "__code__", None)
    if code is None:
        return False
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def unmatched(message: str) -> UnmatchedRequestError:
    """The error strict replay raises for a request it has no recorded step for: an
    :class:`~otel_replay.errors.UnmatchedRequestError`, which SDKs do not catch, except in a
    ``Pool`` task, where it is also an ``Exception`` so that the pool hands it to the caller
    instead of hanging (:func:`in_pool_worker`)."""
    return UnmatchedInPoolError(message) if in_pool_worker() else UnmatchedRequestError(message)


T = TypeVar("T")


def at_worker_exit(owner: T, callback: Callable[[T], object], priority: int) -> None:
    """Have ``callback(owner)`` run when this process, forked by multiprocessing, ends its
    work; the higher ``priority``, the earlier among such callbacks. Call it in the child,
    from an ``os.register_at_fork`` hook. Holds ``owner`` weakly until the worker starts."""
    util: Any = sys.modules.get("multiprocessing.util")
    if util is None:
        return  # no multiprocessing in this process: not its fork
    # A worker starts by clearing the finalizers it inherited, then runs its after-fork
    # callbacks: register there, so ours is one of the worker's own.
    util.register_after_fork(
        owner, lambda alive: util.Finalize(alive, callback, args=(alive,), exitpriority=priority)
    )


_starting: list[Callable[[], None]] = []


class _Owner:
    """What multiprocessing's after-fork registry holds (weakly) for :func:`at_worker_start`."""


_OWNER = _Owner()


def at_worker_start(callback: Callable[[], None]) -> None:
    """Have ``callback()`` run in the main thread of every multiprocessing worker process
    started from now on, whatever the start method, before the worker's target runs."""
    _starting.append(callback)
    if len(_starting) == 1:
        # A worker runs multiprocessing's after-fork callbacks as it starts: those inherited
        # (fork) or registered by its own start-up (spawn, forkserver), as this one is.
        wrapt.register_post_import_hook(_hook_util, "multiprocessing.util")


def _hook_util(module: ModuleType) -> None:
    module.register_after_fork(_OWNER, _worker_starts)


def _worker_starts(_: object) -> None:
    for callback in list(_starting):
        try:
            callback()
        except Exception as exc:  # the worker starts all the same
            _log.debug("otel-replay: preparing a worker process failed: %r", exc)
