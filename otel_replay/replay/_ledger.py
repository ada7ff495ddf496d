"""What a replay has served, one account for every process of the replayed program.

A replayed agent that hands work to worker processes has its requests matched in several
processes, each with its own copy of the matcher. So that no recorded step is served twice
across them, and the n-th request to an endpoint is the n-th of the whole program, the
matcher keeps its account here, in cells shared with the workers (``_shared``): a worker forked
by the replaying process sees them at once; a worker multiprocessing starts fresh loads the run
itself and attaches them from its ticket (:meth:`Ledger.ticket`, :meth:`Ledger.attach`).

Per recorded step, how many times it was served; per recorded endpoint, how many requests it
got; when the replay last asked for anything (``time.monotonic_ns``, one clock for every
process); how many requests were numbered. The matcher changes them under :meth:`locked`.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from otel_replay._shared import SharedCells
from otel_replay.replay._model import Run

__all__ = ["Ledger"]


class Ledger:
    """The account of one replay of ``run``; see the module."""

    def __init__(self, run: Run) -> None:
        self._steps = {step.index: slot for slot, step in enumerate(run.steps)}
        endpoints = sorted({step.endpoint for step in run.steps})
        first = len(run.steps)
        self._endpoints = {endpoint: first + n for n, endpoint in enumerate(endpoints)}
        self._asked = first + len(endpoints)
        self._order = self._asked + 1
        layout = [[step.index, step.endpoint, step.request_hash] for step in run.steps]
        self.layout = hashlib.sha256(json.dumps([run.run_id, layout]).encode()).hexdigest()
        """What the cells mean: two replays of one run agree on it."""
        self._cells = SharedCells(self._order + 1)
        self.asked()

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the account alone (other threads and processes wait)."""
        with self._cells.locked():
            yield

    def served(self, index: int) -> int:
        """How many times recorded step ``index`` was served."""
        slot = self._steps.get(index)
        return 0 if slot is None else self._cells.get(slot)

    def serve(self, index: int) -> None:
        """Count one more serving of step ``index`` (under :meth:`locked`)."""
        slot = self._steps.get(index)
        if slot is not None:
            self._cells.set(slot, self._cells.get(slot) + 1)

    def seen(self, endpoint: str) -> int:
        """How many requests to ``endpoint`` came before (0 for an endpoint the recording
        lacks: no recorded step of it to take by position)."""
        cell = self._endpoints.get(endpoint)
        return 0 if cell is None else self._cells.get(cell)

    def see(self, endpoint: str) -> None:
        """Count one more request to ``endpoint`` (under :meth:`locked`)."""
        cell = self._endpoints.get(endpoint)
        if cell is not None:
            self._cells.set(cell, self._cells.get(cell) + 1)

    def asked(self) -> None:
        """Note that the replay asked for something now (under :meth:`locked`, or before
        anyone shares the account)."""
        self._cells.set(self._asked, time.monotonic_ns())

    def last_asked(self) -> float:
        """When the replay last asked for anything, in ``time.monotonic()`` seconds."""
        return self._cells.get(self._asked) / 1e9

    def next_order(self) -> int:
        """The number of the next request of the replay, in the order they came."""
        return self._cells.add(self._order)

    def ticket(self) -> dict[str, Any] | None:
        """What a worker started fresh needs to :meth:`attach` this account (call it while
        multiprocessing pickles the worker's start-up data)."""
        handle = self._cells.handle()
        return None if handle is None else {"cells": handle, "layout": self.layout}

    def attach(self, ticket: Any) -> None:
        """Keep the account the ticket names (the parent's) instead of this one, which must
        not have been used yet. ValueError when the ticket is of a replay of another run."""
        if not isinstance(ticket, dict) or ticket.get("layout") != self.layout:
            raise ValueError("the replay's account is of another run")
        cells = SharedCells.attach(ticket["cells"])
        if cells.count != self._cells.count:
            raise ValueError("the replay's account is of another run")
        self._cells = cells
