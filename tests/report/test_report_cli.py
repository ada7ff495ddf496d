"""``otel-replay report`` in-process on real recordings: what the file holds (every step, each
distinct message once, content redacted as stored, none with --no-content), the sources it
reads, and its one-line errors. The page in a browser: ``test_browser.py``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import otel_replay
from examples.support_agent import CONVERSATION
from otel_replay.runs._handoff import handoff
from otel_replay.step import RunEnd
from otel_replay.store import Store
from otel_replay.testing import CaptureKit
from tests.cli._checks import assert_bad_input, run_cli
from tests.cli._recording import CLAUDE, KEY, SUPPORT, Recorded, record, span_dict
from tests.report._document import document

DATA = Path(__file__).resolve().parents[1] / "replay" / "data"
QUESTION = CONVERSATION[0]
FAILED = "r_20261121T093000_badc0f1g"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    return record(tmp_path_factory.mktemp("report-recorded"))


@pytest.fixture
def store(recorded: Recorded, tmp_path: Path) -> Path:
    return Path(shutil.copytree(recorded.store, tmp_path / "store"))


def written(store: Path, tmp_path: Path, *args: str) -> tuple[str, str]:
    """Run ``report ARGS -o FILE`` on ``store``: the file's text and what was printed."""
    out = tmp_path / "report.html"
    done = run_cli("report", *args, "-o", str(out), "--store", str(store))
    assert done.exit_code == 0, done.output
    return out.read_text(encoding="utf-8"), done.stdout


def test_the_report_holds_every_step_and_each_message_once(store: Path, tmp_path: Path) -> None:
    html, said = written(store, tmp_path, SUPPORT)
    assert said == f"wrote the report of run {SUPPORT} (9 steps) to {tmp_path / 'report.html'}\n"
    page = document(html)
    steps = page["steps"]
    assert [s["index"] for s in steps] == list(range(9))
    assert {s["kind"] for s in steps} == {"llm", "http"}
    assert {s["fidelity"] for s in steps} == {"exact"}
    assert page["rows"] == [{"a": i} for i in range(9)] and page["diff"] is False
    first = steps[0]
    assert (first["name"], first["status"], first["tokens_in"] > 0) == ("gpt-4o-mini", 200, True)
    messages = [page["contents"][i] for i in first["input"]]
    assert messages[-1]["parts"][0]["content"] == QUESTION
    assert page["contents"][first["tools"]][0]["name"] == "lookup_order"  # collapsed in the pane
    # The conversation re-sends its history at every call: each message is in the file once.
    assert html.count(QUESTION) == 1
    later = [s for s in steps if s["kind"] == "llm"][-1]
    assert later["input"][: len(first["input"])] == first["input"]
    assert "<title>otel-replay: run " + SUPPORT + "</title>" in html


def test_content_is_redacted_as_in_the_store(store: Path, tmp_path: Path) -> None:
    html, _ = written(store, tmp_path, SUPPORT)
    assert KEY not in html
    headers = document(html)["contents"][document(html)["steps"][0]["headers"]]
    assert ["authorization", "REDACTED"] in headers[0]


def test_no_content_keeps_only_metadata(store: Path, tmp_path: Path) -> None:
    full, _ = written(store, tmp_path, SUPPORT)
    html, _ = written(store, tmp_path, SUPPORT, "--no-content")
    page = document(html)
    assert page["contents"] == [] and page["content"] is False
    assert [(s["index"], s["kind"], s["status"]) for s in page["steps"]] == [
        (s["index"], s["kind"], s["status"]) for s in document(full)["steps"]
    ]
    data = html.encode()
    # The path of an HTTP call (GET /tools/orders/A-1234) is metadata, its query is not.
    for content in (QUESTION, "Paris", "REDACTED", "lookup_order", "arrived broken"):
        assert content.encode() in full.encode()
        assert content.encode() not in data, content
    assert b"metadata only (--no-content)" in data


def test_a_run_from_spans_alone_is_semantic_and_says_so(tmp_path: Path) -> None:
    source = DATA / "genai_openai_conversations.jsonl"
    out = tmp_path / "semantic.html"
    done = run_cli("report", f"{source}", "-o", str(out))
    if done.exit_code == 2 and "pick one with" in done.stderr:  # several runs: take the first
        run_id = done.stderr.split("pick one with", 1)[1].split(": ", 1)[1].split()[0]
        done = run_cli("report", f"{source}#{run_id.rstrip(',')}", "-o", str(out))
    assert done.exit_code == 0, done.output
    html = out.read_text(encoding="utf-8")
    steps = document(html)["steps"]
    assert steps and {s["fidelity"] for s in steps} == {"semantic"}
    assert f"fidelity: 0 exact, {len(steps)} semantic" in html
    contents = document(html)["contents"]
    assert all(s["input"] and s["output"] for s in steps)  # from the spans' GenAI attributes
    assert "user" in {contents[i]["role"] for i in steps[0]["input"]}


