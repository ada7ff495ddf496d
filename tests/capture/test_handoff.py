"""The bounded hand-off between the application thread and the exporter."""

from __future__ import annotations

import logging

import pytest

from otel_replay.capture._handoff import Fixture, Handoff


def _fixture(span_id: int, size: int) -> Fixture:
    return Fixture(
        run_id="r",
        step_index=span_id,
        trace_id=1,
        span_id=span_id,
        kind="http",
        method="GET",
        url="http://h/",
        request_headers=[],
        request_body=b"x" * size,
        request_hash="sha256:x",
    )


def test_nothing_is_held_without_a_consumer() -> None:
    handoff = Handoff(max_bytes=1000)
    assert not handoff.wanted
    assert handoff.put(_fixture(1, 10)) is False
    assert len(handoff) == 0 and handoff.dropped == 0


def test_take_returns_each_fixture_once_and_frees_its_bytes() -> None:
    handoff = Handoff(max_bytes=1000)
    handoff.attach()
    assert handoff.put(_fixture(1, 100))
    assert handoff.held_bytes == 100
    taken = handoff.take(1)
    assert taken is not None and taken.span_id == 1
    assert handoff.take(1) is None
    assert handoff.held_bytes == 0


def test_bound_refuses_counts_and_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    handoff = Handoff(max_bytes=250)
    handoff.attach()
    with caplog.at_level(logging.WARNING):
        results = [handoff.put(_fixture(i, 100)) for i in range(5)]
    assert results == [True, True, False, False, False]
    assert handoff.dropped == 3
    assert handoff.held_bytes == 200
    assert len([r for r in caplog.records if "hand-off is full" in r.message]) == 1
    handoff.take(0)
    assert handoff.put(_fixture(9, 100)), "room is made by take()"


def test_detach_releases_held_fixtures() -> None:
    handoff = Handoff(max_bytes=1000)
    handoff.attach()
    handoff.put(_fixture(1, 10))
    handoff.detach()
    assert len(handoff) == 0 and handoff.held_bytes == 0 and not handoff.wanted
