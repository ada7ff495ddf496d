"""The world beyond calls: the application's wall clock reads the recorded run's time, and
under fast timing sleeps return at once while that clock moves on."""

from __future__ import annotations

import asyncio
import datetime as dt
import gc
import os
import subprocess
import sys
import time
import types
from asyncio import sleep as bound_async_sleep
from pathlib import Path
from time import sleep as bound_sleep

import anyio
import pytest

import otel_replay
from examples.standin import StandIn
from otel_replay.replay._model import Run
from otel_replay.store import Store
from tests.export._support import INSTRUMENT, ROOT, Pipeline, subprocess_env

LEAP = dt.datetime(2024, 2, 29, 23, 59, 58, tzinfo=dt.timezone.utc)
AGENT = Path(__file__).with_name("_world_agent.py")
CLI = Path(sys.executable).parent / "otel-replay"


def _run(start: dt.datetime) -> Run:
    return Run("r_clock", "test", (), start_ns=int(start.timestamp() * 1e9))


def test_the_application_clock_starts_at_the_recorded_time_and_ticks() -> None:
    real_sleep = time.sleep
    local_day = dt.datetime.fromtimestamp(LEAP.timestamp()).date()
    with otel_replay.replaying(_run(LEAP)):
        now = dt.datetime.now(dt.timezone.utc)
        assert abs((now - LEAP).total_seconds()) < 1
        assert dt.date.today() == local_day
        assert abs(time.time() - LEAP.timestamp()) < 1
        assert time.gmtime().tm_mday == 29 and time.gmtime().tm_mon == 2
        time.sleep(5)  # crosses midnight in recorded time, at once in real time
        assert dt.datetime.now(dt.timezone.utc).date() == dt.date(2024, 3, 1)
    assert time.sleep is real_sleep
    assert abs(time.time() - dt.datetime.now().timestamp()) < 1
    assert dt.datetime.now().year >= 2026  # the real clock is back


class _ImportsDuringTheStart:
    """Cyclic garbage whose finalizer, run by the collector inside the replay's walk of the
    loaded modules, adds a module to ``sys.modules``, as another thread or a finalizer that
    imports at that moment does. It leaves garbage like itself behind until it has done so
    ``times`` times."""

    def __init__(self, added: list[str], times: int) -> None:
        self.cycle = self
        self.added, self.times = added, times

    def __del__(self) -> None:
        if len(self.added) >= self.times:
            return
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_name not in ("bindings", "_walk"):
            frame = frame.f_back  # type: ignore[assignment]
        if frame is not None:
            name = f"_imported_during_the_start_{len(self.added)}"
            sys.modules[name] = types.ModuleType(name)
            self.added.append(name)
        _ImportsDuringTheStart(self.added, self.times)


def test_a_module_imported_while_a_replay_starts_does_not_break_it() -> None:
    added: list[str] = []
    thresholds = gc.get_threshold()
    _ImportsDuringTheStart(added, times=3)
    gc.set_threshold(1)  # a collection at nearly every allocation
    try:
        with otel_replay.replaying(_run(LEAP)):
            gc.set_threshold(*thresholds)
            wall = time.time()
            time.sleep(3)  # skipped, the clock moved: the replay's world is in place
            assert 3 <= time.time() - wall < 4
    finally:
        gc.set_threshold(*thresholds)
        added.extend(["stop"] * 3)  # no more garbage of its kind
        gc.collect()
        for name in added:
            sys.modules.pop(name, None)
    assert added[:3] == [f"_imported_during_the_start_{n}" for n in range(3)]


def test_fast_timing_skips_every_kind_of_sleep_and_moves_the_clock() -> None:
    started = time.monotonic()
    with otel_replay.replaying(_run(LEAP)):
        wall = time.time()
        time.sleep(3)
        asyncio.run(asyncio.sleep(3))
        anyio.run(anyio.sleep, 3)
        moved = time.time() - wall
        asyncio.run(asyncio.sleep(0))  # still a plain yield
    assert time.monotonic() - started < 4.5  # not the 9 s slept, however loaded the machine
    assert 9 <= moved < 10


