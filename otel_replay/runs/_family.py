"""Worker processes (fork, spawn, forkserver) continue the runs of the process that started
them; threads, the run of the ``run()`` block that started them (``_threads``)."""

from __future__ import annotations

import os
import sys
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanContext, TraceFlags

from otel_replay._shared import SharedCells
from otel_replay._workers import add_part, remove_part
from otel_replay.runs._counter import live_counters
from otel_replay.runs._process_trace import Borrowed, borrow, open_for_workers
from otel_replay.runs._run import (
    RunState,
    continue_run,
    current_run,
    process_run,
    recording,
)
from otel_replay.runs._threads import carry_into_threads, stop_carrying
from otel_replay.step import RunFacts

__all__ = ["hand_over_runs", "inherited_runs", "stop_handing_over"]

PART = "runs"
"""The capture's part of a worker's ticket."""

_inherited: frozenset[str] = frozenset()


def inherited_runs() -> frozenset[str]:
    """The runs this process continues for the process that started it (empty in a process
    that no other process of a run started)."""
    return _inherited


def hand_over_runs() -> None:
    """Hand the current run over to the workers multiprocessing starts fresh (fork needs
    nothing: its hooks are always in place), and a ``run()`` block's to the threads started
    in it (``_threads``)."""
    add_part(PART, _ticket, _take_ticket)
    carry_into_threads()


def stop_handing_over() -> None:
    """Stop handing runs over (the instrumentor goes)."""
    remove_part(PART)
    stop_carrying()


def _before_fork() -> None:
    if recording():
        process_run()  # the child must have it to continue, not begin one of its own
        if _by_multiprocessing():
            open_for_workers()  # the workers' steps and the parent's are one trace
    for counter in live_counters():
        counter.share()


def _after_fork_in_child() -> None:
    global _inherited  # noqa: PLW0603 - what this process inherited at its fork
    # The counters know themselves inherited (``_counter``); the exporter asks for the ids.
    _inherited = _inherited | {counter.run_id for counter in live_counters()}


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


def _by_multiprocessing() -> bool:
    """Whether the fork under way starts a multiprocessing worker (``popen_fork``)."""
    module = sys.modules.get("multiprocessing.popen_fork")
    launch = getattr(getattr(module, "Popen", None), "_launch", None)
    code = getattr(launch, "__code__", None)
    frame = sys._getframe(1)
    while code is not None and frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _ticket() -> dict[str, Any] | None:
    """The capture's part of the ticket of a worker being started from the calling thread:
    the current run, with its counter shared (None when not recording)."""
    if not recording():
        return None
    run = current_run()
    counter = run.counter.share()
    facts = run.facts()
    parent = open_for_workers()
    if parent is None:  # a span is current: the worker's steps nest under it
        current = trace.get_current_span().get_span_context()
        parent = Borrowed(current) if current.is_valid else None
    # Each block of cells once: multiprocessing passes a descriptor named twice as two
    # (spawn refuses the pair), and the worker would close it twice.
    blocks: list[SharedCells] = []

    def place(cells: SharedCells, cell: int) -> tuple[int, int]:
        if not any(block is cells for block in blocks):
            blocks.append(cells)
        return next(n for n, block in enumerate(blocks) if block is cells), cell

    counter_at = place(*counter)
    used_at = None if parent is None or parent.used is None else place(*parent.used)
    handles = [block.handle() for block in blocks]
    if any(handle is None for handle in handles):  # pragma: no cover - no shared memory here
        return None
    return {
        "run_id": run.run_id,
        "mode": facts.mode,
        "seed": facts.seed,
        "commit": facts.commit,
        "code_dirty": facts.code_dirty,
        "start_ns": facts.start_ns,
        "parent_run_id": facts.parent_run_id,
        "cells": handles,
        "counter": counter_at,
        "span": None
        if parent is None
        else (parent.span.trace_id, parent.span.span_id, int(parent.span.trace_flags)),
        "span_used": used_at,
    }


def _take_ticket(part: dict[str, Any]) -> None:
    """In a worker started fresh: continue the run the ticket names."""
    global _inherited  # noqa: PLW0603 - what this process inherited from its ticket
    run_id = part["run_id"]
    if not isinstance(run_id, str):
        raise ValueError(f"a run id is {run_id!r}")
    blocks = [SharedCells.attach(handle) for handle in part["cells"]]
    facts = RunFacts(
        run_id=run_id,
        mode=str(part["mode"]),
        seed=part["seed"],
        commit=part["commit"],
        code_dirty=part["code_dirty"],
        start_ns=int(part["start_ns"]),
        parent_run_id=part["parent_run_id"],
    )
    state = RunState(
        run_id=run_id,
        mode=facts.mode,
        seed=facts.seed,
        start_ns=facts.start_ns,
        parent_run_id=facts.parent_run_id,
    )
    state._facts = facts
    block, cell = part["counter"]
    state.counter.adopt(blocks[block], int(cell))
    state.counter.inherited = True
    continue_run(state)
    _inherited = _inherited | {run_id}
    span = part.get("span")
    if span is not None:
        trace_id, span_id, flags = span
        used = part.get("span_used")
        borrow(
            run_id,
            Borrowed(
                SpanContext(trace_id, span_id, True, TraceFlags(flags)),
                None if used is None else (blocks[used[0]], int(used[1])),
            ),
        )
