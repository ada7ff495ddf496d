"""Shared pytest fixtures, and which tests are slow."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.standin import StandIn

ROOT = Path(__file__).resolve().parent.parent

SLOW = (
    "tests/frameworks/",  # the agent frameworks (LangGraph, LiteLLM, ...): seconds of imports each
    "tests/test_demo.py",  # all of `make demo`
    "tests/store/test_s3rver.py",  # a Node.js S3 server
    "tests/transports/test_botocore.py",  # a moto server of its own
)
"""Tests marked ``slow`` (besides those on the moto S3 server, ``s3_server``): ``make
test-fast`` leaves them out, ``make test`` runs them."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        where = item.path.relative_to(ROOT).as_posix()
        if where.startswith(SLOW) or "s3_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def standin() -> Iterator[StandIn]:
    """A running stand-in provider and tool backend on a free port (stopped afterwards)."""
    with StandIn(event_delay=0.001) as server:
        yield server