def test_a_bundle_reports_as_the_stored_run(store: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    assert run_cli("export", CLAUDE, str(bundle), "--store", str(store)).exit_code == 0
    from_store, _ = written(store, tmp_path, CLAUDE)
    from_bundle, _ = written(store, tmp_path, str(bundle))
    strip = ("offset_ms",)
    assert [
        {k: v for k, v in s.items() if k not in strip} for s in document(from_bundle)["steps"]
    ] == [{k: v for k, v in s.items() if k not in strip} for s in document(from_store)["steps"]]


def test_a_diff_aligns_the_two_runs(store: Path, tmp_path: Path) -> None:
    html, said = written(store, tmp_path, SUPPORT, "--diff", SUPPORT[:16])  # a prefix
    assert f"the report of run {SUPPORT} against run {SUPPORT} (9 steps)" in said
    page = document(html)
    assert page["diff"] is True and page["first"] is None
    assert {row["status"] for row in page["rows"]} == {"same"}
    assert "identical: every step the same" in html
    html, _ = written(store, tmp_path, SUPPORT, "--diff", CLAUDE)
    page = document(html)
    assert page["first"] == 0 and page["rows"][0]["status"] != "same"
    assert len(page["runs"]) == 2 and page["runs"][1]["id"] == CLAUDE


def test_bad_input_is_one_line(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    line = assert_bad_input(
        run_cli("report", "r_nope", "-o", str(out), "--store", str(store)), "r_nope"
    )
    assert "no run" in line
    missing = tmp_path / "no" / "such" / "dir" / "r.html"
    assert_bad_input(
        run_cli("report", SUPPORT, "-o", str(missing), "--store", str(store)),
        "cannot write the report",
        str(missing.parent),
    )
    assert_bad_input(
        run_cli("report", SUPPORT, "-o", str(tmp_path), "--store", str(store)),
        "is a directory",
    )
    assert_bad_input(run_cli("report", SUPPORT, "--store", str(store)), "-o")
    assert_bad_input(
        run_cli("report", SUPPORT, "--diff", "r_other", "-o", str(out), "--store", str(store)),
        "r_other",
    )
    assert_bad_input(
        run_cli("report", str(tmp_path / "missing.json"), "-o", str(out)), "missing.json"
    )
    assert not out.exists()


def test_replay_checks_the_report_path_before_it_runs_anything(store: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no" / "dir" / "replay.html"
    done = run_cli(
        "replay", SUPPORT, "--store", str(store), "--report", str(missing), "--", "touch", "ran"
    )
    assert_bad_input(done, "cannot write the report", str(missing.parent))
    # No process started: the conftest refuses one in a test not marked subprocess.


def test_a_run_that_failed_before_its_first_call_is_reported(tmp_path: Path) -> None:
    """An agent that raised before its first call leaves a run with no step, which ``show``
    shows: the report renders it too, with its status and error, and no steps."""
    store = tmp_path / "store"
    consumer = handoff().attach()
    try:
        with CaptureKit() as kit:
            with pytest.raises(KeyError), otel_replay.run(name="support-agent", run_id=FAILED):
                raise KeyError("ORDER_DB_URL")
            raw = kit.raw_spans()
            ends = [item for item in consumer.drain() if isinstance(item, RunEnd)]
    finally:
        handoff().detach(consumer)
    with Store.open(store) as opened:
        opened.put(spans=[span_dict(span) for span in raw])
        for end in ends:
            opened.end_run(end)
    shown = run_cli("show", FAILED, "--store", str(store))
    assert shown.exit_code == 0 and "error (KeyError)" in shown.stdout
    html, said = written(store, tmp_path, FAILED)
    assert said.startswith(f"wrote the report of run {FAILED} (0 steps)")
    page = document(html)
    assert page["steps"] == [] and page["rows"] == []
    (run,) = page["runs"]
    assert (run["id"], run["status"], run["error"]) == (FAILED, "error", "KeyError")
    assert "error (KeyError)" in html
