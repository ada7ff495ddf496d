"""The pytest plugin: a ``replay_capture`` fixture yielding a started :class:`CaptureKit`.

Imports are deferred to the fixture, so merely having otel-replay installed costs a pytest
session nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from otel_replay.testing._kit import CaptureKit


@pytest.fixture
def replay_capture() -> Iterator[CaptureKit]:
    """httpx and httpx2 instrumented by otel-replay into in-memory span and metric sinks."""
    from otel_replay.testing._kit import CaptureKit  # noqa: PLC0415

    with CaptureKit() as kit:
        yield kit
