"""Under fast timing a skipped sleep moves the monotonic clocks on too: ``time.monotonic()``,
``monotonic_ns()``, ``perf_counter()``, ``perf_counter_ns()`` and asyncio's ``loop.time()``
advance by what was slept, together, so code bounded by a monotonic deadline behaves as it
did when recorded. otel-replay's own code keeps reading the real clocks."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from time import monotonic as bound_monotonic
from time import perf_counter_ns as bound_perf_counter_ns

import pytest

import otel_replay
from examples.standin import StandIn
from otel_replay.replay._model import Run
from otel_replay.store import Store
from tests.export._support import INSTRUMENT, ROOT, subprocess_env

AGENT = Path(__file__).with_name("_poll_agent.py")
CLI = Path(sys.executable).parent / "otel-replay"
RUN = Run("r_monotonic", "test", (), start_ns=1_700_000_000 * 10**9)
NAMES = ("monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns")


def _clocks() -> dict[str, float]:
    """Every monotonic clock in seconds, read from this module (an application's)."""
    return {
        "monotonic": time.monotonic(),
        "monotonic_ns": time.monotonic_ns() / 1e9,
        "perf_counter": time.perf_counter(),
        "perf_counter_ns": time.perf_counter_ns() / 1e9,
        "bound monotonic": bound_monotonic(),
        "bound perf_counter_ns": bound_perf_counter_ns() / 1e9,
    }


def _moved(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {name: after[name] - before[name] for name in before}


def test_a_skipped_sleep_moves_every_monotonic_clock_by_its_length() -> None:
    real = time.clock_gettime(time.CLOCK_MONOTONIC)
    with otel_replay.replaying(RUN):
        before = _clocks()
        time.sleep(30)
        after = _clocks()
        time.sleep(12.5)
        again = _clocks()
    assert time.clock_gettime(time.CLOCK_MONOTONIC) - real < 1.0, "no sleep took time"
    for name, moved in _moved(before, after).items():
        assert 30 <= moved < 30.5, name
    for name, moved in _moved(after, again).items():
        assert 12.5 <= moved < 13, name
    # Restored on the way out: the builtins again, wherever they were bound.
    assert time.monotonic is bound_monotonic and "built-in" in repr(bound_monotonic)
    assert "built-in" in repr(time.perf_counter_ns) and "built-in" in repr(bound_perf_counter_ns)


def test_the_event_loops_clock_moves_with_a_skipped_asyncio_sleep() -> None:
    async def poll() -> tuple[int, float, list[str]]:
        loop = asyncio.get_running_loop()
        fired: list[str] = []
        loop.call_later(2.0, fired.append, "timer due within the skipped sleep")
        started, polls = loop.time(), 0
        while loop.time() - started < 9.5:
            polls += 1
            await asyncio.sleep(2.0)
        return polls, loop.time() - started, fired

    real = time.clock_gettime(time.CLOCK_MONOTONIC)
    with otel_replay.replaying(RUN):
        before = time.monotonic()
        polls, moved, fired = asyncio.run(poll())
        after = time.monotonic()
    assert time.clock_gettime(time.CLOCK_MONOTONIC) - real < 1.0
    assert polls == 5 and 10 <= moved < 10.5
    assert 10 <= after - before < 10.5, "loop.time() and time.monotonic() agree"
    assert fired == ["timer due within the skipped sleep"]


def test_a_sleep_skipped_in_a_daemon_thread_moves_no_clock() -> None:
    # Background work spinning through its skipped sleeps must not push the program's time.
    spins: list[int] = []

    def poller() -> None:
        for _ in range(2000):
            time.sleep(1.0)
        spins.append(2000)

    with otel_replay.replaying(RUN):
        before, wall = _clocks(), time.time()
        thread = threading.Thread(target=poller, daemon=True)
        thread.start()
        thread.join(10)
        after, wall_moved = _clocks(), time.time() - wall
        time.sleep(2.0)  # the program's own sleep still moves them
        again = _clocks()
    assert spins == [2000], "the daemon's sleeps were skipped"
    assert all(moved < 1.0 for moved in _moved(before, after).values())
    assert wall_moved < 1.0
    assert all(2.0 <= moved < 3.0 for moved in _moved(after, again).values())


@pytest.mark.subprocess
def test_a_short_poll_for_something_real_keeps_its_deadline_in_real_time() -> None:
    # A child that takes 150 ms to exit once asked, waited for as the MCP SDK waits for its
    # stdio server: polls 10 ms apart, for at most 2 s by the monotonic clock. Moving that
    # clock by each skipped poll would give up after 2 ms of real time and kill the child.
    child = "import signal, sys, time\n"
    child += "signal.signal(signal.SIGTERM, lambda *a: (time.sleep(0.15), sys.exit(7)))\n"
    child += "print('up', flush=True)\ntime.sleep(60)\n"
    with otel_replay.replaying(RUN):
        proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline() == "up\n"
        proc.terminate()
        before, real = time.monotonic(), time.clock_gettime(time.CLOCK_MONOTONIC)
        deadline = before + 2.0
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        waited = time.monotonic() - before
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
    assert proc.returncode == 7, "the child exited on its own, in its own time"
    assert 0.15 <= time.clock_gettime(time.CLOCK_MONOTONIC) - real < 2.0
    assert 0.15 <= waited < 2.0


def test_otel_replays_own_code_reads_the_real_clocks() -> None:
    # A wait of otel-replay's (a writer's barrier, the hand-off's back-pressure) must not be
    # cut short by a sleep the application skipped. Code compiled as one of its modules:
    ours: dict[str, object] = {"__name__": "otel_replay.some_module", "time": time}
    exec("def read():\n    return time.monotonic(), time.perf_counter_ns()", ours)
    read = ours["read"]
    assert callable(read)
    with otel_replay.replaying(RUN):
        mine, ours_before = time.monotonic(), read()
        time.sleep(60)
        mine_moved = time.monotonic() - mine
        ours_after = read()
    assert 60 <= mine_moved < 61
    assert ours_after[0] - ours_before[0] < 1.0
    assert (ours_after[1] - ours_before[1]) / 1e9 < 1.0


def test_recorded_timing_leaves_the_monotonic_clocks_alone() -> None:
    with otel_replay.replaying(RUN, timing="recorded"):
        assert "built-in" in repr(time.monotonic)
        before = time.monotonic()
        time.sleep(0.2)
        assert 0.2 <= time.monotonic() - before < 1.0


def _numbers(line: str) -> dict[str, float]:
    return {k: float(v) for k, v in re.findall(r"([\w.]+)=([\d.]+)", line)}


@pytest.mark.subprocess
def test_a_replayed_agent_polling_until_a_deadline_polls_as_often_as_recorded(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    with StandIn() as standin:
        recorded = subprocess.run(
            [str(INSTRUMENT), sys.executable, str(AGENT), standin.tools_url],
            env=subprocess_env(store, OTEL_REPLAY_RUN_ID="r_poll"),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        tools_url = standin.tools_url
    assert recorded.returncode == 0, recorded.stderr
    rec = recorded.stdout.splitlines()
    assert rec[0] == "threads: 4 polls" and rec[3] == "asyncio: 4 polls", rec
    # The stand-in is gone: every poll must come from the recording.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "STANDIN_"))}
    program = [sys.executable, str(AGENT), tools_url]
    replayed = subprocess.run(
        [str(CLI), "replay", "r_poll", "--store", str(store), "--", *program],
        env=env | {"PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    rep = replayed.stdout.splitlines()
    assert rep[0] == "threads: 4 polls" and rep[3] == "asyncio: 4 polls", rep
    # Every clock moved by the four sleeps (and the polls), in the recording as in the replay;
    # in the replay almost no real time passed.
    for lines in (rec, rep):
        moved = _numbers(lines[1])
        assert set(moved) == set(NAMES)
        assert all(1.6 <= m < 1.9 for m in moved.values()), moved
        assert 1.6 <= _numbers(lines[4])["loop.time"] < 1.9, lines[4]
    assert float(rec[2].split()[-1]) >= 1.6 and float(rec[5].split()[-1]) >= 1.6
    assert float(rep[2].split()[-1]) < 0.5 and float(rep[5].split()[-1]) < 0.5, rep
    with Store.open(store, create=False) as opened:
        (replay_run,) = [r for r in opened.runs() if r.mode == "replay"]
        assert replay_run.step_count == opened.run("r_poll").step_count == 10
