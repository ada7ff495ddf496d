"""``otel-replay triage`` on real runs that fail in every way its rules know (``_recorded``):
each rule's labels, the summary, the labels kept in the store for ``runs --failed
--category``, and bad input."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from otel_replay.store import Store
from otel_replay.store._format import run_dir
from tests.cli._checks import assert_bad_input
from tests.store._data import chat_bodies, make_step
from tests.triage._recorded import (
    BROKEN_CONTRACT,
    CUT_BODIES,
    DRIFT,
    GAPPY,
    HALLUCINATED,
    HEALTHY,
    LOOPING,
    LOOPING_TOOL,
    NO_CONTENT,
    OVERFLOWING,
    SAMPLED_OUT,
    Recorded,
)

Invoke = Callable[..., Result]


def triaged(invoke: Invoke, store: Path, *args: str) -> dict[str, Any]:
    """``otel-replay triage ARGS --json`` of ``store``: its document, runs by id."""
    result = invoke("triage", *args, "--json", "--store", str(store))
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    document["by_run"] = {run["run_id"]: run for run in document["runs"]}
    return document


def steps(run: dict[str, Any]) -> dict[int, tuple[str, str, str]]:
    """A run's step labels: step -> (category, severity, rule)."""
    return {x["step"]: (x["category"], x["severity"], x["rule"]) for x in run["steps"]}


def own(run: dict[str, Any]) -> tuple[str, str, str] | None:
    label = run["label"]
    return None if label is None else (label["category"], label["severity"], label["rule"])


@pytest.fixture
def document(invoke: Invoke, store: Path) -> dict[str, Any]:
    return triaged(invoke, store)


def test_environment_drift_is_every_failure_of_the_world_but_a_429_a_retry_got_over(
    document: dict[str, Any],
) -> None:
    run = document["by_run"][DRIFT]
    drift, warning = "environment_drift", "warning"
    assert steps(run) == {
        # step 0: a 429 the SDK's retry (step 1) got over: not a failure
        2: (drift, warning, "http_5xx"),  # the tool backend's 503
        3: (drift, warning, "timeout"),
        4: (drift, warning, "connection"),
        5: (drift, warning, "rate_limited"),  # a 429 past the SDK's retries
        6: (drift, warning, "rate_limited"),
        7: (drift, warning, "http_5xx"),
        8: (drift, warning, "http_5xx"),  # the provider's last 503 ended the run
    }
    assert own(run) == (drift, "critical", "http_5xx")
    assert run["label"]["reason"] == "step 8: HTTP 503 from openai.chat_completions"
    reasons = {x["step"]: x["reason"] for x in run["steps"]}
    assert reasons[2] == "HTTP 503 from GET /tools/orders/A-1234"
    assert reasons[3] == "openai.chat_completions timed out (httpx2.ReadTimeout)"
    assert "httpx.ConnectError" in reasons[4]
    assert run["failed"] and run["status"] == "error"


def test_model_hallucination_is_a_tool_not_offered_bad_arguments_or_json(
    document: dict[str, Any],
) -> None:
    run = document["by_run"][HALLUCINATED]
    wrong = ("model_hallucination", "error")
    assert steps(run) == {
        0: (*wrong, "unoffered_tool"),
        2: (*wrong, "invalid_arguments"),
        5: (*wrong, "unparsable_arguments"),
        7: (*wrong, "unoffered_tool"),  # Anthropic Messages
    }
    reasons = {x["step"]: x["reason"] for x in run["steps"]}
    assert reasons[0] == (
        "the model called cancel_order, a tool the request did not offer "
        "(offered: get_weather, lookup_order, refund_order)"
    )
    assert reasons[2] == (
        "the model's arguments for lookup_order break its schema at $.order_id: "
        "['B-5678'] is not of type 'string'"
    )
    assert reasons[5] == "the model's arguments for lookup_order are not JSON: '{\"order_id'"
    # The agent got over each (it told the model), so the run ended well, yet failed.
    assert run["status"] == "ok" and run["failed"]
    assert own(run) == (*wrong, "unoffered_tool")


