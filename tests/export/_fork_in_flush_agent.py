"""Forks a multiprocessing worker while the ``replay`` exporter's writer thread is inside the
store's index transaction, for the worker tests.

    python tests/export/_fork_in_flush_agent.py [stuck]

The parent records a step, and its writer holds that flush's index transaction open a moment
(SQLite's write lock taken): the parent forks a worker right then, which records three steps
and ends. On a busy machine a fork lands there by chance; here it always does. ``stuck``: the
worker's own writer never comes back from the index. It prints the worker's exit code.
"""

from __future__ import annotations

import multiprocessing
import sys
import threading
import time
from typing import Any

import otel_replay
from otel_replay.store import _rows

HOLD_S = 0.5
"""How long the parent's first flush holds its index transaction open."""

_inside = threading.Event()
_add_steps = _rows.add_steps


def _add_steps_slowly(*args: Any, **kwargs: Any) -> Any:
    # Runs on the writer thread, inside the flush's index transaction.
    if not _inside.is_set():
        _inside.set()
        time.sleep(HOLD_S)
    return _add_steps(*args, **kwargs)


def _never(*args: Any, **kwargs: Any) -> Any:
    time.sleep(3600)


def work() -> None:
    if sys.argv[1:] == ["stuck"]:
        _rows.add_steps = _never
    for n in range(3):
        otel_replay.side_effect("in_worker", int, n)


def main() -> None:
    _rows.add_steps = _add_steps_slowly
    otel_replay.side_effect("in_parent", int, 1)
    assert _inside.wait(30), "the writer did not flush the parent's step"
    worker = multiprocessing.get_context("fork").Process(target=work)
    worker.start()
    worker.join()
    print(f"worker: {worker.exitcode}", flush=True)


if __name__ == "__main__":
    main()
