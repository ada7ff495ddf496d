"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from examples.standin import StandIn


@pytest.fixture
def standin() -> Iterator[StandIn]:
    """A running stand-in provider and tool backend on a free port (stopped afterwards)."""
    with StandIn(event_delay=0.001) as server:
        yield server
