"""What a replay has served, one account shared by every process of the replayed program."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
import time
import weakref
from contextlib import AbstractContextManager
from typing import Any

from otel_replay._forks import mend_in_child
from otel_replay._shared import SharedCells
from otel_replay.replay._model import Run

__all__ = ["Ledger"]


class Ledger:
    """The account of one replay of ``run``; see the module.

    While the replaying process is alone (it has not forked nor started a worker) the account
    is a list of its own, under a thread lock: a request costs no system call for it. Before
    the process forks, or when a worker is given its :meth:`ticket`, the account moves into
    shared cells, and stays there.
    """

    def __init__(self, run: Run) -> None:
        self._steps = {recorded.step.index: slot for slot, recorded in enumerate(run.steps)}
        endpoints = sorted({recorded.endpoint for recorded in run.steps})
        first = len(run.steps)
        self._endpoints = {endpoint: first + n for n, endpoint in enumerate(endpoints)}
        self._asked = first + len(endpoints)
        self._order = self._asked + 1
        self._fired = self._order + 1
        self._size = self._fired + len(run.steps)
        self._run = run
        self._own: list[int] | None = [0] * self._size
        self._cells: SharedCells | None = None
        self._guard = threading.Lock()  # the account while it is the process's own
        self._own[self._asked] = time.monotonic_ns()
        _LIVE.add(self)
        mend_in_child(self)

    @functools.cached_property
    def layout(self) -> str:
        """What the cells mean: two replays of one run agree on it (made when a worker needs
        it, not for every replay)."""
        run = self._run
        steps = [
            [recorded.step.index, recorded.endpoint, recorded.step.request_hash or None]
            for recorded in run.steps
        ]
        return hashlib.sha256(json.dumps([run.run_id, steps]).encode()).hexdigest()

    def locked(self) -> AbstractContextManager[Any]:
        """Hold the account alone (other threads and processes wait)."""
        cells = self._cells
        return self._guard if cells is None else cells.locked()

    def _get(self, cell: int) -> int:
        own = self._own
        if own is not None:
            return own[cell]
        assert self._cells is not None
        return self._cells.get(cell)

    def _set(self, cell: int, value: int) -> None:
        own = self._own
        if own is not None:
            own[cell] = value
            return
        assert self._cells is not None
        self._cells.set(cell, value)

    # served, serve and next_order run for every request: the process's own account is read
    # in place, without going through _get and _set.

    def served(self, index: int) -> int:
        """How many times recorded step ``index`` was served."""
        slot = self._steps.get(index)
        if slot is None:
            return 0
        own = self._own
        return own[slot] if own is not None else self._get(slot)

    def serve(self, index: int) -> None:
        """Count one more serving of step ``index`` (under :meth:`locked`)."""
        slot = self._steps.get(index)
        if slot is None:
            return
        own = self._own
        if own is not None:
            own[slot] += 1
        else:
            self._set(slot, self._get(slot) + 1)

    def divert(self, index: int, endpoint: str) -> bool:
        """Whether the fault injected at step ``index`` fires now: the first time it is asked,
        in any process, when it also undoes one serving of the step and one request to
        ``endpoint`` (the request gets the fault instead); False ever after (under
        :meth:`locked`)."""
        slot = self._steps.get(index)
        if slot is None or self._get(self._fired + slot):
            return False
        self._set(self._fired + slot, 1)
        for cell in (slot, self._endpoints.get(endpoint)):
            if cell is not None:
                self._set(cell, max(0, self._get(cell) - 1))
        return True

    def arrive(self, endpoint: str) -> int:
        """Count one more request to ``endpoint`` and note that the replay asked for something
        now (under :meth:`locked`); returns how many requests to it came before (0 for an
        endpoint the recording lacks: no recorded step of it to take by position)."""
        cell = self._endpoints.get(endpoint)
        now = time.monotonic_ns()
        own = self._own
        if own is not None:  # the process's own account: no cells to go through
            own[self._asked] = now
            if cell is None:
                return 0
            before = own[cell]
            own[cell] = before + 1
            return before
        self._set(self._asked, now)
        if cell is None:
            return 0
        before = self._get(cell)
        self._set(cell, before + 1)
        return before

    def last_asked(self) -> float:
        """When the replay last asked for anything, in ``time.monotonic()`` seconds."""
        return self._get(self._asked) / 1e9

    def next_order(self) -> int:
        """The number of the next request of the replay, in the order they came."""
        cells = self._cells
        with self._guard if cells is None else cells.locked():
            own = self._own
            if own is not None:
                value = own[self._order]
                own[self._order] = value + 1
            else:
                value = self._get(self._order)
                self._set(self._order, value + 1)
        return value

    def share(self) -> SharedCells:
        """The shared cells holding the account, made (and filled) the first time."""
        with self._guard:
            if self._cells is None:
                assert self._own is not None
                cells = SharedCells(len(self._own))
                with cells.locked():
                    for cell, value in enumerate(self._own):
                        cells.set(cell, value)
                self._cells, self._own = cells, None
            return self._cells

    def ticket(self) -> dict[str, Any] | None:
        """What a worker started fresh needs to :meth:`attach` this account (call it while
        multiprocessing pickles the worker's start-up data)."""
        handle = self.share().handle()
        return None if handle is None else {"cells": handle, "layout": self.layout}

    def attach(self, ticket: Any) -> None:
        """Keep the account the ticket names (the parent's) instead of this one, which must
        not have been used yet. ValueError when the ticket is of a replay of another run."""
        if not isinstance(ticket, dict) or ticket.get("layout") != self.layout:
            raise ValueError("the replay's account is of another run")
        cells = SharedCells.attach(ticket["cells"])
        if cells.count != self._size:
            raise ValueError("the replay's account is of another run")
        with self._guard:
            self._cells, self._own = cells, None

    def _after_fork_in_child(self) -> None:
        self._guard = threading.Lock()  # a thread of the parent may have held it


_LIVE: weakref.WeakSet[Ledger] = weakref.WeakSet()


def _before_fork() -> None:
    # The child must see the very account the parent goes on with.
    for ledger in list(_LIVE):
        ledger.share()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork)