def test_tool_exhaustion_is_the_same_call_three_times_in_a_row(document: dict[str, Any]) -> None:
    # Tools over HTTP: the calls the model asked for; the agent gave up (error).
    looping = document["by_run"][LOOPING]
    assert steps(looping) == {4: ("tool_exhaustion", "error", "repeated_call")}
    assert looping["label"]["reason"] == (
        "step 4: lookup_order called 6 times in a row with the same arguments "
        "(steps 0, 2, 4, 6, 8, 10)"
    )
    assert own(looping) == ("tool_exhaustion", "critical", "repeated_call")
    # Tool steps (@otel_replay.tool): the calls made; the agent answered anyway (ok).
    tool = document["by_run"][LOOPING_TOOL]
    assert steps(tool) == {5: ("tool_exhaustion", "error", "repeated_call")}
    assert own(tool) == ("tool_exhaustion", "error", "repeated_call")
    assert "(steps 1, 3, 5, 7, 9)" in tool["label"]["reason"]


def test_retry_overflow_is_counted_as_the_budget_stamped_it(document: dict[str, Any]) -> None:
    run = document["by_run"][OVERFLOWING]
    assert steps(run) == {
        0: ("environment_drift", "warning", "tool_error"),  # attempts the budget retried
        1: ("environment_drift", "warning", "tool_error"),
        2: ("retry_overflow", "error", "stamped"),
    }
    assert own(run) == ("retry_overflow", "critical", "stamped")
    assert run["label"]["reason"] == (
        "step 2: attempt 3 of tool fetch_forecast failed (ConnectionError): its retry budget "
        "ran out"
    )


def test_a_contract_violation_is_a_tool_contract_error(document: dict[str, Any]) -> None:
    run = document["by_run"][BROKEN_CONTRACT]
    assert steps(run) == {0: ("contract_violation", "error", "tool_contract")}
    assert own(run) == ("contract_violation", "critical", "tool_contract")
    assert run["label"]["reason"] == (
        "step 0: tool 'count_orders': invalid_result at $: 'several' is not of type 'integer'"
    )


def test_runs_that_did_nothing_wrong_get_no_label_and_the_summary_counts_by_category(
    document: dict[str, Any],
) -> None:
    for run_id in (HEALTHY, CUT_BODIES, NO_CONTENT, GAPPY):  # in the store: exact, ok
        run = document["by_run"][run_id]
        assert (run["label"], run["steps"], run["cold"], run["failed"]) == (None, [], [], False)
    assert SAMPLED_OUT not in document["by_run"]  # the store dropped it
    summary = {row["category"]: row for row in document["summary"]}
    assert list(summary) == [
        "contract_violation",
        "environment_drift",
        "model_hallucination",
        "tool_exhaustion",
        "retry_overflow",
    ]
    assert summary["environment_drift"] == {
        "category": "environment_drift",
        "severity": "critical",
        "runs": 2,
        "steps": 9,
        "examples": [OVERFLOWING, DRIFT],  # newest first
    }
    assert summary["tool_exhaustion"]["examples"] == [LOOPING_TOOL, LOOPING]
    assert document["uncategorised"] == []
    assert document["labels_written"] is True


def test_the_text_output_sums_up_by_category_then_lists_the_runs(
    invoke: Invoke, store: Path
) -> None:
    result = invoke("triage", "--store", str(store))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = lines[0].split()
    assert header == ["category", "severity", "runs", "steps", "example", "runs"]
    rows = {line.split()[0]: line.split()[1:4] for line in lines[2:7]}
    assert rows["model_hallucination"] == ["error", "1", "4"]
    assert rows["retry_overflow"] == ["critical", "1", "1"]
    drift = next(line for line in lines if line.startswith(DRIFT))
    assert "error (openai.InternalServerError)" in drift
    assert "environment_drift critical" in drift
    assert "step 8: HTTP 503 from openai.chat_completions (+6 more steps labelled)" in drift
    assert lines[-2] == "10 runs triaged (in the last 7d), 6 failed, 6 labelled, 0 cold cases"
    assert lines[-1] == (
        f"labels kept in the store at {store}: otel-replay runs --failed --category C"
    )


def _listed(invoke: Invoke, store: Path, *args: str) -> list[str]:
    result = invoke("runs", "--json", *args, "--store", str(store))
    assert result.exit_code == 0, result.output
    return [run["run_id"] for run in json.loads(result.stdout)]


