"""Fixtures for exporter tests: an in-process pipeline recording into a temporary store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.export._support import Pipeline


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[Pipeline]:
    """The capture instrumented into a TracerProvider whose batch processor feeds a
    ReplaySpanExporter writing to ``tmp_path / "store"`` (shut down afterwards)."""
    with Pipeline(tmp_path / "store") as pipe:
        yield pipe