def test_fast_timing_skips_sleeps_bound_by_name_before_the_replay() -> None:
    real_sleep, real_async_sleep = bound_sleep, bound_async_sleep
    started = time.monotonic()
    with otel_replay.replaying(_run(LEAP)):
        wall = time.time()
        bound_sleep(3)
        asyncio.run(bound_async_sleep(3))
        moved = time.time() - wall
    assert time.monotonic() - started < 3  # not the 6 s slept, however loaded the machine
    assert 6 <= moved < 7
    assert (bound_sleep, bound_async_sleep) == (real_sleep, real_async_sleep)  # given back


def test_names_bound_during_the_replay_are_real_again_after_it(tmp_path: Path) -> None:
    # A module first imported inside the block (an SDK's lazily imported backend) binds the
    # replay's sleep and clock by name, and keeps them after the block.
    (tmp_path / "late_bound.py").write_text("from time import monotonic, sleep\n")
    real_clock = time.perf_counter
    sys.path.insert(0, str(tmp_path))
    try:
        with otel_replay.replaying(_run(LEAP)):
            import late_bound  # type: ignore[import-not-found]

            started = real_clock()
            late_bound.sleep(2)  # skipped: it moves the monotonic clocks by 2 s
            assert real_clock() - started < 0.5
        started = time.perf_counter()
        late_bound.sleep(0.2)
        assert time.perf_counter() - started >= 0.2  # a real sleep again
        assert abs(late_bound.monotonic() - time.monotonic()) < 0.1  # no 2 s left added
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("late_bound", None)


def test_each_replay_finds_the_names_bound_since_the_last(tmp_path: Path) -> None:
    # Where modules bind the real sleep is remembered from one replay to the next (walking
    # every module's names at each start was slow): a module imported since, and a name a
    # known module gained since, must still be found.
    (tmp_path / "bound_between.py").write_text("from time import sleep\n")
    real_clock = time.perf_counter
    module = sys.modules[__name__]
    with otel_replay.replaying(_run(LEAP)):
        started = real_clock()
        bound_sleep(2)
        assert real_clock() - started < 0.5
    sys.path.insert(0, str(tmp_path))
    try:
        import bound_between  # type: ignore[import-not-found]

        module.gained_sleep = time.sleep  # type: ignore[attr-defined]
        with otel_replay.replaying(_run(LEAP)):
            started = real_clock()
            bound_sleep(2)
            bound_between.sleep(2)
            module.gained_sleep(2)  # type: ignore[attr-defined]
            assert real_clock() - started < 0.5
        assert bound_between.sleep is module.gained_sleep is time.sleep  # given back
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("bound_between", None)
        vars(module).pop("gained_sleep", None)


def test_recorded_timing_keeps_sleeps_and_a_live_clock_is_left_alone() -> None:
    with otel_replay.replaying(_run(LEAP), timing="recorded", clock="live"):
        started = time.monotonic()
        time.sleep(0.3)
        assert time.monotonic() - started >= 0.3
        assert dt.datetime.now().year >= 2026


