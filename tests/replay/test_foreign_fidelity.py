"""Runs written by other instrumentations replay without a divergence that is not there.

* genai-openai: ``data/genai_openai_*.jsonl`` were written by the real
  opentelemetry-instrumentation-genai-openai (content on spans) recording the programs against
  the stand-in (``_record_genai_openai.py`` made them; the instrumentation cannot be installed
  beside openai-v2). It writes ``"name": null`` in every message, a tool call before the text
  of a turn, and the ``developer`` role as it is: none of it is a difference.
* openai-v2: opentelemetry-instrumentation-openai-v2, recorded here under
  ``opentelemetry-instrument``, content on spans, OTLP to a real receiver.

Each replays through the CLI with the stand-in stopped; a conversation changed on replay is
reported at its own step with the one change made.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from examples.otlp_sink import OtlpSink
from examples.standin import StandIn
from otel_replay.replay.sources import load_run, load_sources
from tests.export._support import INSTRUMENT, ROOT, instrumentations, subprocess_env
from tests.replay.test_foreign_runs import _lines
from tests.replay.test_replay_cli import CLI, replay

pytestmark = pytest.mark.subprocess

DATA = Path(__file__).with_name("data")
HERE = Path(__file__).parent
CONCURRENT = HERE / "_concurrent_agent.py"
CONVERSATIONS = HERE / "_conversations_agent.py"
DEAD = "http://127.0.0.1:9/v1"
CHANGE = "message 1: user: Where is my order A-2003? → user: Where is my parcel A-2003?"


def _answers(stdout: str) -> Any:
    line = next(x for x in reversed(stdout.splitlines()) if x.startswith('{"answers"'))
    return json.loads(line)["answers"]


@pytest.fixture(scope="module")
def openai_v2(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """The conversations recorded by openai-v2 alone: the OTLP JSON file and the answers."""
    tmp = tmp_path_factory.mktemp("openai-v2")
    with StandIn(event_delay=0.001) as standin, OtlpSink() as sink:
        env = subprocess_env(
            tmp / "unused-store",
            OTEL_SERVICE_NAME="conversations",
            OTEL_TRACES_EXPORTER="otlp",
            OTEL_EXPORTER_OTLP_ENDPOINT=sink.grpc_endpoint,
            OTEL_EXPORTER_OTLP_INSECURE="true",
            **instrumentations("openai", ours=False),
            OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai_latest_experimental",
            OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="SPAN_ONLY",
        )
        done = subprocess.run(
            [
                str(INSTRUMENT),
                sys.executable,
                str(CONVERSATIONS),
                str(ROOT),
                standin.openai_base_url,
            ],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        sink.wait_for_spans(8, 10)
        bodies = [r.body for r in sink.requests() if r.signal == "traces"]
    path = tmp / "openai_v2_conversations.jsonl"
    path.write_text(_lines(bodies))
    return path, _answers(done.stdout)


def _source(name: str, openai_v2: tuple[Path, Any]) -> tuple[Path, Any]:
    if name == "openai-v2":
        return openai_v2
    path = DATA / "genai_openai_conversations.jsonl"
    return path, json.loads(path.with_suffix(".answers.json").read_text())


def test_genai_openai_twelve_concurrent_calls_replay_identical(tmp_path: Path) -> None:
    path = DATA / "genai_openai_asyncio.jsonl"
    recorded = json.loads(path.with_suffix(".answers.json").read_text())
    run = load_run(str(path))
    assert len(run.steps) == 12 and {s.fidelity for s in run.steps} == {"semantic"}
    assert all('"name":null' in s.attributes["gen_ai.input.messages"] for s in run.steps)
    done = replay(
        tmp_path / "store", str(path), sys.executable, str(CONCURRENT), str(ROOT), DEAD, "asyncio"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert _answers(done.stdout) == recorded and len(recorded) == 12
    assert ": identical" in done.stdout
    assert "matched: messages 12;" in done.stdout
    assert "prompt hash" not in done.stdout


@pytest.mark.parametrize("producer", ["genai-openai", "openai-v2"])
def test_concurrent_conversations_replay_identical(
    producer: str, openai_v2: tuple[Path, Any], tmp_path: Path
) -> None:
    """Two turns each: a developer or system prompt, the model's tool call and the tool's
    result in the history, as each producer writes them."""
    path, recorded = _source(producer, openai_v2)
    done = replay(
        tmp_path / "store", str(path), sys.executable, str(CONVERSATIONS), str(ROOT), DEAD
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert _answers(done.stdout) == recorded and len(recorded) == 4
    assert ": identical" in done.stdout
    assert "matched: messages 8;" in done.stdout


@pytest.mark.parametrize("producer", ["genai-openai", "openai-v2"])
def test_a_changed_conversation_is_reported_at_its_own_step(
    producer: str, openai_v2: tuple[Path, Any], tmp_path: Path
) -> None:
    """Conversation 2 asks in other words, the conversations start in reverse order: the first
    divergence is conversation 2's first step, with the one message changed."""
    path, _ = _source(producer, openai_v2)
    run = load_run(str(path))
    (first,) = [
        s
        for s in run.steps
        if "A-2003" in s.attributes["gen_ai.input.messages"]
        and len(json.loads(s.attributes["gen_ai.input.messages"])) == 2
    ]
    done = replay(
        tmp_path / "store", str(path), sys.executable, str(CONVERSATIONS), str(ROOT), DEAD,
        "change=2", "reversed",
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"diverged — step {first.step.index} differs from the recording" in done.stdout
    lines = done.stdout.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("first divergence:"))
    assert re.match(rf"first divergence: step {first.step.index} \(.*matched by closest", lines[at])
    assert (
        lines[at + 1]
        == "  message 1: user: Where is my order A-2003? → user: Where is my parcel A-2003?"
    )
    assert not lines[at + 2].startswith("  ")  # the one change
    # The changed conversation's second turn may come last of all: the one step left is
    # served by position (tests/replay/test_concurrent_conversations.py says why).
    assert re.search(
        r"matched: (closest 2, messages 6|closest 1, messages 6, position 1);", done.stdout
    )


def test_diff_of_an_imported_run_and_its_replay_is_identical(tmp_path: Path) -> None:
    """``diff`` compares the imported spans (no request bytes) with the replay's exact steps
    by what they say, either way round; a changed conversation shows its message, not a
    hash."""
    store = tmp_path / "store"
    path = DATA / "genai_openai_conversations.jsonl"
    (run_id,) = [loaded.run.run_id for loaded in load_sources(str(path))]
    imported = subprocess.run(
        [str(CLI), "import", str(path), "--store", str(store)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert run_id in imported.stdout

    def replayed(*options: str) -> str:
        done = replay(store, run_id, sys.executable, str(CONVERSATIONS), str(ROOT), DEAD, *options)
        found = re.search(r"recorded as run (r_\S+)", done.stdout)
        assert found is not None, done.stdout + done.stderr
        return found.group(1)

    def diff(a: str, b: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(CLI), "diff", a, b, "--store", str(store)],
            capture_output=True, text=True, timeout=60, check=False,
            env={**os.environ, "COLUMNS": "200"},
        )  # fmt: skip

    same = replayed("reversed")
    for a, b in ((run_id, same), (same, run_id)):
        done = diff(a, b)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "identical: 8 steps" in done.stdout
    done = diff(run_id, replayed("change=2", "reversed"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "request hash" not in done.stdout and "prompt hash" not in done.stdout
    assert f"  {CHANGE}" in done.stdout.splitlines(), done.stdout
