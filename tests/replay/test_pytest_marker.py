"""A recorded run as a pytest regression test: ``@pytest.mark.otel_replay(SOURCE)`` and the
``replay_result`` fixture, in a pytest session of its own that loads the plugin as a user's
does (its entry point), with the provider gone."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from examples.standin import StandIn
from otel_replay._canonical import sha256_tag
from otel_replay.redact import Redactor
from otel_replay.replay import Run
from otel_replay.replay.sources._bundle import write_bundle
from tests.export._support import Pipeline
from tests.replay._recorded import recorded_step
from tests.replay.conftest import collector_json, run_pytest

AGENT = """
import openai
import otel_replay

@otel_replay.tool
def search_docs(query: str) -> list[str]:
    return [f"the page about {query}"]

def run_agent(base_url: str, question: str = "Where is order A-1234?", sign: str = "") -> str:
    client = openai.OpenAI(base_url=base_url, api_key="sk-marker-not-a-secret", max_retries=0)
    docs = search_docs(question) + search_docs("shipping times")
    reply = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": question + "\\n" + "\\n".join(docs) + sign}],
    )
    return reply.choices[0].message.content or ""
"""

TESTS = """
import pytest
from agent import run_agent

STORE, RUN, URL = {store!r}, {run!r}, {url!r}

@pytest.mark.otel_replay(RUN, store=STORE)
def test_unchanged(replay_result):
    answer = run_agent(URL)
    assert replay_result.identical, replay_result.first_divergence
    assert len(replay_result.tool_calls("search_docs")) == 2
    assert replay_result.tool_calls("lookup") == []
    print("ANSWER", answer)

@pytest.mark.otel_replay(RUN, store=STORE)
def test_changed_question(replay_result):
    run_agent(URL, question="Where is order B-9?")
    assert replay_result.identical, replay_result.first_divergence

@pytest.mark.otel_replay(RUN, store=STORE)
def test_changed_prompt(replay_result):
    run_agent(URL, sign="\\nThanks, Ann")
    assert replay_result.identical, replay_result.first_divergence

@pytest.mark.otel_replay("export.json")
def test_from_a_file_under_the_root(replay_result):
    run_agent(URL)
    assert replay_result.identical, replay_result.first_divergence

def test_unmarked(replay_result):
    pass

@pytest.mark.otel_replay("r_20200101T000000_deadbeef", store=STORE)
def test_missing_run(replay_result):
    pass
"""


@pytest.mark.subprocess
def test_a_marked_test_replays_its_recording_and_sees_what_it_found(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(AGENT)
    spans = InMemorySpanExporter()
    sys.path.insert(0, str(tmp_path))
    try:
        import agent  # type: ignore[import-not-found]

        store = tmp_path / "store"
        with StandIn() as standin, Pipeline(store, others=[spans]) as pipe:
            url = standin.openai_base_url
            recorded_answer = agent.run_agent(url)
            run_id = pipe.run.run_id
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("agent", None)
    (tmp_path / "test_recorded.py").write_text(
        textwrap.dedent(TESTS.format(store=str(store), run=run_id, url=url))
    )
    # The same run as a backend hands it over: an OTLP JSON file, read from pytest's root.
    (tmp_path / "export.json").write_text(json.dumps(collector_json(spans.get_finished_spans())))

    # The stand-in is gone: a request the recording does not answer could not be sent.
    session = run_pytest(tmp_path, "-s")
    out = session.stdout
    assert "PASSED test_recorded.py::test_unchanged" in out, out
    assert f"ANSWER {recorded_answer}" in out
    assert "PASSED test_recorded.py::test_from_a_file_under_the_root" in out, out
    # A changed question is a divergence at the first tool call, shown with its change.
    assert "FAILED test_recorded.py::test_changed_question" in out, out
    assert (
        "FAILED test_recorded.py::test_changed_question - AssertionError: <Divergence: step 0 "
        "(tool:search_docs): argument $.query: Where is order A-1234? → Where is order B-9?>"
    ) in out, out
    # A changed prompt leads with the text that changed (on the summary's line), then the
    # prompt's hash, which only says that something did.
    assert (
        "FAILED test_recorded.py::test_changed_prompt - AssertionError: <Divergence: step 2 "
        "(openai.chat_completions): message 0: …shipping times → …shipping times↵Thanks, Ann; "
        "also differs: prompt hash>"
    ) in out, out
    assert (
        "ERROR test_recorded.py::test_unmarked - Failed: replay_result needs the test marked "
        "@pytest.mark.otel_replay(SOURCE)"
    ) in out
    assert (
        "ERROR test_recorded.py::test_missing_run - Failed: otel-replay: cannot replay "
        "'r_20200101T000000_deadbeef'"
    ) in out
    assert "2 failed, 2 passed, 2 errors" in out, out
    assert "During handling" not in out
    assert "PytestUnknownMarkWarning" not in out + session.stderr


ODD_MARKERS = """
import time
from pathlib import Path

