"""The bounded hand-off between the application thread and the exporter."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from otel_replay.runs import _handoff
from otel_replay.runs._handoff import ITEM_OVERHEAD, Handoff
from otel_replay.step import RunEnd, Step


def _fixture(span_id: int, size: int) -> Step:
    return Step(
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


def _bound(steps: int, size: int = 100) -> int:
    """A bound with room for exactly ``steps`` steps of ``size`` body bytes."""
    return steps * (size + ITEM_OVERHEAD)


def test_nothing_is_held_without_a_consumer() -> None:
    handoff = Handoff(max_bytes=_bound(10))
    assert not handoff.wanted
    assert handoff.put(_fixture(1, 10), None) is False
    assert handoff.held_bytes == 0 and handoff.dropped == 0
    assert handoff.claimed({1}) == set()


def test_steps_come_out_in_order_with_their_span_and_claim_it() -> None:
    handoff = Handoff(max_bytes=_bound(10))
    consumer = handoff.attach()
    span = object()
    assert handoff.put(_fixture(1, 100), span)
    assert handoff.put(_fixture(2, 100), None)
    consumer.post("barrier")
    assert handoff.held_bytes == 2 * (100 + ITEM_OVERHEAD)
    first, second, barrier = consumer.drain()
    assert first[0].span_id == 1 and first[1] is span and first[2] == 100 + ITEM_OVERHEAD
    assert second[0].span_id == 2 and barrier == "barrier"
    assert handoff.claimed({1, 3}) == {1}
    assert handoff.claimed({1}) == set(), "a claim is answered once"
    consumer.release(first[2] + second[2])
    assert handoff.held_bytes == 0


def test_full_handoff_waits_for_room() -> None:
    handoff = Handoff(max_bytes=_bound(2), wait_s=5.0)
    consumer = handoff.attach()
    assert handoff.put(_fixture(0, 100), None) and handoff.put(_fixture(1, 100), None)

    def make_room() -> None:
        time.sleep(0.1)
        (item, *_) = consumer.drain(1)
        consumer.release(item[2])

    helper = threading.Thread(target=make_room)
    helper.start()
    start = time.monotonic()
    assert handoff.put(_fixture(2, 100), None), "back-pressure: the put waits, then succeeds"
    assert 0.05 < time.monotonic() - start < 4
    helper.join()
    assert handoff.dropped == 0


def test_bound_refuses_after_the_wait_counts_and_logs_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handoff = Handoff(max_bytes=_bound(2), wait_s=0.05)
    consumer = handoff.attach()
    with caplog.at_level(logging.WARNING):
        start = time.monotonic()
        results = [handoff.put(_fixture(i, 100), None) for i in range(5)]
        elapsed = time.monotonic() - start
    assert results == [True, True, False, False, False]
    assert elapsed < 0.5, "after one timed-out wait, puts are refused without waiting"
    assert handoff.dropped == 3
    assert handoff.held_bytes == _bound(2)
    assert len([r for r in caplog.records if "hand-off is full" in r.message]) == 1
    (item, *_) = consumer.drain(1)
    consumer.release(item[2])
    assert handoff.put(_fixture(9, 100), None), "room is made by release()"


def test_a_step_larger_than_the_bound_is_refused_at_once() -> None:
    handoff = Handoff(max_bytes=_bound(1), wait_s=5.0)
    handoff.attach()
    start = time.monotonic()
    assert not handoff.put(_fixture(1, _bound(2)), None)
    assert time.monotonic() - start < 1 and handoff.dropped == 1


def test_the_last_consumer_attached_gets_the_steps_until_it_detaches() -> None:
    handoff = Handoff(max_bytes=_bound(10))
    first = handoff.attach()
    second = handoff.attach()
    handoff.put(_fixture(1, 10), None)
    handoff.detach(second)
    handoff.put(_fixture(2, 10), None)
    assert list(second.steps()) == [1]
    assert list(first.steps()) == [2]


def test_detach_releases_held_bytes() -> None:
    handoff = Handoff(max_bytes=_bound(10))
    consumer = handoff.attach()
    handoff.put(_fixture(1, 10), None)
    handoff.detach(consumer)
    assert handoff.held_bytes == 0 and not handoff.wanted
    assert handoff.claimed({1}) == set()


def test_posted_messages_reach_the_active_consumer_in_order_with_the_steps() -> None:
    handoff = Handoff(max_bytes=_bound(10))
    end = RunEnd("r", end_ns=5)
    assert handoff.post(end) is False, "nobody attached: nothing is kept"
    consumer = handoff.attach()
    handoff.put(_fixture(1, 10), None)
    assert handoff.post(end) is True
    handoff.put(_fixture(2, 10), None)
    items = consumer.drain()
    assert [type(item) for item in items] == [tuple, RunEnd, tuple]
    assert items[1] is end
    assert handoff.held_bytes == 2 * (10 + ITEM_OVERHEAD), "a message holds no bytes"


def test_the_process_handoff_is_made_once_on_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_handoff, "_process_handoff", None)
    monkeypatch.setenv("OTEL_REPLAY_HANDOFF_MAX_BYTES", "not a number")
    made = []
    start = threading.Barrier(8)

    def first_use() -> None:
        start.wait()
        made.append(_handoff.handoff())

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(h) for h in made}) == 1 and made[0] is _handoff.handoff()
    assert made[0].max_bytes == 256 * 1024 * 1024, "the default: the exporter applies the setting"


def test_a_step_ending_after_the_exporter_left_is_counted_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A stream still read on a thread of its own after the provider shut down: its step began
    # for a consumer that is gone. It cannot be stored; it must not vanish unsaid.
    handoff = Handoff(max_bytes=_bound(10))
    consumer = handoff.attach()
    assert handoff.put(_fixture(1, 10), None)
    handoff.detach(consumer)
    with caplog.at_level(logging.WARNING):
        late = [handoff.put(_fixture(i, 10), None) for i in (2, 3)]
    assert late == [False, False]
    assert handoff.late == 2 and handoff.dropped == 0
    assert [r.message for r in caplog.records if "after the replay exporter" in r.message] == [
        "otel-replay: a step ended after the replay exporter had shut down (a response still "
        "being read after the tracer provider's shutdown, on a thread of its own?): it is not "
        "in the store (counted in Handoff.late)"
    ]
