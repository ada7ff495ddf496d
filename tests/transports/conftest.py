"""Transport test fixtures: recordings made through the real pipeline (instrumentor, batch
processor, ``replay`` exporter, store) against the stand-in, and a watch on real connects."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from examples.standin import StandIn
from examples.standin.recording import RecordedRequest
from tests.export._support import Pipeline

DEAD = "http://127.0.0.1:9"  # nothing listens there: a live request would fail

_CONNECTS: list[str] = []
_WATCHING: list[bool] = [False]


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect" and _WATCHING[0]:
        _CONNECTS.append(str(args[1]))


sys.addaudithook(_audit)


@pytest.fixture
def connects() -> Iterator[list[str]]:
    """Every real ``socket.connect`` made while the test runs (seen below any patching)."""
    _CONNECTS.clear()
    _WATCHING[0] = True
    try:
        yield _CONNECTS
    finally:
        _WATCHING[0] = False


Recording = Callable[[Callable[[str], Any]], tuple[str, str, Any, list[RecordedRequest]]]


@pytest.fixture
def record(tmp_path: Path) -> Recording:
    """``record(work)`` runs ``work(base_url)`` against a fresh stand-in, recorded into a
    store; returns ``(store, run_id, work's result, the requests the stand-in received)``;
    the stand-in is stopped."""

    def go(work: Callable[[str], Any]) -> tuple[str, str, Any, list[RecordedRequest]]:
        store = tmp_path / "store"
        with StandIn(event_delay=0.001) as standin, Pipeline(store) as pipe:
            result = work(standin.base_url)
            run_id = pipe.run.run_id
            received = standin.received
        return str(store), run_id, result, received

    return go