import httpx
import pytest

BUNDLE = {bundle!r}
REQUEST = {request!r}


@pytest.mark.otel_replay(42)
def test_a_number(replay_result):
    pass


@pytest.mark.otel_replay(Path(BUNDLE))
def test_a_path(replay_result):
    httpx.post("http://tools.test/orders", content=REQUEST)
    assert replay_result.identical, replay_result.first_divergence


@pytest.mark.otel_replay(BUNDLE)
class TestMarkedClass:
    @pytest.mark.parametrize("n", [1, 2])
    def test_each(self, replay_result, n):
        httpx.post("http://tools.test/orders", content=REQUEST)
        assert replay_result.identical, replay_result.first_divergence


@pytest.mark.otel_replay(BUNDLE)
def test_unmatched(replay_result):
    httpx.get("http://other.test/x")


def test_after_them_the_world_is_live():
    started = time.time()
    time.sleep(0.05)
    assert time.time() - started >= 0.04
    assert abs(started - time.clock_gettime(time.CLOCK_REALTIME)) < 5
"""


@pytest.mark.subprocess
def test_odd_markers_fail_their_own_set_up_and_the_session_goes_on(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    body = b'{"model":"gpt-4o-mini"}'
    step = recorded_step(
        index=0,
        kind="http",
        endpoint="POST /orders",
        method="POST",
        url="http://tools.test/orders",
        request_body=body,
        request_hash=sha256_tag(body),
        status_code=200,
        response_headers=(("content-type", "application/json"),),
        response_body=b"{}",
        fidelity="exact",
    )
    write_bundle(Run("r_odd_markers", "test", (step,)), bundle, Redactor())
    (tmp_path / "test_odd.py").write_text(ODD_MARKERS.format(bundle=str(bundle), request=body))
    session = run_pytest(tmp_path)
    out = session.stdout
    assert (
        "ERROR test_odd.py::test_a_number - Failed: @pytest.mark.otel_replay takes a source "
        "(a run id, a path, a URL or a Run), got int 42"
    ) in out, out
    assert "AttributeError" not in out
    for passed in ("test_a_path", "TestMarkedClass::test_each[1]", "TestMarkedClass::test_each[2]"):
        assert f"PASSED test_odd.py::{passed}" in out, out
    # An unmatched request (a BaseException) fails its test; the next runs in a live world.
    assert "FAILED test_odd.py::test_unmatched - otel_replay.errors.UnmatchedRequestError" in out
    assert "PASSED test_odd.py::test_after_them_the_world_is_live" in out, out
    assert "1 failed, 4 passed, 1 error" in out, out


LOADED = """
import sys

def test_only_the_plugin_is_loaded():
    ours = sorted(m for m in sys.modules if m.startswith("otel_replay"))
    print("LOADED", ours)
"""


@pytest.mark.subprocess
def test_a_session_without_a_marked_test_loads_only_the_plugin(tmp_path: Path) -> None:
    # pytest loads the plugin in every session and every xdist worker: it must not load the
    # OTel SDK, the instrumentor, jsonschema or the replay until a marked test runs.
    (tmp_path / "test_plain.py").write_text(LOADED)
    out = run_pytest(tmp_path, "-s").stdout
    loaded = next(line for line in out.splitlines() if line.startswith("LOADED"))
    assert loaded == (
        "LOADED ['otel_replay', 'otel_replay._lazy', 'otel_replay.errors', "
        "'otel_replay.testing', 'otel_replay.testing.pytest_plugin']"
    ), out