def test_runs_failed_and_category_filter_on_the_labels_kept_in_the_store(
    invoke: Invoke, store: Path
) -> None:
    # Not triaged yet: the runs that ended in error, and no category.
    assert _listed(invoke, store, "--failed") == [BROKEN_CONTRACT, OVERFLOWING, LOOPING, DRIFT]
    assert _listed(invoke, store, "--category", "model_hallucination") == []
    triaged(invoke, store)
    # Triaged: the runs that got over an error of theirs are failed runs too.
    failed = [BROKEN_CONTRACT, OVERFLOWING, LOOPING_TOOL, LOOPING, HALLUCINATED, DRIFT]
    assert _listed(invoke, store, "--failed") == failed
    assert _listed(invoke, store, "--category", "model_hallucination") == [HALLUCINATED]
    # A step's label counts: the overflowing run's retried attempts are drift too.
    assert _listed(invoke, store, "--failed", "--category", "environment_drift") == [
        OVERFLOWING,
        DRIFT,
    ]
    table = invoke("runs", "--category", "tool_exhaustion", "--store", str(store)).stdout
    assert table.splitlines()[-1] == f"2 tool_exhaustion runs in {store}"


def _files(root: Path, *tops: str) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for top in tops
        for p in sorted((root / top).rglob("*"))
        if p.is_file()
    }


def test_labels_survive_an_index_rebuild_and_never_touch_the_recordings(
    invoke: Invoke, store: Path
) -> None:
    recordings = _files(store, "runs", "objects")
    first = triaged(invoke, store)
    assert _files(store, "runs", "objects") == recordings
    assert len(list((store / "labels").iterdir())) == 6  # one file per labelled run

    result = invoke("verify", "--rebuild-index", "--store", str(store))
    assert result.exit_code == 0, result.output
    assert _listed(invoke, store, "--category", "tool_exhaustion") == [LOOPING_TOOL, LOOPING]
    (store / "index.sqlite").unlink()  # lost altogether
    for name in ("index.sqlite-wal", "index.sqlite-shm"):
        (store / name).unlink(missing_ok=True)
    with Store.open(store, create=False) as opened:
        labels = opened.labels()
    assert set(labels) == {BROKEN_CONTRACT, OVERFLOWING, LOOPING_TOOL, LOOPING, HALLUCINATED, DRIFT}
    assert [(x.step, x.category) for x in labels[OVERFLOWING]] == [
        (None, "retry_overflow"),
        (0, "environment_drift"),
        (1, "environment_drift"),
        (2, "retry_overflow"),
    ]
    # Triaged again: the same labels, not twice.
    again = triaged(invoke, store)
    assert [r["label"] for r in again["runs"]] == [r["label"] for r in first["runs"]]
    with Store.open(store, create=False) as opened:
        assert opened.labels() == labels
    assert _files(store, "runs", "objects") == recordings


def test_a_run_removed_takes_its_labels_with_it(invoke: Invoke, store: Path) -> None:
    triaged(invoke, store)
    with Store.open(store, create=False) as opened:
        opened.discard(LOOPING)
        assert LOOPING not in opened.labels()
    assert len(list((store / "labels").iterdir())) == 5
    (store / "index.sqlite").unlink()
    with Store.open(store, create=False) as opened:
        assert LOOPING not in opened.labels() and DRIFT in opened.labels()


def test_runs_named_are_triaged_alone_each_once(invoke: Invoke, store: Path) -> None:
    named = triaged(invoke, store, DRIFT[:20], "latest", DRIFT)
    assert [r["run_id"] for r in named["runs"]] == [GAPPY, DRIFT]
    assert len(triaged(invoke, store, "--since", "1h")["runs"]) == 10
    assert triaged(invoke, store, DRIFT, "--since", "2w")["by_run"].keys() == {DRIFT}


def test_a_damaged_run_is_named_and_the_others_are_triaged(
    invoke: Invoke, store: Path, tmp_path: Path
) -> None:
    """A run whose record file is cut short (once: the whole triage stopped on it, no run
    triaged): every other run is triaged and printed, then one line names the damaged run,
    exit 2."""
    copy = tmp_path / "damaged"
    shutil.copytree(store, copy)
    for record in (copy / run_dir(DRIFT)).glob("*.rec"):
        record.write_bytes(record.read_bytes()[:100])
    result = invoke("triage", "--json", "--store", str(copy))
    assert result.exit_code == 2, result.output
    triaged_ids = {run["run_id"] for run in json.loads(result.stdout)["runs"]}
    assert DRIFT not in triaged_ids and {HEALTHY, LOOPING, GAPPY} <= triaged_ids
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"Error: run {DRIFT} could not be read, so not triaged (record file ")
    assert line.endswith("); otel-replay verify names the damage")


