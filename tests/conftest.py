"""Shared pytest fixtures, and which tests are slow."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.standin import StandIn

ROOT = Path(__file__).resolve().parent.parent

# The CLI lays its tables out to COLUMNS when set; pytest-xdist's workers set 80. The tests
# read the CLI's output as a pipe gives it, whoever runs them.
for _size in ("COLUMNS", "LINES"):
    os.environ.pop(_size, None)

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
