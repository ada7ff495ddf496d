"""Nothing is lost in a burst: 10,000 steps through real httpx calls, with the SDK's default
batch processor (whose 2048-span queue would drop most of them) in front of the exporter."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import otel_replay
from otel_replay.runs._handoff import handoff
from tests.export._support import CHAT_URL, Pipeline, chat_request, echo_client

HEADERS = {"content-type": "application/json"}


def _burst(pipe: Pipeline, steps: int) -> str:
    with otel_replay.run("burst") as run, echo_client() as client:
        for i in range(steps):
            client.post(CHAT_URL, content=chat_request(f"burst step {i}"), headers=HEADERS)
    pipe.stop()
    return run.run_id


def _assert_everything_stored(pipe: Pipeline, run_id: str, steps: int) -> None:
    stats = pipe.exporter.stats()
    assert (stats.dropped, stats.failed, stats.pending) == (0, 0, 0), stats
    assert (stats.steps, stats.spans) == (steps, steps + 1)
    with pipe.open_store() as store:
        info = store.run(run_id)
        assert info.step_count == steps
        stored = store.steps(run_id)
        assert [s.index for s in stored] == list(range(steps))
        assert all(s.model == "gpt-4o-mini" and s.complete for s in stored)
        spans = store.spans(run_id)
        assert len(spans) == steps + 1 and len({s["span_id"] for s in spans}) == steps + 1
        assert {s["span_id"] for s in spans} >= {f"{s.span_id:016x}" for s in stored}
        assert store.request_body(stored[-1]) == chat_request(f"burst step {steps - 1}")
        assert store.verify() == []


def test_a_burst_of_10000_steps_loses_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING), Pipeline(tmp_path / "store") as pipe:
        run_id = _burst(pipe, 10_000)
    _assert_everything_stored(pipe, run_id, 10_000)
    assert not [r for r in caplog.records if r.name.startswith("otel_replay")]


def test_a_small_handoff_holds_the_application_back_instead_of_dropping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handoff(), "max_bytes", 8 * 5000)  # about 8 steps
    monkeypatch.setattr(handoff(), "wait_s", 30.0)
    with Pipeline(tmp_path / "store") as pipe:
        run_id = _burst(pipe, 1000)
    _assert_everything_stored(pipe, run_id, 1000)
