"""Shared pytest fixtures, which tests are slow, and the guard that keeps the fast tier free
of processes."""

from __future__ import annotations

import _posixsubprocess
import os
import platform
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from examples.standin import StandIn
from otel_replay.runs._vcs import code_version
from tests.export._support import instrumentations

ROOT = Path(__file__).resolve().parent.parent

# The CLI lays its tables out to COLUMNS when set; pytest-xdist's workers set 80. The tests
# read the CLI's output as a pipe gives it, whoever runs them.
for _size in ("COLUMNS", "LINES"):
    os.environ.pop(_size, None)

# A process a test starts under `opentelemetry-instrument` loads our instrumentation alone,
# whatever else the venv installs, unless the test names the others it checks.
os.environ.update(instrumentations())

SLOW = (
    "tests/frameworks/",  # the agent frameworks (LangGraph, LiteLLM, ...): seconds of imports each
    "tests/test_demo.py",  # all of `make demo`
    "tests/store/test_s3rver.py",  # a Node.js S3 server
    "tests/transports/test_botocore.py",  # a moto server of its own
)
"""Tests marked ``slow`` (besides those on the moto S3 server, ``s3_server``): ``make
test-fast`` leaves them out, ``make test`` runs them."""

FIRST = ("tests/test_demo.py", "tests/replay/test_sources_phoenix", "tests/frameworks/")
"""Files that take long, run first: pytest-xdist hands out files in the order collected, and
one of these handed out last would leave the other workers idle till it ends."""

ALLOWED = ("slow", "subprocess")
"""The markers under which a test may start a process; ``make test-fast`` leaves both out."""

_STARTS = frozenset(
    ("subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.system")
)
"""Audit events that start a process."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        where = item.path.relative_to(ROOT).as_posix()
        if where.startswith(SLOW) or "s3_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
    # A stable sort: the order within each file, and among the others, stays.
    items.sort(key=lambda item: not item.path.relative_to(ROOT).as_posix().startswith(FIRST))


class _Guard:
    """Refuses to start a process while a test without an :data:`ALLOWED` marker runs.

    An audit hook sees ``subprocess``, ``os.fork`` and the like below any patching; the
    ``spawn`` and ``forkserver`` starts of ``multiprocessing`` raise no audit event, so the
    function they (and ``subprocess``) call is wrapped too. The refusal raises where the
    process would start and is remembered, so a test that catches it still fails.
    """

    def __init__(self) -> None:
        self.item: pytest.Item | None = None
        self.refused: list[str] = []

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if self.item is not None and event in _STARTS:
            shown = f" {args[1]!r}" if event == "subprocess.Popen" else ""
            self.refuse(f"{event}{shown}")

    def wrap(self, fork_exec: Callable[..., int]) -> Callable[..., int]:
        def guarded(*args: Any, **kwargs: Any) -> int:
            if self.item is not None:
                self.refuse(f"a child process ({args[0]!r})" if args else "a child process")
            return fork_exec(*args, **kwargs)

        return guarded

    def refuse(self, what: str) -> None:
        message = (
            f"the test started {what}: mark it @pytest.mark.subprocess "
            "(make test-fast leaves those out)"
        )
        self.refused.append(message)
        raise RuntimeError(message)

    def watching(self, item: pytest.Item) -> Iterator[None]:
        if any(item.get_closest_marker(name) for name in ALLOWED):
            yield
            return
        self.item = item
        try:
            yield
        except BaseException:
            if not self.refused:
                raise
        finally:
            self.item = None
        if self.refused:
            refused, self.refused = self.refused, []
            pytest.fail(refused[0], pytrace=False)


_GUARD = _Guard()
sys.addaudithook(_GUARD.audit)
_posixsubprocess.fork_exec = _GUARD.wrap(_posixsubprocess.fork_exec)

# Asked once per process, of a child process, and kept: asked here, no test is the first to
# ask. A run records the code's version (git); the openai and anthropic SDKs name the
# platform in a header, whose processor part Python asks of `uname -p`.
code_version()
platform.processor()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    yield from _GUARD.watching(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    yield from _GUARD.watching(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield from _GUARD.watching(item)


@pytest.fixture
def standin() -> Iterator[StandIn]:
    """A running stand-in provider and tool backend on a free port (stopped afterwards)."""
    with StandIn(event_delay=0.001) as server:
        yield server
