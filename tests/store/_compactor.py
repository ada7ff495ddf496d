"""A process that compacts stores and kills itself (SIGKILL) at chosen points, for crash
tests of compaction.

    python -m tests.store._compactor

It reads commands from stdin, one a line: ``WHAT STORE KILL_AT``, and runs each in a child
forked for it (everything imported once: a kill costs milliseconds), answering one line:
``writes N`` (the child ran to the end and made N writes), ``killed``, or ``failed`` (a
traceback on stderr). ``WHAT`` is
``record`` (record :data:`RUNS`, a flush per step, and close without merging: a store for
``compact`` and ``gc`` to work on), ``close`` (record the same, then close the store: the
merge a closing store does), ``compact`` or ``gc`` (``Store.gc`` as if two hours later, so
that young files count as old). ``KILL_AT`` is 0 to run to the end; ``k`` kills the child
with SIGKILL right before its ``k``-th write. A write is a file published or deleted, or an
index transaction: between two of them nothing a process can see changes on disk (a
directory's fsync matters to a power cut, not to a kill), so killing before each one reaches
every state a killed compaction can leave.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from otel_replay.step import RunEnd
from otel_replay.store import Store
from otel_replay.store._fs import LocalBackend
from otel_replay.store._gc import GRACE_S
from otel_replay.store._index import Index
from tests.store._data import make_step, span
from tests.store._writer import bodies

STEPS = 3
NOW_NS = time.time_ns()
RUNS = {"kept-a": NOW_NS, "kept-b": NOW_NS, "expired": NOW_NS - 60 * 86_400 * 10**9}
"""Run id -> when its first step started: ``expired`` is past the default retention."""


def record(store: Store) -> None:
    """Record :data:`RUNS` interleaved, a flush per step, and end them."""
    pairs = {run_id: bodies(run_id, STEPS) for run_id in RUNS}
    for index in range(STEPS):
        for run_id, start in RUNS.items():
            request, response = pairs[run_id][index]
            step = make_step(run_id, index, request, response, start_ns=start)
            store.put([step], [span(run_id, index)])
            store.flush()
    for run_id, start in RUNS.items():
        store.end_run(RunEnd(run_id, start + STEPS * 10**9))
    store.flush()


_writes = {"made": 0, "kill_at": 0}


def _counted(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def write(*args: Any, **kwargs: Any) -> Any:
        _writes["made"] += 1
        if _writes["made"] == _writes["kill_at"]:
            os.kill(os.getpid(), signal.SIGKILL)
        return method(*args, **kwargs)

    return write


def _arm(kill_at: int) -> None:
    """Count every write from now on (and die at the ``kill_at``-th)."""
    _writes["kill_at"] = kill_at
    for name in ("publish", "publish_many", "delete", "delete_tree"):
        setattr(LocalBackend, name, _counted(getattr(LocalBackend, name)))
    Index.transaction = _counted(Index.transaction)  # type: ignore[method-assign]


def _run(what: str, where: str, kill_at: int) -> int:
    """Run one command (see the module docstring); the writes made."""
    if what in ("record", "close"):
        store = Store.open(where)
        record(store)
        if what == "record":
            store.close(timeout=0)
            return 0
        _arm(kill_at)
        store.close()
    else:
        with Store.open(where, create=False) as store:
            _arm(kill_at)
            if what == "compact":
                store.compact()
            else:
                store.gc(now=time.time() + 2 * GRACE_S)
            # closing merges nothing: this store wrote nothing
    return _writes["made"]


def main() -> None:
    for line in sys.stdin:
        what, where, kill_at = line.split()
        pid = os.fork()
        if pid == 0:
            try:
                print(f"writes {_run(what, where, int(kill_at))}", flush=True)
                os._exit(0)
            except BaseException:
                traceback.print_exc()
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            print("killed", flush=True)
        elif os.waitstatus_to_exitcode(status):
            print("failed", flush=True)


if __name__ == "__main__":
    main()
