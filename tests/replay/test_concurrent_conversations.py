"""Concurrent conversations: a request that matches no recorded one exactly is paired with the
closest recorded request by content (its own conversation), never with another conversation's
step that happens to hold its place in the order.

``_conversations_agent.py`` (one support agent, four customers at once, two turns each, the
same system prompt for all) is recorded by otel-replay against the stand-in, then replayed
through the CLI with the stand-in stopped: conversation 2 asks its question in other words,
and the conversations start in reverse order.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from examples.standin import StandIn
from otel_replay.replay._model import RecordedStep
from otel_replay.replay.sources import load_run
from tests.export._support import INSTRUMENT, ROOT, subprocess_env
from tests.replay.test_replay_cli import CLI, replay

pytestmark = pytest.mark.subprocess

AGENT = Path(__file__).with_name("_conversations_agent.py")
DEAD = "http://127.0.0.1:9/v1"
RUN = "r_conversations"
CHANGE = "message 1: user: Where is my order A-2003? → user: Where is my parcel A-2003?"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("conversations") / "store"
    with StandIn(event_delay=0.001) as standin:
        subprocess.run(
            [str(INSTRUMENT), sys.executable, str(AGENT), str(ROOT), standin.openai_base_url],
            env=subprocess_env(store, OTEL_REPLAY_RUN_ID=RUN),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
    return store


def _conversation(store: Path, question: str) -> list[RecordedStep]:
    """The recorded steps of the conversation that asked ``question``, in order."""
    steps = load_run(RUN, store=store).steps
    return [s for s in steps if s.request_body is not None and question.encode() in s.request_body]


def test_the_changed_conversation_is_compared_with_its_own_steps(store: Path) -> None:
    first, second = _conversation(store, "Where is my order A-2003?")
    done = replay(store, RUN, sys.executable, str(AGENT), str(ROOT), DEAD, "change=2", "reversed")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert f"diverged — step {first.step.index} differs from the recording" in lines[1]
    at = lines.index(next(x for x in lines if x.startswith("first divergence:")))
    assert lines[at].startswith(
        f"first divergence: step {first.step.index} (openai.chat_completions"
    )
    assert lines[at].endswith("matched by closest")
    assert lines[at + 1].startswith("  prompt hash: sha256:")
    assert lines[at + 2] == f"  {CHANGE}"
    assert lines[at + 3].startswith("request")  # that one change, nothing else
    as_json = replay(
        store, RUN, sys.executable, str(AGENT), str(ROOT), DEAD, "change=2", "reversed",
        flags=["--json"],
    )  # fmt: skip
    report = json.loads(as_json.stdout)
    changed = [s for s in report["steps"] if s["changes"]]
    assert [s["recorded"] for s in changed] == [first.step.index, second.step.index], (
        as_json.stdout + as_json.stderr
    )
    # The opening is asked while every opening is left, so content decides; the second turn
    # may come last of all, when the one step left is served by position.
    assert changed[0]["how"] == "closest" and changed[1]["how"] in ("closest", "position")
    for step in changed:
        prompt, only = step["changes"]
        assert prompt["field"] == "prompt hash"
        assert (only["field"], only["recorded"], only["replayed"]) == (
            "message 1",
            "user: Where is my order A-2003?",
            "user: Where is my parcel A-2003?",
        )


def test_an_unmatched_request_names_its_own_conversation_first(store: Path) -> None:
    """Asked once more when every step has been served, the changed opening matches nothing:
    the error's closest recorded request is its own conversation's, though every conversation
    has the same system prompt and the others differ from it in one field too."""
    first, _ = _conversation(store, "Where is my order A-2003?")
    done = replay(store, RUN, sys.executable, str(AGENT), str(ROOT), DEAD, "change=2", "again")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "closest recorded requests:" in done.stderr
    lines = done.stderr.splitlines()
    at = lines.index("closest recorded requests:")
    assert lines[at + 1] == (
        f"  step {first.step.index} openai.chat_completions, served 1 time(s): "
        "differs in $.messages[1].content"
    )


def _diff(store: Path, a: str, b: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), "diff", a, b, "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )


def _replayed(store: Path, *options: str) -> str:
    done = replay(store, RUN, sys.executable, str(AGENT), str(ROOT), DEAD, *options)
    found = re.search(r"recorded as run (r_\S+)", done.stdout)
    assert found is not None, done.stdout + done.stderr
    return found.group(1)


def test_diff_pairs_each_request_with_its_own_whatever_the_order(store: Path) -> None:
    """Started in reverse order the replay is identical, and so says ``diff``; with
    conversation 2 changed too, ``diff`` names its two steps and that change alone."""
    same = _replayed(store, "reversed")
    done = _diff(store, RUN, same)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "identical: 8 steps" in done.stdout

    first, second = _conversation(store, "Where is my order A-2003?")
    done = _diff(store, RUN, _replayed(store, "reversed", "change=2"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "8 aligned steps: 6 same, 2 changed, 0 removed, 0 added"
    rows = [line.split() for line in done.stdout.splitlines() if "changed:" in line]
    assert [row[0] for row in rows] == [str(first.step.index), str(second.step.index)]
    assert f"  {CHANGE}" in done.stdout.splitlines()