def test_bad_input_is_one_line_and_exit_2(invoke: Invoke, store: Path, tmp_path: Path) -> None:
    assert_bad_input(invoke("triage", "r_nope", "--store", str(store)), "r_nope")
    assert_bad_input(invoke("triage", "--since", "a week", "--store", str(store)), "--since")
    assert_bad_input(invoke("triage", "--since", "0d", "--store", str(store)), "--since")
    for age in ("99999999999d", "300000w"):  # once an internal error (a year out of range)
        assert_bad_input(invoke("triage", "--since", age, "--store", str(store)), "--since")
    huge = "99999999999999999999"  # once an internal error (too large for SQLite)
    assert_bad_input(invoke("runs", "-n", huge, "--store", str(store)), "--limit")
    missing = tmp_path / "missing.jsonl"
    assert_bad_input(invoke("triage", str(missing), "--store", str(store)), str(missing))
    assert_bad_input(invoke("triage", "--store", str(tmp_path / "none")), "none")
    assert_bad_input(invoke("runs", "--category", "typo", "--store", str(store)), "typo")


def test_a_golden_bundle_is_triaged_as_its_run(invoke: Invoke, store: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "golden" / "drift"
    exported = invoke("export", DRIFT, str(bundle), "--store", str(store))
    assert exported.exit_code == 0, exported.output
    from_store = triaged(invoke, store, DRIFT)["by_run"][DRIFT]
    from_bundle = triaged(invoke, store, str(bundle))["by_run"][DRIFT]
    assert from_bundle["steps"] == from_store["steps"]
    assert from_bundle["cold"] == []
    assert len(list((store / "labels").iterdir())) == 1  # the store's run's, not the bundle's


def test_a_trace_source_is_triaged_without_a_store(
    invoke: Invoke, recorded: Recorded, tmp_path: Path
) -> None:
    document = triaged(invoke, tmp_path / "no-store", str(recorded.traces))
    assert document["store"] is None and document["labels_written"] is False
    assert set(document["by_run"]) == {CUT_BODIES, NO_CONTENT, SAMPLED_OUT, GAPPY}


FOREIGN = Path(__file__).parents[1] / "replay" / "data" / "genai_openai_conversations.jsonl"
"""Traces of the official openai instrumentation alone (no otel-replay), recorded for real."""


def test_cold_cases_say_what_is_missing_and_the_settings_that_would_keep_it(
    invoke: Invoke, store: Path, recorded: Recorded
) -> None:
    document = triaged(invoke, store, str(recorded.traces), str(FOREIGN))
    cold = {
        run_id: {case["kind"]: case for case in run["cold"]}
        for run_id, run in document["by_run"].items()
    }
    with Store.open(store, create=False) as opened:
        (step,) = opened.steps(CUT_BODIES)
    largest = max(step.request_size, step.response_size)
    assert list(cold[CUT_BODIES]) == ["no_bytes"]
    assert cold[CUT_BODIES]["no_bytes"]["settings"] == [
        "OTEL_TRACES_EXPORTER=otlp,replay",
        f"OTEL_REPLAY_INLINE_LIMIT={largest}",
    ]
    assert cold[CUT_BODIES]["no_bytes"]["detail"].startswith("no recorded bytes for step 0 of 1")
    # Content capture off: no bytes and no messages: it cannot even be rebuilt.
    assert document["by_run"][NO_CONTENT]["status"] == "unbuilt"
    assert list(cold[NO_CONTENT]) == ["no_content"]
    assert cold[NO_CONTENT]["no_content"]["settings"] == [
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY"
    ]
    # Sampled out of the store (OTEL_REPLAY_SAMPLE_OK=0), its bodies too large for the spans.
    assert list(cold[SAMPLED_OUT]) == ["no_bytes", "sampled_out"]
    assert cold[SAMPLED_OUT]["sampled_out"]["settings"] == [
        "OTEL_REPLAY_SAMPLE_OK=1",
        "OTEL_TRACES_EXPORTER=otlp,replay",
    ]
    # A sampler dropped the tool calls' spans; the store holds the whole run.
    assert list(cold[GAPPY]) == ["sampled_out"]
    assert cold[GAPPY]["sampled_out"]["detail"] == (
        "missing from the trace: step 1 (a sampler dropped their spans); the store holds "
        "them: triage or replay the run by its id"
    )
    (foreign,) = set(cold) - {CUT_BODIES, NO_CONTENT, SAMPLED_OUT, GAPPY}
    assert list(cold[foreign]) == ["foreign", "no_commit"]
    assert cold[foreign]["no_commit"]["settings"] == [
        "OTEL_REPLAY_COMMIT=<revision> (or record from a git checkout)"
    ]
    assert not (store / "labels").exists()  # runs of a trace source are not the store's
    assert document["labels_written"] is False

    text = invoke("triage", str(recorded.traces), "--store", str(store)).stdout
    assert "Cold cases: runs that cannot be replayed exactly" in text
    (row,) = [line for line in text.splitlines() if line.startswith(NO_CONTENT)]
    assert "no_content" in row and "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in row
    assert text.splitlines()[-1] == (
        "4 runs triaged (as named), 0 failed, 0 labelled, 4 cold cases"
    )


def test_a_step_a_kill_cut_off_is_not_environment_drift(invoke: Invoke, tmp_path: Path) -> None:
    """SIGTERM (a deploy, a supervisor's stop) cuts the call in flight: that is the process's
    end, not the network's. Once it was labelled `connection`, "failed to connect or lost the
    connection (SIGTERM)", and every rollout swelled environment_drift; a real connection
    error still is."""
    now = time.time_ns()
    (first, answer), (second, _) = chat_bodies(2)
    with Store.open(tmp_path / "store") as opened:
        for run_id, error in (("r_killed", "SIGTERM"), ("r_hung_up", "SIGHUP"),
                              ("r_offline", "httpx.ConnectError")):  # fmt: skip
            opened.put(
                [
                    make_step(run_id, 0, first, answer, start_ns=now),
                    make_step(run_id, 1, second, None, error_type=error, start_ns=now),
                ]
            )
            opened.keep_open(run_id)
    document = triaged(invoke, tmp_path / "store")["by_run"]
    assert steps(document["r_killed"]) == {} and steps(document["r_hung_up"]) == {}
    assert steps(document["r_offline"]) == {1: ("environment_drift", "warning", "connection")}


def test_since_leaves_out_the_runs_that_started_before(invoke: Invoke, tmp_path: Path) -> None:
    """The foreign traces were recorded once, long enough ago."""
    everything = triaged(invoke, tmp_path / "no-store", str(FOREIGN))
    assert len(everything["runs"]) == 1
    assert triaged(invoke, tmp_path / "no-store", str(FOREIGN), "--since", "1h")["runs"] == []


def test_show_gives_a_triaged_runs_labels_and_marks_its_labelled_steps(
    invoke: Invoke, store: Path
) -> None:
    def shown(run_id: str) -> dict[str, Any]:
        result = invoke("show", run_id, "--json", "--store", str(store))
        assert result.exit_code == 0, result.output
        document: dict[str, Any] = json.loads(result.stdout)
        return document

    def marked(document: dict[str, Any]) -> dict[int, list[tuple[str, str, str]]]:
        return {
            step["index"]: [(x["category"], x["severity"], x["rule"]) for x in step["labels"]]
            for step in document["steps"]
            if "labels" in step
        }

    untriaged = shown(DRIFT)
    assert untriaged["label"] is None and marked(untriaged) == {}
    triaged(invoke, store)
    drift = shown(DRIFT)
    assert drift["label"] == {
        "step": None,
        "category": "environment_drift",
        "severity": "critical",
        "rule": "http_5xx",
        "reason": "step 8: HTTP 503 from openai.chat_completions",
    }
    warning = ("environment_drift", "warning")
    assert marked(drift) == {
        2: [(*warning, "http_5xx")],
        3: [(*warning, "timeout")],
        4: [(*warning, "connection")],
        5: [(*warning, "rate_limited")],
        6: [(*warning, "rate_limited")],
        7: [(*warning, "http_5xx")],
        8: [(*warning, "http_5xx")],
    }
    assert shown(HEALTHY)["label"] is None and marked(shown(HEALTHY)) == {}
    # The text: the run's label under its header, a label column, each label's reason.
    result = invoke("show", OVERFLOWING, "--store", str(store), env={"COLUMNS": "250"})
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert lines[1] == (
        "label: retry_overflow critical: step 2: attempt 3 of tool fetch_forecast failed "
        "(ConnectionError): its retry budget ran out"
    )
    assert lines[2].split()[-1] == "label"
    rows = [line for line in lines if line[:1].isdigit()]
    assert [row.split("   ")[-1] for row in rows] == [
        "environment_drift warning",
        "environment_drift warning",
        "retry_overflow error",
    ]
    drift = "environment_drift warning (tool_error): tool fetch_forecast raised ConnectionError"
    assert lines[-3:] == [
        f"step 0: {drift}",
        f"step 1: {drift}",
        "step 2: retry_overflow error (stamped): attempt 3 of tool fetch_forecast failed "
        "(ConnectionError): its retry budget ran out",
    ]
