"""Which run a step made in another thread belongs to: the ``run()`` block that started the
thread (or handed the task to a pool), else the process run.

In-process, through the real instrumentor (``CaptureKit``); each step is an
``otel_replay.uuid4()`` draw. The end-to-end recording and replay are in
``tests/export/test_threads.py``.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import otel_replay
from otel_replay.runs import current_run
from otel_replay.testing import CaptureKit


def runs_of_steps(kit: CaptureKit) -> list[str]:
    """The run of each step span, in the order they started."""
    steps = [s for s in kit.spans() if "replay.step.index" in s["attributes"]]
    return [s["attributes"]["replay.run.id"] for s in steps]


class Drawer(threading.Thread):
    """A thread whose subclass overrides ``run``."""

    def run(self) -> None:
        otel_replay.uuid4()


def test_a_subclassed_thread_and_a_timer_carry_the_block() -> None:
    with CaptureKit() as kit:
        with otel_replay.run("block", run_id="r_block"):
            for thread in (Drawer(), threading.Timer(0, otel_replay.uuid4)):
                thread.start()
                thread.join()
        outside = threading.Thread(target=otel_replay.uuid4)
        outside.start()
        outside.join()
        process = current_run().run_id
        assert runs_of_steps(kit) == ["r_block", "r_block", process]


def test_a_pools_threads_do_not_keep_the_block_that_started_them() -> None:
    # The pool's worker thread is started by the first submit, inside the first block: a
    # task submitted later belongs to the run of where it was submitted, not to that block.
    with CaptureKit() as kit, ThreadPoolExecutor(1) as pool:
        with otel_replay.run("first", run_id="r_first"):
            pool.submit(otel_replay.uuid4).result()
        pool.submit(otel_replay.uuid4).result()
        with otel_replay.run("second", run_id="r_second"):
            pool.submit(otel_replay.uuid4).result()
        process = current_run().run_id
        assert runs_of_steps(kit) == ["r_first", process, "r_second"]


def test_threads_are_left_alone_once_the_instrumentor_goes() -> None:
    started, submit = threading.Thread.start, ThreadPoolExecutor.submit
    with CaptureKit():
        assert threading.Thread.start is not started
        assert ThreadPoolExecutor.submit is not submit
    assert (threading.Thread.start, ThreadPoolExecutor.submit) == (started, submit)
