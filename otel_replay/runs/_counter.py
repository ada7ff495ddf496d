"""A run's step counter, which the worker processes that continue the run share.

``replay.step.index`` is taken from the run's counter when a step starts. A counter is the
process's own until the process forks or starts a worker (``_family``): it is then *shared*,
moved into cells that the workers see too (``_shared``), so that every step of the run gets an
index of its own whichever process makes it. Steps made at once in several processes are
numbered in the order they reach the counter, as concurrent threads' are: the index orders a
report, replay matches concurrent requests by content.
"""

from __future__ import annotations

import os
import threading
import weakref

from otel_replay._shared import SharedCells

__all__ = ["StepCounter", "allocate_cell", "live_counters"]

ARENA_CELLS = 512
"""Counters shared per block of cells (one file descriptor each)."""


class _Arena:
    """Hands out cells for counters being shared, a block at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._block: SharedCells | None = None
        self._used = 0

    def allocate(self) -> tuple[SharedCells, int]:
        with self._lock:
            if self._block is None or self._used == ARENA_CELLS:
                self._block, self._used = SharedCells(ARENA_CELLS), 0
            self._used += 1
            return self._block, self._used - 1


_ARENA = _Arena()
_LIVE: weakref.WeakSet[StepCounter] = weakref.WeakSet()


class StepCounter:
    """The step counter of run ``run_id``; thread-safe, and process-safe once shared.

    ``inherited`` is True in a process that continues a run another process began (a worker
    forked or started while it was live): that process ends the run, this one never does.
    """

    __slots__ = ("__weakref__", "_cell", "_cells", "_lock", "_next", "inherited", "run_id")

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.inherited = False
        self._lock = threading.Lock()
        self._next = 0
        self._cells: SharedCells | None = None
        self._cell = 0
        _LIVE.add(self)

    def next(self) -> int:
        """The next step index."""
        with self._lock:
            cells = self._cells
            if cells is None:
                value = self._next
                self._next = value + 1
                return value
        return cells.add(self._cell)

    def peek(self) -> int:
        """The index the next step will get (another process may take it first)."""
        with self._lock:
            cells = self._cells
            if cells is None:
                return self._next
        return cells.get(self._cell)

    def share(self) -> tuple[SharedCells, int]:
        """Move the counter into shared cells (once): the cells and the cell it is in."""
        with self._lock:
            if self._cells is None:
                cells, cell = _ARENA.allocate()
                with cells.locked():
                    cells.set(cell, self._next)
                self._cells, self._cell = cells, cell
            return self._cells, self._cell

    def adopt(self, cells: SharedCells, cell: int) -> None:
        """Count in ``cells[cell]``, another process's counter of this run (a worker's)."""
        with self._lock:
            self._cells, self._cell = cells, cell

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        self.inherited = True


def allocate_cell() -> tuple[SharedCells, int]:
    """A cell of its own (0 at first) that the processes forked from now on share (and, by
    its cells' handle, those started fresh)."""
    return _ARENA.allocate()


def live_counters() -> list[StepCounter]:
    """Every counter of a run still referenced in this process."""
    return list(_LIVE)


def _after_fork_in_child() -> None:
    global _ARENA  # noqa: PLW0603 - the child's counters are shared from cells of its own
    # Cells handed out later by the parent's arena and by the child's must never be the
    # same cell: the child allocates from blocks of its own.
    _ARENA = _Arena()
    for counter in live_counters():
        counter._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
