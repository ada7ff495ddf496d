"""Threads started inside a ``run()`` block record into its run, and the run replays.

Recorded under the real ``opentelemetry-instrument`` against the stand-in, replayed through the
``otel-replay`` CLI with the stand-in gone (``_threads_agent.py``): a ``ThreadPoolExecutor``, a
``threading.Thread`` and ``loop.run_in_executor`` inside one block; two blocks open at once in
two threads, each handing work to a pool of its own. A new thread starts with an empty context,
so before threads carried the block's run their steps went to the process run (a second run),
and the block's replay diverged at the first step made in a thread.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from examples.standin import StandIn
from otel_replay.store import Store
from tests.export._support import INSTRUMENT, ROOT, subprocess_env

pytestmark = pytest.mark.subprocess

SCRIPT = str(Path(__file__).with_name("_threads_agent.py"))
CLI = Path(sys.executable).parent / "otel-replay"
GONE = "http://127.0.0.1:9"  # the discard port: nothing listens, and strict replay never asks
REFUNDS = "refund A-1001\nrefund A-1002\nrefund A-1003\n"


def record(tmp_path: Path, how: str) -> tuple[Path, dict[str, Any]]:
    """The store ``_threads_agent.py how`` was recorded into, and what it printed."""
    store = tmp_path / "store"
    with StandIn(event_delay=0.001) as standin:
        done = subprocess.run(
            [str(INSTRUMENT), sys.executable, SCRIPT, how],
            cwd=ROOT,
            env=subprocess_env(
                store, STANDIN_URL=standin.base_url, AGENT_WRITES=str(tmp_path / "writes")
            ),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    return store, json.loads(done.stdout.strip().splitlines()[-1])


def endpoints(spans: list[dict[str, Any]]) -> list[str]:
    """What each step span of a run called (sorted): a tool, a URL path, or an LLM call."""
    called = []
    for span in spans:
        attrs = span["attributes"]
        if "replay.step.index" in attrs:
            url = attrs.get("url.full")
            called.append(url.split("/", 3)[3] if url else span["name"])
    return sorted(called)


def assert_one_trace_under_the_block(spans: list[dict[str, Any]], name: str) -> None:
    """Every step span of the run is a child of the ``run()`` block's span."""
    (block,) = [span for span in spans if span["name"] == f"invoke_agent {name}"]
    steps = [span for span in spans if "replay.step.index" in span["attributes"]]
    assert {span["parent_span_id"] for span in steps} == {block["span_id"]}
    assert {span["trace_id"] for span in steps} == {block["trace_id"]}


def test_threads_in_a_run_block_are_one_run_that_replays(tmp_path: Path) -> None:
    store_path, printed = record(tmp_path, "one")
    writes = tmp_path / "writes"
    assert writes.read_text().count("\n") == 3
    with Store.open(store_path, create=False) as store:
        (run,) = store.runs()  # no process run beside the block's
        assert (run.status, run.step_count) == ("ok", 8)
        assert [step.index for step in store.steps(run.run_id)] == list(range(8))
        spans = store.spans(run.run_id)
    assert endpoints(spans) == [
        "chat gpt-4o-mini",
        "execute_tool refund_order",
        "execute_tool refund_order",
        "execute_tool refund_order",
        "tools/orders/A-1234",
        "tools/orders/B-2345",
        "tools/orders/C-3456",
        "value uuid4",
    ]
    assert_one_trace_under_the_block(spans, "threads")

    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "STANDIN_"))}
    done = subprocess.run(
        [
            *(str(CLI), "replay", run.run_id, "--store", str(store_path), "--json", "--"),
            *(sys.executable, SCRIPT, "one"),
        ],
        env=clean | {"STANDIN_URL": GONE, "PYTHONPATH": str(ROOT), "AGENT_WRITES": str(writes)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["outcome"] == "identical"
    assert (report["recorded_steps"], report["served"], report["unused"]) == (8, 8, [])
    assert report["network_attempts"] == []
    replayed_output = json.loads(done.stderr.strip().splitlines()[-1])  # --json: on stderr
    assert replayed_output == printed
    assert sorted(writes.read_text().splitlines()) == sorted(REFUNDS.splitlines())  # not run
    with Store.open(store_path, create=False) as store:
        replayed = store.run(report["replay_run_id"])
        assert (replayed.step_count, replayed.parent_run_id) == (8, run.run_id)
        assert endpoints(store.spans(replayed.run_id)) == endpoints(spans)


def test_two_blocks_open_at_once_keep_their_threads_apart(tmp_path: Path) -> None:
    store_path, printed = record(tmp_path, "two")
    assert set(printed) == {"a", "b"}
    with Store.open(store_path, create=False) as store:
        assert sorted(run.run_id for run in store.runs()) == ["r_threads_a", "r_threads_b"]
        for name in ("a", "b"):
            spans = store.spans(f"r_threads_{name}")
            letter = name.upper()
            assert endpoints(spans) == [
                f"tools/orders/{letter}-1234",
                f"tools/orders/{letter}-2345",
            ]
            assert_one_trace_under_the_block(spans, name)
