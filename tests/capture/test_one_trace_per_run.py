"""One trace per run under an SDK's or an instrumentation's own call spans.

A script with no span of its own around its model calls, run under ``opentelemetry-instrument``
against the stand-in, exporting OTLP to a real receiver and to the store: the anthropic SDK
2.x (its own tracing on, by default) and the openai SDK under
``opentelemetry-instrumentation-openai-v2`` each open a span per call with no parent. Each
call span nests under the process run's root span, so the run is one trace; every attempt on
the wire (a call refused twice with a 429 makes three) is in it once, beneath its call span,
and in the store once.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from examples.otlp_sink import OtlpSink
from examples.standin import StandIn
from otel_replay.store import Store
from tests.export._support import INSTRUMENT, exporting_to, instrumentations, subprocess_env

pytestmark = pytest.mark.subprocess

SCRIPT = Path(__file__).with_name("_call_spans_agent.py")
RUN_ID = "r_one_trace"
# The call span each SDK opens (its name's start) and the instrumentation to leave enabled.
CALLS = {
    "anthropic": ("anthropic.messages.create", None),
    "openai": ("chat gpt-4o-mini", "openai"),
}


def _record(tmp_path: Path, sdk: str, stream: bool) -> tuple[list[dict[str, Any]], Path]:
    """Run the script; the spans the OTLP receiver got, and the store."""
    store = tmp_path / "store"
    keep = CALLS[sdk][1]
    with StandIn(event_delay=0.001) as standin, OtlpSink() as sink:
        env = subprocess_env(
            store,
            OTEL_REPLAY_RUN_ID=RUN_ID,
            STANDIN_URL=standin.base_url,
            **exporting_to(sink),
            **instrumentations(*filter(None, [keep])),
        )
        args = [str(INSTRUMENT), sys.executable, str(SCRIPT), sdk, *(["stream"] if stream else [])]
        done = subprocess.run(
            args, env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert len(done.stdout.splitlines()) == 3  # three answers
        return sink.spans(), store


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("sdk", list(CALLS))
def test_a_run_of_sdk_call_spans_is_one_trace_with_every_attempt_once(
    tmp_path: Path, sdk: str, stream: bool
) -> None:
    spans, store = _record(tmp_path, sdk, stream)
    assert len({s["trace_id"] for s in spans}) == 1
    (root,) = [s for s in spans if s["parent_span_id"] is None]
    assert root["scope"] == "otel_replay"
    assert root["name"] == "invoke_agent _call_spans_agent.py"
    assert root["attributes"]["replay.run.id"] == RUN_ID
    calls = [s for s in spans if s["name"] == CALLS[sdk][0] and s["scope"] != "otel_replay"]
    assert len(calls) == 3
    assert {c["parent_span_id"] for c in calls} == {root["span_id"]}
    # Every attempt once, beneath its call: 1, then 429, 429 and the answer, then 1.
    attempts = sorted(
        (s for s in spans if "replay.step.index" in s["attributes"]),
        key=lambda s: s["attributes"]["replay.step.index"],
    )
    assert [s["attributes"]["replay.step.index"] for s in attempts] == [0, 1, 2, 3, 4]
    by_call = Counter(s["parent_span_id"] for s in attempts)
    assert sorted(by_call.values()) == [1, 1, 3]
    assert set(by_call) == {c["span_id"] for c in calls}
    assert [s["attributes"]["http.response.status_code"] for s in attempts] == [
        200,
        429,
        429,
        200,
        200,
    ]
    # The root spans its calls: from before the first to the end of the last.
    assert root["start_ns"] <= min(c["start_ns"] for c in calls)
    assert root["end_ns"] >= max(c["end_ns"] for c in calls)
    with Store.open(store, create=False) as opened:
        assert [s.index for s in opened.steps(RUN_ID)] == [0, 1, 2, 3, 4]
