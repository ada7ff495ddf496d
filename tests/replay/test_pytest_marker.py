"""A recorded run as a pytest regression test: ``@pytest.mark.otel_replay(SOURCE)`` and the
``replay_result`` fixture, in a pytest session of its own that loads the plugin as a user's
does (its entry point), with the provider gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from examples.standin import StandIn
from tests.export._support import Pipeline
from tests.replay.conftest import collector_json

AGENT = """
import openai
import otel_replay

@otel_replay.tool
def search_docs(query: str) -> list[str]:
    return [f"the page about {query}"]

def run_agent(base_url: str, question: str = "Where is order A-1234?") -> str:
    client = openai.OpenAI(base_url=base_url, api_key="sk-marker-not-a-secret", max_retries=0)
    docs = search_docs(question) + search_docs("shipping times")
    reply = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": question + "\\n" + "\\n".join(docs)}],
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
    session = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-s", "-q"],
        check=False,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "400"},  # the summary's lines uncut
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = session.stdout
    assert "PASSED test_recorded.py::test_unchanged" in out, out
    assert f"ANSWER {recorded_answer}" in out
    assert "PASSED test_recorded.py::test_from_a_file_under_the_root" in out, out
    # A changed question is a divergence at the first tool call, shown with its change.
    assert "FAILED test_recorded.py::test_changed_question" in out, out
    assert (
        "AssertionError: <Divergence: step 0 differs from the recording (TOOL "
        "tool:search_docs): argument $.query: Where is order A-1234? → Where is order B-9?>"
    ) in out, out
    assert (
        "ERROR test_recorded.py::test_unmarked - Failed: replay_result needs the test marked "
        "@pytest.mark.otel_replay(SOURCE)"
    ) in out
    assert (
        "ERROR test_recorded.py::test_missing_run - Failed: otel-replay: cannot replay "
        "'r_20200101T000000_deadbeef'"
    ) in out
    assert "1 failed, 2 passed, 2 errors" in out, out
    assert "During handling" not in out
    assert "PytestUnknownMarkWarning" not in out + session.stderr
