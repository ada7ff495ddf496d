"""Triage test fixtures: the runs of ``_recorded``, recorded once per session, and the CLI run
in-process."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from tests.cli._checks import run_cli
from tests.triage._recorded import Recorded, copy, record


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """The recordings, made once per session into a template store and a trace file."""
    return record(tmp_path_factory.mktemp("triage-recorded"))


@pytest.fixture
def store(recorded: Recorded, tmp_path: Path) -> Path:
    """A private copy of the recorded store."""
    return copy(recorded, tmp_path)


@pytest.fixture
def invoke(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    """``invoke(*args)``: the CLI in-process, exceptions not caught, from a clean
    ``OTEL_REPLAY_*`` environment."""
    for name in ("OTEL_REPLAY_STORE", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    return run_cli