@pytest.mark.parametrize("value", ["recorded", "live"])
def test_the_clock_setting_is_read(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("OTEL_REPLAY_CLOCK", value)
    with otel_replay.replaying(_run(LEAP)):
        travelled = dt.datetime.now(dt.timezone.utc).year == 2024
    assert travelled == (value == "recorded")


@pytest.mark.subprocess
def test_a_replayed_agent_sees_the_recorded_clock_and_its_back_off_costs_nothing(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    with StandIn(event_delay=0.001) as standin:
        recorded = subprocess.run(
            [str(INSTRUMENT), sys.executable, str(AGENT)],
            env=subprocess_env(store, OTEL_REPLAY_RUN_ID="r_world", STANDIN_URL=standin.base_url),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert recorded.returncode == 0, recorded.stderr
    assert _real_seconds(recorded.stderr) >= 3.0
    time.sleep(1.5)  # the replay starts later in real time than the recording did
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "STANDIN_"))}
    replayed = subprocess.run(
        [str(CLI), "replay", "r_world", "--store", str(store), "--", sys.executable, str(AGENT)],
        env=env | {"STANDIN_URL": "http://127.0.0.1:9", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    lines = recorded.stdout.splitlines()
    assert replayed.stdout.splitlines()[1 : len(lines)] == lines[1:]
    assert "the wall clock moved past the back-off: True" in lines
    # The clock the replayed agent read started at the recording's start, not at today's
    # (4.5 s or more later: the recording's 3 s, then the pause). Each process's start-up
    # before its first read (about 1 s apart at load 12) is not the recording's.
    first = dt.datetime.fromisoformat(recorded.stdout.split()[1])
    again = dt.datetime.fromisoformat(replayed.stdout.split()[1])
    assert abs((again - first).total_seconds()) < 2.5
    # After a call, it reads what it read when recorded, whatever the replay's pace.
    assert (
        abs(_stamp(replayed.stderr, "answered at") - _stamp(recorded.stderr, "answered at")) < 0.2
    )
    with Store.open(store, create=False) as opened:
        replay_run = next(r for r in opened.runs() if r.mode == "replay")
    assert replay_run.start_ns / 1e9 > time.time() - 60  # its record keeps the real time
    # Its 3 s of sleeps took no real time (timed inside the agent: start-up is not counted).
    assert _real_seconds(replayed.stderr) < 1.5


def _real_seconds(stderr: str) -> float:
    """The real time the world agent took from its first line to its last, as it printed."""
    return _stamp(stderr, "real seconds")


def _stamp(stderr: str, name: str) -> float:
    """The number the world agent printed on its ``name: N`` line."""
    (line,) = [x for x in stderr.splitlines() if x.startswith(f"{name}: ")]
    return float(line.split()[-1])


@otel_replay.tool(effect="read")
def _order_status(order_id: str) -> str:
    """A read tool whose recorded answer the replay serves."""
    return f"{order_id}: shipped"


def _spin(seconds: float) -> None:
    """Work that takes ``seconds`` of real time (no sleep: a replay skips those)."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


def _timed_calls(work_s: float) -> list[float]:
    """The wall clock read after each of two tool calls, ``work_s`` of work between them."""
    reads = []
    _order_status("A-1")
    reads.append(time.time())
    _spin(work_s)
    _order_status("A-2")
    reads.append(time.time())
    return reads


def test_after_each_call_the_clock_reads_what_it_read_when_recorded(tmp_path: Path) -> None:
    """A replay slower or faster than its recording between two calls (here 1.5 s of work
    where the recording did 0.2 s, then none) reads, after the next call, the time the
    recording read there: the clock follows the recorded steps, not the replay's pace."""
    store, run_id = tmp_path / "store", "r_20261129T231500_c10c0001"
    with Pipeline(store), otel_replay.run(name="clock", run_id=run_id):
        recorded = _timed_calls(0.2)
    for work_s in (1.5, 0.0):
        with otel_replay.replaying(run_id, store=str(store)) as result:
            replayed = _timed_calls(work_s)
        assert result.identical, result.first_divergence
        for then, now in zip(recorded, replayed, strict=True):
            assert abs(now - then) < 0.1, (work_s, recorded, replayed)


def test_concurrent_calls_never_take_the_clock_back(tmp_path: Path) -> None:
    """Calls served out of their recorded order leave the clock at the latest recorded end."""
    store, run_id = tmp_path / "store", "r_20261129T231600_c10c0002"
    with Pipeline(store), otel_replay.run(name="clock", run_id=run_id):
        _order_status("A-1")
        _spin(0.3)
        _order_status("A-2")
        ended = time.time()
    with otel_replay.replaying(run_id, store=str(store)):
        _order_status("A-2")
        after_second = time.time()
        _order_status("A-1")  # the earlier recorded step, served last
        assert time.time() >= after_second
    assert abs(after_second - ended) < 0.1
