"""``OTEL_REPLAY_SAMPLE_OK``: the share of runs ending without an error whose fixtures are
kept. Runs with an error are always kept, and so are runs that never ended; a sampled-out run
leaves nothing in the store, and gc reclaims what only it held."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import otel_replay
from examples.standin import StandIn
from otel_replay.store import Store
from tests.export._support import (
    CHAT_URL,
    INSTRUMENT,
    ROOT,
    Pipeline,
    chat_request,
    echo_client,
    subprocess_env,
)


class Refused(Exception):
    """The agent's own failure."""


def _chat(text: str) -> None:
    with echo_client() as client:
        client.post(CHAT_URL, content=chat_request(text), headers={"content-type": "x/json"})


def _record(path: Path, runs: int, *, failing: set[int] = frozenset()) -> list[str]:
    """``runs`` run() blocks of two model calls each (those in ``failing`` raise); their ids."""
    ids = []
    with Pipeline(path) as pipeline:
        for n in range(runs):
            try:
                with otel_replay.run("agent") as run:
                    ids.append(run.run_id)
                    _chat(f"run {n} question 1")
                    _chat(f"run {n} question 2")
                    if n in failing:
                        raise Refused(f"run {n} failed")
            except Refused:
                pass
        pipeline.stop()
    return ids


def test_at_zero_only_the_failed_runs_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_REPLAY_SAMPLE_OK", "0")
    ids = _record(tmp_path / "store", 4, failing={1})
    with Store.open(tmp_path / "store", create=False) as store:
        runs = {info.run_id: info for info in store.runs()}
        assert list(runs) == [ids[1]], "only the run that failed"
        assert runs[ids[1]].status == "error" and runs[ids[1]].step_count == 2
        assert [p for p in store.verify() if p.damage] == []
        report = store.gc()
        assert report.skipped is None and report.blobs_removed > 0, "gc reclaims what they held"
        (kept,) = store.steps(ids[1])[:1]
        assert b"run 1 question 1" in store.request_body(kept)


def test_a_share_keeps_about_that_share_and_each_kept_run_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_REPLAY_SAMPLE_OK", "0.5")
    ids = _record(tmp_path / "store", 40)
    with Store.open(tmp_path / "store", create=False) as store:
        runs = {info.run_id: info for info in store.runs()}
        assert 8 <= len(runs) <= 32, len(runs)
        assert set(runs) <= set(ids)
        assert all(info.status == "ok" and info.step_count == 2 for info in runs.values())
        assert all(len(store.spans(run_id)) == 3 for run_id in runs)


def test_by_default_every_run_is_kept(tmp_path: Path) -> None:
    ids = _record(tmp_path / "store", 3)
    with Store.open(tmp_path / "store", create=False) as store:
        assert sorted(info.run_id for info in store.runs()) == sorted(ids)


@pytest.mark.parametrize("value", ["2", "-0.1", "half"])
def test_a_share_that_is_not_one_turns_recording_off_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_REPLAY_SAMPLE_OK", value)
    with Pipeline(tmp_path / "store") as pipeline:
        _chat("hello")
        pipeline.stop()
    assert "OTEL_REPLAY_SAMPLE_OK" in caplog.text
    assert not (tmp_path / "store").exists()


@pytest.mark.subprocess
def test_a_process_run_sampled_out_leaves_no_trace_in_the_store(
    standin: StandIn, tmp_path: Path
) -> None:
    # The process run's end is written at exit, and its root span comes after it: that span
    # must not bring the run back.
    agent = str(Path(__file__).with_name("_sigterm_agent.py"))
    for share, run_id in (("0", "r_dropped"), ("1", "r_kept")):
        done = subprocess.run(
            [str(INSTRUMENT), sys.executable, agent, standin.tools_url, "--exit-after", "3"],
            cwd=ROOT,
            env=subprocess_env(
                tmp_path / "store", OTEL_REPLAY_SAMPLE_OK=share, OTEL_REPLAY_RUN_ID=run_id
            ),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    with Store.open(tmp_path / "store", create=False) as store:
        assert [(r.run_id, r.status, r.step_count) for r in store.runs()] == [("r_kept", "ok", 3)]
        assert len(store.spans("r_kept")) == 4, "three steps and the process run's root"
