"""A full disk under a recording process: steps are held and written as space frees; what is
still held at exit is named in one line; the device is named full, not the index corrupt.

The store lives on a real 8 MiB tmpfs (``tests/store/_disk``; mounting one needs root:
skipped otherwise), filled with a file the test truncates to free space. ``_disk_agent.py``
runs under the real ``opentelemetry-instrument`` against the stand-in provider, with
questions of random bytes (they do not compress: about 25 KB of store each). Before, a flush
was all or nothing: with the held steps larger than the space freed, none was ever written,
and the rest was lost at exit with a count and no run named; SQLite's ``database or disk is
full`` was reported as a corrupt index to rebuild.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from examples.standin import StandIn
from otel_replay.errors import StoreError
from otel_replay.store import Store
from tests.export._support import INSTRUMENT, ROOT, subprocess_env
from tests.store import _disk
from tests.store._disk import Disk

pytestmark = pytest.mark.subprocess

small_disk = _disk.small_disk

AGENT = str(Path(__file__).with_name("_disk_agent.py"))
RUN_ID = "r_full_disk"
STEPS, QUESTION_BYTES = 120, 24_000


@contextlib.contextmanager
def _recording(standin: StandIn, store: Path) -> Iterator[subprocess.Popen[str]]:
    """The agent, once it made its steps (it returns when given a line); killed if the
    test leaves before it ended."""
    command = [str(INSTRUMENT), sys.executable, AGENT, standin.openai_base_url]
    agent = subprocess.Popen(
        [*command, str(STEPS), str(QUESTION_BYTES)],
        cwd=ROOT,
        env=subprocess_env(store, OTEL_REPLAY_RUN_ID=RUN_ID),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert agent.stdout is not None
        assert agent.stdout.readline().strip() == f"recorded {STEPS}"
        yield agent
    finally:
        if agent.poll() is None:
            agent.kill()
        agent.communicate()


def _stored(store: Path) -> int:
    """Steps of the run the store holds durably (read by this process, not the recorder)."""
    try:
        with Store.open(store, create=False) as opened:
            return len(opened.steps(RUN_ID))
    except StoreError:  # no store yet, or the run not there yet
        return 0


def _wait_for(check: Callable[[], bool], seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def test_held_steps_are_written_as_space_frees(small_disk: Disk, standin: StandIn) -> None:
    disk = small_disk
    store = disk.root / "store"
    disk.fill(leave=256 << 10)
    with _recording(standin, store) as agent:
        before = _stored(store)
        assert before < STEPS // 4  # most steps are held: the disk is full
        # Room for some of them: as much as fits is written, while the process lives.
        disk.release(1 << 20)
        assert _wait_for(lambda: _stored(store) > before + 10), _stored(store)
        assert _stored(store) < STEPS
        # Room for all: every step is written, still while the process lives.
        disk.release()
        assert _wait_for(lambda: _stored(store) == STEPS), _stored(store)
        _, err = agent.communicate("\n", timeout=60)
    assert agent.returncode == 0, err
    assert f"no space left on the device holding the store at {store}" in err
    assert "CorruptIndexError" not in err and "not written" not in err
    with Store.open(store, create=False) as opened:
        run = opened.run(RUN_ID)
        assert (run.status, run.step_count) == ("ok", STEPS)
        steps = opened.steps(RUN_ID)
        assert [s.index for s in steps] == list(range(STEPS))
        assert all(s.complete and s.status_code == 200 for s in steps)
        assert [p for p in opened.verify() if p.damage] == []


def test_what_a_full_disk_still_holds_at_exit_is_named_in_one_line(
    small_disk: Disk, standin: StandIn
) -> None:
    disk = small_disk
    store = disk.root / "store"
    disk.fill(leave=256 << 10)
    with _recording(standin, store) as agent:
        _, err = agent.communicate("\n", timeout=120)
    assert agent.returncode == 0, err
    assert "CorruptIndexError" not in err
    (line,) = [line for line in err.splitlines() if "not written" in line]
    assert f"no space left on the device holding the store at {store}" in line
    named = line.split(" steps of runs ")
    assert len(named) == 2, line
    held = int(named[0].rsplit(" ", 1)[1])
    assert f"{RUN_ID} ({held})" in named[1]
    # Nothing is lost silently: what the store holds and what the line names are every step.
    disk.release()
    assert _stored(store) + held == STEPS
