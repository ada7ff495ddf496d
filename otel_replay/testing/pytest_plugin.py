"""The pytest plugin: the ``otel_replay`` marker runs a test against a recorded run (the
``replay_result`` fixture); ``replay_capture`` yields a :class:`CaptureKit`.

See docs/replay.md, "In tests"."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from otel_replay.replay import ReplayResult
    from otel_replay.testing._kit import CaptureKit

MARKER = "otel_replay"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(source, *, store=None, strict=True, timing='fast', clock=None, "
        "live_tools=None, override=None, inject=None, state=None, live_from=None, "
        "allow_writes=False): run the test against a recorded run (otel_replay.replaying); "
        "the replay_result fixture is what the replay found",
    )


@pytest.fixture(autouse=True)
def _otel_replay_marked(request: pytest.FixtureRequest) -> Iterator[ReplayResult | None]:
    """The replay of a test marked ``otel_replay`` (None for the others)."""
    marker = request.node.get_closest_marker(MARKER)
    if marker is None:
        yield None
        return
    from otel_replay import replaying  # noqa: PLC0415
    from otel_replay.errors import OtelReplayError  # noqa: PLC0415

    source, options = _arguments(marker, request.config.rootpath)
    problem: str | None
    try:
        replay = replaying(source, **options)
        result = replay.__enter__()
    except (OtelReplayError, OSError, TypeError) as exc:
        problem = str(exc)
    else:
        problem = None
    if problem is not None:  # failed outside the handler: one line, no chained traceback
        pytest.fail(f"otel-replay: cannot replay {source!r}: {problem}", pytrace=False)
    try:
        yield result
    finally:
        replay.__exit__(None, None, None)


@pytest.fixture
def replay_result(_otel_replay_marked: ReplayResult | None) -> ReplayResult:
    """What the replay of this test's ``@pytest.mark.otel_replay(SOURCE)`` recording found."""
    if _otel_replay_marked is None:
        pytest.fail(
            "replay_result needs the test marked @pytest.mark.otel_replay(SOURCE)",
            pytrace=False,
        )
    return _otel_replay_marked


def _arguments(marker: pytest.Mark, root: Path) -> tuple[Any, dict[str, Any]]:
    """The marker's source (a relative path that exists under ``root`` made absolute) and
    ``replaying()`` options; a marker without exactly one source fails the test."""
    if len(marker.args) != 1:
        pytest.fail(
            f"@pytest.mark.{MARKER} takes one source (a run id, a file, a URL), "
            f"got {len(marker.args)}",
            pytrace=False,
        )
    from otel_replay.replay import Run  # noqa: PLC0415

    source = marker.args[0]
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if isinstance(source, bytes) or not isinstance(source, str | Run):
        shown = repr(source) if len(repr(source)) <= 80 else repr(source)[:79] + "…"
        pytest.fail(
            f"@pytest.mark.{MARKER} takes a source (a run id, a path, a URL or a Run), "
            f"got {type(source).__name__} {shown}",
            pytrace=False,
        )
    if isinstance(source, str) and not Path(source).is_absolute():
        rooted = root / source
        if rooted.exists():
            source = str(rooted)
    return source, dict(marker.kwargs)


@pytest.fixture
def replay_capture() -> Iterator[CaptureKit]:
    """httpx and httpx2 instrumented by otel-replay into in-memory span and metric sinks."""
    from otel_replay.testing._kit import CaptureKit  # noqa: PLC0415

    with CaptureKit() as kit:
        yield kit


@pytest.fixture
def replay_capture_deterministic() -> Iterator[CaptureKit]:
    """``replay_capture`` with span and trace ids 1, 2, 3... and a clock that steps one
    second per reading (span, event, step and run id times), for whole-span assertions."""
    from otel_replay.testing._kit import CaptureKit  # noqa: PLC0415

    with CaptureKit(deterministic=True) as kit:
        yield kit
