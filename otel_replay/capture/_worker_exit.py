"""Work done in a worker process that multiprocessing forked, written before the worker goes.

A child that ``multiprocessing`` (a ``Pool``, a ``ProcessPoolExecutor``, a ``Process``) forks
leaves through ``os._exit`` once its work is done: no ``atexit`` hook runs, so no tracer
provider shuts down, the process run's root span never ends and whatever the replay
exporter's writer held was lost. What it runs instead, in the child, are multiprocessing's own
finalizers. :func:`at_worker_exit` registers one, from an ``os.register_at_fork`` child hook;
in a child forked some other way it does nothing (such a child leaves as its code says).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["at_worker_exit"]

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
