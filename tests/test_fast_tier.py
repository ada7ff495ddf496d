"""The fast tier starts no process: tests/conftest.py refuses one to a test not marked for it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

pytestmark = pytest.mark.subprocess

STARTS = """
import multiprocessing
import os
import subprocess
import sys

import pytest


def test_run():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_run_caught():
    try:
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    except Exception:
        pass


def test_fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_multiprocessing(method):
    child = multiprocessing.get_context(method).Process(target=print)
    child.start()
    child.join()


@pytest.mark.subprocess
def test_marked():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


@pytest.mark.slow
def test_slow():
    subprocess.run([sys.executable, "-c", "pass"], check=True)
"""


def test_a_test_that_starts_a_process_fails_unless_marked(pytester: pytest.Pytester) -> None:
    conftest = Path(__file__).with_name("conftest.py")
    shutil.copy(conftest, pytester.path / "conftest.py")
    shutil.copytree(conftest.parents[1] / "examples", pytester.path / "examples")
    pytester.makepyfile(test_starts=STARTS)
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n    subprocess: starts processes\n")

    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", "-rf")

    result.assert_outcomes(passed=2, failed=6)
    refusals = [line for line in result.outlines if line.startswith("the test started ")]
    assert len(refusals) == 6
    for line in refusals:
        assert line.endswith(": mark it @pytest.mark.subprocess (make test-fast leaves those out)")
    assert sum("subprocess.Popen [" in line for line in refusals) == 2
    assert sum(line.startswith("the test started os.fork:") for line in refusals) == 2
    assert sum("multiprocessing.resource_tracker" in line for line in refusals) == 2
