"""An agent that hands model calls to worker processes records one run and replays it.

Recorded under the real ``opentelemetry-instrument`` against the stand-in (the real openai
SDK in the parent and in the workers), then replayed through the ``otel-replay`` CLI with the
stand-in gone: ``ProcessPoolExecutor`` and ``multiprocessing.Pool``, under each start method
(``fork``, Linux's default before Python 3.14; ``spawn``; ``forkserver``, 3.14's default).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from examples.otlp_sink import OtlpSink
from examples.standin import StandIn
from otel_replay.store import Store
from tests.export._support import INSTRUMENT, ROOT, exporting_to, subprocess_env

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")

SCRIPT = str(Path(__file__).with_name("_workers_agent.py"))
CLI = Path(sys.executable).parent / "otel-replay"
GONE = "http://127.0.0.1:9"  # the discard port: nothing listens, and strict replay never asks
RUN_ID = "r_workers"
HELLO, THANKS = "Hello, I need help with my orders.", "Thanks, that is all."
FIRST, CHANGED = "Where is my order A-1001?", "Where on earth is my order A-1001?"
TOGETHER = {"What about A-1002?", "And A-1003?"}


@dataclass(frozen=True)
class Recording:
    store: Path
    kind: str
    method: str
    printed: str
    received: int
    elapsed_s: float
    collected: dict[str, str]
    """The spans the OTLP collector got once the agent ended: name by span id."""


def record(tmp_path: Path, kind: str, method: str, **env: str) -> Recording:
    """The agent recorded into a store and exported over OTLP to a collector, as in
    production (``OTEL_TRACES_EXPORTER=otlp,replay``)."""
    store = tmp_path / "store"
    with StandIn(event_delay=0.001) as standin, OtlpSink() as sink:
        started = time.monotonic()
        done = subprocess.run(
            [str(INSTRUMENT), sys.executable, SCRIPT, kind, method],
            cwd=ROOT,
            env=subprocess_env(
                store,
                OTEL_REPLAY_RUN_ID=RUN_ID,
                STANDIN_URL=standin.base_url,
                **exporting_to(sink),
            )
            | env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        elapsed = time.monotonic() - started
        received = len(standin.received)
        collected = {span["span_id"]: span["name"] for span in sink.spans()}
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.endswith("workers: 2\n")  # two worker processes made requests
    assert "kept apart" not in done.stderr  # no second recording of the run id
    return Recording(store, kind, method, done.stdout, received, elapsed, collected)


Recorder = Callable[[Path, str, str], Recording]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorder:
    """``recorded(tmp_path, kind, method)``: a private copy (under ``tmp_path``) of the agent
    recorded once per module for that kind and start method.

    Each is recorded with a flush timeout of a minute, which no run may wait out: a Pool's
    ``__exit__`` terminates its workers as they flush (see
    ``test_a_pool_that_terminates_its_workers_does_not_wait_for_the_flush_timeout``). The
    tests replay into their copy, so each sees the store as the recording left it."""
    made: dict[tuple[str, str], Recording] = {}

    def copy(tmp_path: Path, kind: str, method: str) -> Recording:
        if (kind, method) not in made:
            where = tmp_path_factory.mktemp(f"workers-{kind}-{method}")
            made[kind, method] = record(where, kind, method, OTEL_REPLAY_FLUSH_TIMEOUT_MS="60000")
        template = made[kind, method]
        store = Path(shutil.copytree(template.store, tmp_path / "store"))
        return replace(template, store=store)

    return copy


def replay(recording: Recording, **env: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    """``otel-replay replay RUN --json -- python agent …`` with the stand-in gone; the
    process and the comparison it printed."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "STANDIN_"))}
    done = subprocess.run(
        [
            *(str(CLI), "replay", RUN_ID, "--store", str(recording.store), "--json", "--"),
            *(sys.executable, SCRIPT, recording.kind, recording.method),
        ],
        env=clean | {"STANDIN_URL": GONE, "PYTHONPATH": str(ROOT)} | env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert "Traceback" not in done.stderr or env, done.stderr
    return done, json.loads(done.stdout)


def questions(store: Store, run_id: str) -> list[str]:
    """The question each step of the run asked, in step order."""
    return [
        json.loads(store.request_body(step))["messages"][0]["content"]
        for step in store.steps(run_id)
    ]


def assert_one_run(store: Store, run_id: str, count: int) -> None:
    """``run_id`` is one run of ``count`` steps, numbered 0 to count-1, ended by its
    recorder, in one trace: every step span under the process run's root."""
    assert [run.run_id for run in store.runs() if run.run_id.startswith(run_id)] == [run_id]
    info = store.run(run_id)
    assert (info.status, info.step_count) == ("ok", count)
    steps = store.steps(run_id)
    assert [step.index for step in steps] == list(range(count))
    assert all(step.complete and step.status_code == 200 for step in steps)
    spans = store.spans(run_id)
    assert len({span["trace_id"] for span in spans}) == 1
    roots = [span for span in spans if span["parent_span_id"] is None]
    assert [root["name"] for root in roots] == ["invoke_agent _workers_agent.py"]
    step_spans = [span for span in spans if "replay.step.index" in span["attributes"]]
    assert sorted(s["attributes"]["replay.step.index"] for s in step_spans) == list(range(count))
    assert {span["parent_span_id"] for span in step_spans} == {roots[0]["span_id"]}
    assert [problem for problem in store.verify() if problem.damage] == []


CASES = [
    ("executor", "fork"),
    ("pool", "fork"),
    ("executor", "spawn"),
    ("pool", "forkserver"),
]


@pytest.mark.subprocess
@pytest.mark.parametrize(("kind", "method"), CASES)
def test_the_workers_steps_are_one_run_and_replay_identically(
    recorded: Recorder, tmp_path: Path, kind: str, method: str
) -> None:
    recording = recorded(tmp_path, kind, method)
    with Store.open(recording.store, create=False) as store:
        assert_one_run(store, RUN_ID, 5)
        asked = questions(store, RUN_ID)
        # The parent's first call, then the worker's alone, then the two at once, then the
        # parent's last: every request the stand-in got is a step.
        assert (asked[0], asked[1], set(asked[2:4]), asked[4]) == (HELLO, FIRST, TOGETHER, THANKS)
        assert recording.received == 5
        stored = {span["span_id"]: span["name"] for span in store.spans(RUN_ID)}
    # The collector got what the store did. A Pool's __exit__ kills its idle workers, which
    # loses what they held for OTLP as it would without otel-replay; an executor's workers
    # end their work (a forked one through os._exit, past the SDK's shutdown) and send it.
    if kind == "executor":
        assert recording.collected == stored
    else:
        assert recording.collected.items() <= stored.items()
    listed = subprocess.run(
        [str(CLI), "runs", "--json", "--store", str(recording.store)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert [(r["run_id"], r["step_count"]) for r in json.loads(listed.stdout)] == [(RUN_ID, 5)]

    done, report = replay(recording)
    assert done.returncode == 0, done.stdout + done.stderr  # identical
    assert done.stderr.startswith(recording.printed)  # --json: the agent's output on stderr
    assert report["outcome"] == "identical"
    assert (report["recorded_steps"], report["served"]) == (5, 5)
    assert report["matched"] == {"hash": 5}
    assert report["unused"] == [] and report["extra"] == []
    assert sorted(step["order"] for step in report["steps"]) == list(range(5))
    assert sorted(step["recorded"] for step in report["steps"]) == list(range(5))
    assert report["network_attempts"] == []
    # The replay is recorded as a run of its own: the workers' steps are in it too.
    replayed = report["replay_run_id"]
    assert replayed is not None
    with Store.open(recording.store, create=False) as store:
        assert_one_run(store, replayed, 5)
        assert sorted(questions(store, replayed)) == sorted(questions(store, RUN_ID))
        assert store.run(replayed).parent_run_id == RUN_ID


@pytest.mark.subprocess
@pytest.mark.parametrize(("kind", "method"), [("pool", "fork"), ("executor", "spawn")])
def test_workers_started_before_the_first_step_are_in_its_trace(
    tmp_path: Path, kind: str, method: str
) -> None:
    # No root span is open when the workers start: the parent opens the one their steps
    # nest under (and ends it, as something was made under it).
    recording = record(tmp_path, kind, method, AGENT_QUIET="1")
    with Store.open(recording.store, create=False) as store:
        assert_one_run(store, RUN_ID, 4)
        assert questions(store, RUN_ID)[0] == FIRST
    done, report = replay(recording, AGENT_QUIET="1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (report["outcome"], report["served"], report["unused"]) == ("identical", 4, [])


@pytest.mark.subprocess
@pytest.mark.parametrize(("kind", "method"), [("executor", "fork"), ("pool", "forkserver")])
def test_a_changed_worker_prompt_diverges_at_its_step(
    recorded: Recorder, tmp_path: Path, kind: str, method: str
) -> None:
    recording = recorded(tmp_path, kind, method)
    done, report = replay(recording, AGENT_CHANGE="1")
    assert done.returncode == 1, done.stdout + done.stderr  # diverged
    first = report["first_divergence"]
    assert (report["outcome"], first["kind"], first["step"]) == ("diverged", "changed", 1)
    changed = [c for c in first["changes"] if c["replayed"] and CHANGED in json.dumps(c)]
    assert changed and FIRST in json.dumps(changed)
    # Every other request, the workers' included, was answered as recorded.
    others = [step for step in report["steps"] if step["recorded"] != 1]
    assert len(others) == 4 and all(step["how"] == "hash" for step in others)
    assert report["unused"] == []


@pytest.mark.subprocess
def test_a_request_the_recording_lacks_in_a_pool_worker_ends_the_replay(
    recorded: Recorder, tmp_path: Path
) -> None:
    # An unmatched request raises an error that SDKs do not catch (a BaseException); a Pool
    # worker would die of it and the pool wait for its result forever.
    recording = recorded(tmp_path, "pool", "fork")
    done, report = replay(recording, AGENT_EXTRA="1")
    assert done.returncode == 1, done.stdout + done.stderr  # diverged, not hung
    assert report["outcome"] == "diverged"
    assert [step["url"] for step in report["extra"]] == [f"{GONE}/tools/orders/A-9999"]
    assert report["agent"]["error"].startswith("otel_replay.errors.UnmatchedInPoolError")


@pytest.mark.subprocess
@pytest.mark.parametrize("method", ["fork", "forkserver"])
def test_a_pool_that_terminates_its_workers_does_not_wait_for_the_flush_timeout(
    recorded: Recorder, tmp_path: Path, method: str
) -> None:
    # Pool.__exit__ terminates the workers (SIGTERM) as they leave through their exit flush;
    # the handler flushed the providers again, waiting on the lock the interrupted flush
    # held: the whole OTEL_REPLAY_FLUSH_TIMEOUT_MS, for each worker.
    recording = recorded(tmp_path, "pool", method)  # OTEL_REPLAY_FLUSH_TIMEOUT_MS=60000
    assert recording.elapsed_s < 30
    with Store.open(recording.store, create=False) as store:
        assert_one_run(store, RUN_ID, 5)


CYCLES_SCRIPT = str(Path(__file__).with_name("_pool_cycles_agent.py"))


@pytest.mark.subprocess
def test_pools_terminated_again_and_again_never_hang_and_lose_no_step(tmp_path: Path) -> None:
    # Pool.__exit__ terminates its idle workers (SIGTERM) as they wait for a task. With our
    # handler in place of the default, one that landed just before a worker blocked was only
    # handled when the wait returned: never, and the program hung in Pool.__exit__ (1 run
    # in 2 under load); and the steps a worker had not yet written could be lost.
    cycles = 15
    for attempt in range(4):
        store = tmp_path / f"store{attempt}"
        with subprocess.Popen(
            [str(INSTRUMENT), sys.executable, CYCLES_SCRIPT, str(cycles)],
            cwd=ROOT,
            env=subprocess_env(store, OTEL_REPLAY_RUN_ID=RUN_ID),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a hung run's workers go with it
        ) as program:
            try:
                out, err = program.communicate(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(program.pid, signal.SIGKILL)
                program.communicate()
                pytest.fail(f"run {attempt} hung")
        assert (program.returncode, out) == (0, f"results: {2 * cycles}\n"), err
        with Store.open(store, create=False) as opened:
            info = opened.run(RUN_ID)
            assert (info.status, info.step_count) == ("ok", 2 * cycles)
            assert [step.index for step in opened.steps(RUN_ID)] == list(range(2 * cycles))


FORK_IN_FLUSH = str(Path(__file__).with_name("_fork_in_flush_agent.py"))


def _fork_in_flush(
    store: Path, *args: str, flush_timeout_ms: int
) -> subprocess.CompletedProcess[str]:
    """The fork-in-flush agent recorded into ``store`` under ``opentelemetry-instrument``."""
    return subprocess.run(
        [str(INSTRUMENT), sys.executable, FORK_IN_FLUSH, *args],
        cwd=ROOT,
        env=subprocess_env(
            store,
            OTEL_REPLAY_RUN_ID="r_fork_in_flush",
            OTEL_REPLAY_FLUSH_TIMEOUT_MS=str(flush_timeout_ms),
        ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.subprocess
def test_a_worker_forked_while_the_writer_is_in_the_index_loses_nothing(tmp_path: Path) -> None:
    # A fork copies SQLite's state as it is: forked while the parent's writer thread held the
    # index's write lock, the worker saw it held for good, and its writer waited for it until
    # the worker ended, its steps lost without a word (on a busy machine, now and then).
    store = tmp_path / "store"
    done = _fork_in_flush(store, flush_timeout_ms=3000)
    assert (done.returncode, done.stdout, done.stderr) == (0, "worker: 0\n", "")
    with Store.open(store, create=False) as opened:
        assert [(r.run_id, r.step_count, r.status) for r in opened.runs()] == [
            ("r_fork_in_flush", 4, "ok")
        ]
        steps = opened.steps("r_fork_in_flush")
        assert [step.index for step in steps] == list(range(4))
        assert [opened.read_step(step).url for step in steps] == [
            "value:in_parent",
            *["value:in_worker"] * 3,
        ]


@pytest.mark.subprocess
def test_a_worker_whose_steps_cannot_be_written_says_so(tmp_path: Path) -> None:
    # Its writer stuck in the store past the flush timeout, the worker goes all the same (as
    # it must), naming on stderr what it could not write; it used to go without a word.
    store = tmp_path / "store"
    done = _fork_in_flush(store, "stuck", flush_timeout_ms=1000)
    assert (done.returncode, done.stdout) == (0, "worker: 0\n")
    (line,) = done.stderr.splitlines()
    assert re.fullmatch(
        rf"otel-replay: worker process \d+ ended with 3 steps of runs r_fork_in_flush \(3\) "
        rf"and \d+ spans not written to {re.escape(str(store))} "
        r"\(the store did not answer in time\)",
        line,
    ), line
    with Store.open(store, create=False) as opened:
        assert opened.run("r_fork_in_flush").step_count == 1


IDLE_WORKER = str(Path(__file__).with_name("_idle_worker_agent.py"))


@pytest.mark.subprocess
def test_an_idle_worker_terminated_keeps_its_instrumentations_call_spans(
    tmp_path: Path,
) -> None:
    # A worker going idle wrote its steps, but not the spans still queued in the batch span
    # processor: openai-v2's `chat` span, which ends after its step, died with the worker
    # when Pool.__exit__ terminated it (the step left without its model and messages).
    others = {ep.name for ep in entry_points(group="opentelemetry_instrumentor")}
    store = tmp_path / "store"
    with StandIn(event_delay=0.001) as standin:
        done = subprocess.run(
            [str(INSTRUMENT), sys.executable, IDLE_WORKER],
            cwd=ROOT,
            env=subprocess_env(
                store,
                OTEL_REPLAY_RUN_ID=RUN_ID,
                STANDIN_URL=standin.base_url,
                OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=",".join(
                    sorted(others - {"otel_replay", "openai"})
                ),
            ),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.endswith(f"worker exit: -{signal.SIGTERM.value}\n")
    with Store.open(store, create=False) as opened:
        assert [step.index for step in opened.steps(RUN_ID)] == [0]
        spans = opened.spans(RUN_ID)
    calls = [s for s in spans if s["scope"] == "opentelemetry.util.genai.handler"]
    assert [c["name"] for c in calls] == ["chat gpt-4o-mini"]
    (attempt,) = [s for s in spans if "replay.step.index" in s["attributes"]]
    assert attempt["parent_span_id"] == calls[0]["span_id"]
    assert calls[0]["attributes"]["gen_ai.usage.output_tokens"] > 0
    # The parent made no step of its own: the root it opened for its workers is ended and
    # stored all the same, since the worker made one under it (within the `chat` span).
    (root,) = [s for s in spans if s["name"].startswith("invoke_agent")]
    assert calls[0]["parent_span_id"] == root["span_id"]
    assert attempt["attributes"]["replay.run.span_id"] == root["span_id"]
