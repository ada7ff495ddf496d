"""Nothing is lost when a recorded process exits normally or gets SIGTERM, under the real
``opentelemetry-instrument`` with ``OTEL_TRACES_EXPORTER=replay``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from examples.standin import StandIn
from otel_replay.store import Store
from tests.export._support import INSTRUMENT, ROOT, chat_request, run_instrumented, subprocess_env

pytestmark = pytest.mark.subprocess

SCRIPT = str(Path(__file__).with_name("_steps_script.py"))
RUN_ID = "r_process_test"


def _start(standin: StandIn, store: Path, count: int, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(INSTRUMENT), sys.executable, SCRIPT, standin.tools_url, str(count), *extra],
        cwd=ROOT,
        env=subprocess_env(store, OTEL_REPLAY_RUN_ID=RUN_ID),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _terminate_after(proc: subprocess.Popen[str], steps: int) -> tuple[int, str]:
    """Send SIGTERM once ``steps`` steps were printed: (steps printed before it, stderr)."""
    assert proc.stdout is not None
    printed = 0
    for line in proc.stdout:
        if line.startswith("step "):
            printed += 1
        if printed == steps:
            proc.send_signal(signal.SIGTERM)
            break
    _, err = proc.communicate(timeout=60)
    return printed, err


def _check_store(
    store_path: Path, at_least: int, run_span: bool, status: str = "ok", cut: bool = False
) -> int:
    with Store.open(store_path, create=False) as store:
        info = store.run(RUN_ID)
        assert info.status == status
        steps = store.steps(RUN_ID)
        assert info.step_count == len(steps) >= at_least
        assert [s.index for s in steps] == list(range(len(steps)))
        # Every step whose span ended before the signal is whole; the one in flight, if
        # any, is the last and marked incomplete, never corrupt.
        assert all(s.complete and s.status_code == 200 for s in steps[:at_least])
        spans = store.spans(RUN_ID)
        span_ids = {s["span_id"] for s in spans}
        assert {f"{s.span_id:016x}" for s in steps[:at_least]} <= span_ids
        blocks = [s for s in spans if s["name"] == "invoke_agent steps"]
        assert len(blocks) == int(run_span)
        if cut:  # the block's span was ended by the signal, which cut the block short
            assert blocks[0]["status"] == {"code": "ERROR", "message": "cut off by SIGTERM"}
            assert blocks[0]["attributes"]["error.type"] == "SIGTERM"
        assert [p for p in store.verify() if p.damage] == []
        return len(steps)


def test_a_normal_exit_loses_nothing(standin: StandIn, tmp_path: Path) -> None:
    proc = _start(standin, tmp_path / "store", 200)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    assert out.count("step ") == 200
    assert _check_store(tmp_path / "store", 200, run_span=True) == 200


def test_sigterm_loses_nothing_and_still_kills(standin: StandIn, tmp_path: Path) -> None:
    proc = _start(standin, tmp_path / "store", -1)
    printed, err = _terminate_after(proc, 25)
    assert proc.returncode == -signal.SIGTERM, err
    # Killed by the signal: the run was cut off, and says so; every step is there, and the
    # block's span, ended as cut off.
    stored = _check_store(tmp_path / "store", printed, run_span=True, status="incomplete", cut=True)
    with Store.open(tmp_path / "store", create=False) as store:
        whole = sum(1 for s in store.steps(RUN_ID) if s.complete)
    # Nothing stored that was not sent: each whole step's request reached the stand-in; the
    # one in flight (marked incomplete) may have been cut before the stand-in logged it.
    assert whole <= len(standin.received) and stored <= whole + 1


@pytest.mark.parametrize("handler", ["--app-handler"])
def test_sigterm_with_the_applications_own_handler(
    standin: StandIn, tmp_path: Path, handler: str
) -> None:
    proc = _start(standin, tmp_path / "store", -1, handler)
    printed, err = _terminate_after(proc, 25)
    assert proc.returncode == 3, err
    # The application's handler exits through the run() block: the run ended, in error.
    _check_store(tmp_path / "store", printed, run_span=True, status="error")


def _run_script(name: str, store: Path) -> None:
    """Run the script ``name`` beside this file, recording into ``store``; it must succeed."""
    script = str(Path(__file__).with_name(name))
    proc = subprocess.run(
        [sys.executable, script, str(store)],
        cwd=ROOT,
        env=subprocess_env(store),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_records_into_the_store_too(tmp_path: Path) -> None:
    _run_script("_fork_script.py", tmp_path / "store")
    with Store.open(tmp_path / "store", create=False) as store:
        assert {r.run_id: r.step_count for r in store.runs()} == {"r_parent": 3, "r_child": 3}
        assert store.verify() == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_goes_on_with_its_parents_run(tmp_path: Path) -> None:
    # The child's steps are the run's (one recording, not r_forked@2), each with an index of
    # its own though both processes record at once; the child's end does not end the run.
    _run_script("_fork_run_script.py", tmp_path / "store")
    with Store.open(tmp_path / "store", create=False) as store:
        assert [(r.run_id, r.step_count, r.status) for r in store.runs()] == [
            ("r_forked", 13, "ok")
        ]
        steps = store.steps("r_forked")
        assert [s.index for s in steps] == list(range(13))
        asked = sorted(store.request_body(s) for s in steps)
        expected = [("before", 2), ("child", 5), ("parent", 5), ("after", 1)]
        assert asked == sorted(chat_request(f"{w} {i}") for w, n in expected for i in range(n))
        assert store.verify() == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_forked_workers_leaving_through_os_exit_lose_nothing(
    standin: StandIn, tmp_path: Path
) -> None:
    # multiprocessing's children end with os._exit: no atexit, so no SDK shutdown; what their
    # writer held when the work ended was lost (4 of the 6 workers' steps).
    script = str(Path(__file__).with_name("_pool_agent.py"))
    done = subprocess.run(
        [str(INSTRUMENT), sys.executable, script, standin.tools_url],
        cwd=ROOT,
        env=subprocess_env(tmp_path / "store", OTEL_TRACES_EXPORTER="replay"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str([200] * 6)
    with Store.open(tmp_path / "store", create=False) as store:
        assert len(store.runs()) == 1  # the workers' steps are the parent's run
        steps = [s for run in store.runs() for s in store.steps(run.run_id)]
        assert [s.index for s in steps] == list(range(7))
        urls = sorted(store.read_step(step).url for step in steps)
        assert [p for p in store.verify() if p.damage] == []
    expected = [f"{standin.tools_url}/orders/A-{n}" for n in ("0001", *range(1000, 1006))]
    assert urls == sorted(expected)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_workers_that_record_nothing_leave_no_trace(standin: StandIn, tmp_path: Path) -> None:
    # The parent opens its process run's root span for the workers it starts; when neither
    # they nor it record a step under it, it is never ended: no empty trace, no empty run.
    script = str(Path(__file__).with_name("_pool_compute_agent.py"))
    done = run_instrumented(tmp_path / "store", script, standin.tools_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str([n * n for n in range(6)])
    with Store.open(tmp_path / "store", create=False) as store:
        (run,) = store.runs()  # the block's: the process run made no step, it is not there
        assert (run.step_count, run.status) == (1, "ok")
        names = sorted(span["name"] for span in store.spans(run.run_id))
        assert names == ["GET", "invoke_agent lookup"]
