"""CLI test fixtures: copies of stores holding real recordings, and the CLI run in-process."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from tests.cli._checks import run_cli
from tests.cli._recording import Recorded, record


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """The recordings of ``_recording``, made once per session into template stores."""
    return record(tmp_path_factory.mktemp("cli-recorded"))


@pytest.fixture
def store(recorded: Recorded, tmp_path: Path) -> Path:
    """A private copy of the recorded store (tests may damage or collect it)."""
    return Path(shutil.copytree(recorded.store, tmp_path / "store"))


@pytest.fixture
def bare(recorded: Recorded, tmp_path: Path) -> Path:
    """A private copy of the store whose spans carry no content."""
    return Path(shutil.copytree(recorded.bare, tmp_path / "bare"))


@pytest.fixture
def invoke(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    """``invoke(*args, env=...)``: the CLI in-process, exceptions not caught, from a clean
    ``OTEL_REPLAY_*`` environment."""
    for name in (
        "OTEL_REPLAY_STORE",
        "OTEL_REPLAY_RETAIN_OK_DAYS",
        "OTEL_REPLAY_RETAIN_ERROR_DAYS",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("COLUMNS", raising=False)
    return run_cli
