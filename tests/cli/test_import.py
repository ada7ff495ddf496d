"""``otel-replay import SOURCE``: OTLP runs into the store, recorded bytes as fixtures,
semantic steps as spans only, idempotent, one-line errors."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from otel_replay._canonical import sha256_tag
from otel_replay.redact import Redactor
from otel_replay.replay.sources import load_run, write_bundle
from otel_replay.step import RunEnd
from otel_replay.store import Store
from tests.cli._checks import assert_bad_input
from tests.replay.conftest import (
    CLAUDE,
    ERRORS,
    LARGE,
    SUPPORT,
    Recorded,
    assert_matches_wire,
    collector_json,
    one_span_per_line,
    protobuf_json,
    record,
    run_spans,
)
from tests.store._data import chat_bodies, make_step

Invoke = Callable[..., Result]


@pytest.fixture(scope="session")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """Real recordings (see ``tests/replay/conftest.py``), made once per session."""
    return record(tmp_path_factory.mktemp("import-recorded"))


@pytest.fixture
def traces(recording: Recorded, tmp_path: Path) -> Path:
    """The otel-replay runs as the Collector's file exporter writes them."""
    path = tmp_path / "traces.json"
    path.write_bytes(one_span_per_line(recording.raw, collector_json))
    return path


def test_import_a_collector_file_into_a_new_store(
    invoke: Invoke, recording: Recorded, traces: Path, tmp_path: Path
) -> None:
    target = tmp_path / "imported"
    result = invoke("import", str(traces), "--store", str(target))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"{SUPPORT}: imported 9 steps (9 exact, 0 semantic), 9 stored with their bytes",
        f"{CLAUDE}: imported 1 step (1 exact, 0 semantic), 1 stored with their bytes",
        f"{ERRORS}: imported 3 steps (3 exact, 0 semantic), 3 stored with their bytes",
        f"{LARGE}: imported 1 step (0 exact, 1 semantic), 0 stored with their bytes",
        f"4 runs imported into {target}",
    ]
    for run_id in (SUPPORT, CLAUDE):
        run = load_run(run_id, store=str(target))
        assert run.source == f"store {target}"
        assert_matches_wire(run, recording)
        assert run.seed is not None and run.commit is not None
    with Store.open(target, create=False) as store:
        assert [info.run_id for info in store.runs()] == [SUPPORT, CLAUDE, ERRORS, LARGE]
        assert len(store.steps(SUPPORT)) == 9
        assert store.steps(LARGE) == []  # a synthesised response is never stored as recorded
    (large,) = load_run(LARGE, store=str(target)).steps
    assert large.fidelity == "semantic"
    shown = invoke("show", SUPPORT, "--store", str(target))
    assert shown.exit_code == 0 and "lookup_order" in shown.stdout


def test_importing_twice_changes_nothing(invoke: Invoke, traces: Path, tmp_path: Path) -> None:
    target = tmp_path / "imported"
    assert invoke("import", f"{traces}#{CLAUDE}", "--store", str(target)).exit_code == 0
    before = sorted(p.relative_to(target) for p in target.rglob("*") if "index" not in p.name)
    again = invoke("import", f"{traces}#{CLAUDE}", "--store", str(target))
    assert again.exit_code == 0
    assert again.stdout.splitlines() == [
        f"{CLAUDE}: already in the store, 1 step (1 exact, 0 semantic); nothing changed",
        f"0 runs imported into {target}",
    ]
    after = sorted(p.relative_to(target) for p in target.rglob("*") if "index" not in p.name)
    assert after == before


def test_a_run_recorded_into_the_store_is_already_there(
    invoke: Invoke, recording: Recorded, traces: Path, tmp_path: Path
) -> None:
    target = Path(shutil.copytree(recording.store, tmp_path / "store"))
    result = invoke("import", f"{traces}#{SUPPORT}", "--store", str(target))
    assert result.exit_code == 0
    assert "already in the store" in result.stdout
    by_id = invoke("import", SUPPORT, "--store", str(target))
    assert by_id.exit_code == 0 and "already in the store" in by_id.stdout


def test_a_trace_of_the_official_instrumentation_is_imported_as_spans(
    invoke: Invoke, recording: Recorded, tmp_path: Path
) -> None:
    path = tmp_path / "official.json"
    path.write_text(json.dumps(protobuf_json(recording.official)))
    target = tmp_path / "imported"
    result = invoke("import", str(path), "--store", str(target))
    assert result.exit_code == 0, result.output
    trace_id = f"{recording.official[0].context.trace_id:032x}"
    assert result.stdout.splitlines()[0] == (
        f"{trace_id}: imported 2 steps (0 exact, 2 semantic), 0 stored with their bytes"
    )
    from_file = load_run(str(path))
    from_store = load_run(trace_id, store=str(target))
    assert [s.step.response_body for s in from_store.steps] == [
        s.step.response_body for s in from_file.steps
    ]
    assert {s.fidelity for s in from_store.steps} == {"semantic"}


def test_runs_and_show_count_the_steps_imported_without_their_bytes(
    invoke: Invoke, recording: Recorded, traces: Path, tmp_path: Path
) -> None:
    """A step imported semantic (its body over the inline limit; another instrumentation's
    span) is a step of its run in ``runs`` and ``show``, as in the report and the replay,
    and stays one when the index is rebuilt from the files."""
    official = tmp_path / "official.json"
    official.write_text(json.dumps(protobuf_json(recording.official)))
    trace_id = f"{recording.official[0].context.trace_id:032x}"
    target = tmp_path / "imported"
    for source in (traces, official):
        assert invoke("import", str(source), "--store", str(target)).exit_code == 0

    def listed() -> dict[str, Any]:
        runs = json.loads(invoke("runs", "--json", "--store", str(target)).stdout)
        return {run["run_id"]: run for run in runs}

    before = listed()
    for run_id, steps in ((LARGE, 1), (trace_id, 2), (SUPPORT, 9)):
        assert before[run_id]["step_count"] == steps, run_id
        assert before[run_id]["models"] == ["gpt-4o-mini"]
        assert before[run_id]["tokens_in"] and before[run_id]["tokens_out"]
    shown = json.loads(invoke("show", LARGE, "--json", "--store", str(target)).stdout)
    (step,) = shown["steps"]
    assert (step["index"], step["fidelity"], step["model"]) == (0, "semantic", "gpt-4o-mini")
    assert step["input_messages"][0]["parts"][0]["content"] == "Hello there"
    assert step["response_hash"].startswith("sha256:") and step["response_size"] > 0
    table = invoke("show", trace_id, "--store", str(target)).stdout
    rows = [line.split()[:2] for line in table.splitlines() if line[:1].isdigit()]
    assert rows == [["0", "llm"], ["1", "llm"]]
    assert "Where is my order A-1234?" in table and "steps 0, 1 are semantic" in table
    exact = json.loads(invoke("show", SUPPORT, "--json", "--store", str(target)).stdout)
    assert {s["fidelity"] for s in exact["steps"]} == {"exact"}
    rebuilt = invoke("verify", "--rebuild-index", "--store", str(target))
    assert rebuilt.exit_code == 0, rebuilt.output
    assert listed() == before


def _claiming(document: Any, run_id: str) -> Any:
    if isinstance(document, list):
        return [_claiming(item, run_id) for item in document]
    if isinstance(document, dict):
        if document.get("key") == "replay.run.id":
            return {"key": "replay.run.id", "value": {"stringValue": run_id}}
        return {key: _claiming(value, run_id) for key, value in document.items()}
    return document


def test_a_different_run_under_the_same_id_is_refused(
    invoke: Invoke, recording: Recorded, tmp_path: Path
) -> None:
    target = Path(shutil.copytree(recording.store, tmp_path / "store"))
    path = tmp_path / "impostor.json"
    path.write_text(json.dumps(_claiming(collector_json(run_spans(recording, CLAUDE)), SUPPORT)))
    line = assert_bad_input(invoke("import", str(path), "--store", str(target)), SUPPORT)
    assert line == (
        f"Error: the store at {target} already holds a different run {SUPPORT!r}; nothing imported"
    )
    assert len(load_run(SUPPORT, store=str(target)).steps) == 9


def _one_span_id(document: Any, span_id: str) -> Any:
    """``document`` with every span's id ``span_id``: a forged file whose first span is the
    held run's own and whose others claim its steps again."""
    if isinstance(document, list):
        return [_one_span_id(item, span_id) for item in document]
    if isinstance(document, dict):
        return {
            key: span_id if key == "spanId" else _one_span_id(value, span_id)
            for key, value in document.items()
        }
    return document


def test_a_run_sharing_one_span_with_a_held_run_is_refused_and_mixes_nothing(
    invoke: Invoke, recording: Recorded, tmp_path: Path
) -> None:
    target = tmp_path / "store"
    document = collector_json(run_spans(recording, SUPPORT))
    first = next(
        span["spanId"]
        for span in _spans_of(document)
        if _attribute(span, "replay.step.index") == {"intValue": "0"}
    )
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(_one_span_id(document, first)))
    genuine = tmp_path / "genuine.json"
    genuine.write_text(json.dumps(document))
    assert invoke("import", str(forged), "--store", str(target)).exit_code == 0
    shown = invoke("show", SUPPORT, "--store", str(target))
    assert shown.exit_code == 0, shown.output
    # Only the step spans count as steps, not the spans sharing their ids.
    (listed,) = json.loads(invoke("runs", "--json", "--store", str(target)).stdout)
    assert listed["step_count"] == 9 and listed["error_steps"] == 0
    # The genuine run shares the forged one's id and its first span: completing the held run
    # with it would make two spans claim each later step, and the run unreadable.
    line = assert_bad_input(invoke("import", str(genuine), "--store", str(target)), SUPPORT)
    assert line.startswith(f"Error: the store at {target} holds step 1 of run {SUPPORT!r}")
    assert line.endswith("another recording by that id; nothing imported")
    assert invoke("show", SUPPORT, "--store", str(target)).stdout == shown.stdout
    exported = invoke("export", SUPPORT, str(tmp_path / "bundle"), "--store", str(target))
    assert exported.exit_code == 0, exported.output


def _spans_of(document: Any) -> list[dict[str, Any]]:
    return [
        span
        for resource in document["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]


def _attribute(span: dict[str, Any], key: str) -> Any:
    return next((a["value"] for a in span.get("attributes", []) if a["key"] == key), None)


def test_bad_sources_exit_2_with_one_line_and_create_no_store(
    invoke: Invoke, recording: Recorded, tmp_path: Path
) -> None:
    target = tmp_path / "imported"
    missing = tmp_path / "missing.json"
    assert_bad_input(invoke("import", str(missing), "--store", str(target)), str(missing))
    truncated = tmp_path / "truncated.json"
    lines = one_span_per_line(run_spans(recording, CLAUDE), collector_json)
    truncated.write_bytes(lines[:-20])
    line = assert_bad_input(invoke("import", str(truncated), "--store", str(target)))
    assert line.startswith(f"Error: {truncated}:")
    unknown = assert_bad_input(invoke("import", "r_nope", "--store", str(target)), "'r_nope'")
    assert "not a file or URL" in unknown
    assert not target.exists()


def test_help(invoke: Invoke) -> None:
    result = invoke("import", "--help")
    assert result.exit_code == 0 and "--store" in result.stdout and "#RUN_ID" in result.stdout


@pytest.mark.parametrize("claimed", ["", 7], ids=["empty", "a-number"])
def test_a_span_whose_run_id_is_no_run_id_is_filed_under_its_run(
    invoke: Invoke, recording: Recorded, tmp_path: Path, claimed: Any
) -> None:
    """Such spans make a run of their trace (no replay kit); they are stored under it."""
    document = _claiming(collector_json(run_spans(recording, CLAUDE)), "")
    if claimed != "":
        document = json.loads(
            json.dumps(document).replace('{"stringValue": ""}', f'{{"intValue": "{claimed}"}}')
        )
    path = tmp_path / "no-run-id.json"
    path.write_text(json.dumps(document))
    target = tmp_path / "imported"
    result = invoke("import", str(path), "--store", str(target))
    assert result.exit_code == 0, result.output
    run_id = result.stdout.split(":")[0]
    assert len(run_id) == 32 and run_id != CLAUDE  # the trace id
    assert [s.fidelity for s in load_run(run_id, store=str(target)).steps] == ["exact"]


def test_a_bundle_of_a_different_run_under_a_held_id_is_refused(
    invoke: Invoke, recording: Recorded, tmp_path: Path
) -> None:
    target = Path(shutil.copytree(recording.store, tmp_path / "store"))
    claude = load_run(CLAUDE, store=str(target))
    bundle = tmp_path / "impostor"
    write_bundle(replace(claude, run_id=SUPPORT), bundle, Redactor())
    line = assert_bad_input(invoke("import", str(bundle), "--store", str(target)), SUPPORT)
    assert line == (
        f"Error: the store at {target} already holds a different run {SUPPORT!r}; nothing imported"
    )
    assert len(load_run(SUPPORT, store=str(target)).steps) == 9


def test_a_bundle_of_another_run_of_the_same_agent_under_a_held_id_is_refused(
    invoke: Invoke, recording: Recorded, tmp_path: Path
) -> None:
    """Two runs of one agent send the same first requests: a bundle whose run id is a held
    run's, alike in its first steps but not its last answer, is another run (once: 'already
    in the store ... nothing changed', exit 0)."""
    target = Path(shutil.copytree(recording.store, tmp_path / "store"))
    support = load_run(SUPPORT, store=str(target))
    last = support.steps[-1]
    answer = last.step.response_body.replace(b"refund", b"REFUND")
    assert answer != last.step.response_body
    other = replace(last.step, response_body=answer, response_hash=sha256_tag(answer))
    changed = replace(support, steps=(*support.steps[:-1], replace(last, step=other)))
    bundle = tmp_path / "rerun"
    write_bundle(changed, bundle, Redactor())
    line = assert_bad_input(invoke("import", str(bundle), "--store", str(target)), SUPPORT)
    assert line.endswith(f"already holds a different run {SUPPORT!r}; nothing imported")
    same = tmp_path / "same"
    write_bundle(support, same, Redactor())
    result = invoke("import", str(same), "--store", str(target))
    assert result.exit_code == 0, result.output
    assert "already in the store" in result.stdout


def test_a_bundle_of_a_run_cut_off_mid_call_imports_again_as_already_there(
    invoke: Invoke, tmp_path: Path
) -> None:
    """A step SIGTERM cut off before any answer has no response: the store holds no response
    hash for it, its bundle an empty response file. Importing the bundle again, or into the
    store it came from, changes nothing (once: 'already holds a different run', exit 2)."""
    source = tmp_path / "source"
    (first, _), (second, _) = chat_bodies(2)
    with Store.open(source) as opened:
        opened.put(
            [
                make_step("r_cut", 0, first, b'{"ok": 1}'),
                make_step("r_cut", 1, second, None, error_type="SIGTERM"),
            ]
        )
    bundle = tmp_path / "bundle"
    assert invoke("export", "r_cut", str(bundle), "--store", str(source)).exit_code == 0
    target = tmp_path / "target"
    for store in (target, target, source):
        result = invoke("import", str(bundle), "--store", str(store))
        assert result.exit_code == 0, result.output
    assert "already in the store" in result.stdout
    steps = load_run("r_cut", store=str(target)).steps
    assert [(s.step.status_code, s.step.error_type) for s in steps] == [
        (200, None),
        (None, "SIGTERM"),
    ]


def test_a_bundle_keeps_how_its_run_ended(invoke: Invoke, tmp_path: Path) -> None:
    """A failed run handed over as a bundle comes back failed, a cut-off one incomplete (once
    both came back `ok`, and `runs --failed` lost the failure); an ok run's manifest says
    nothing of it, as before."""
    source = tmp_path / "source"
    with Store.open(source) as opened:
        for n, run_id in enumerate(("r_failed", "r_cut", "r_fine")):
            request, response = chat_bodies(1, seed=n)[0]
            opened.put([make_step(run_id, 0, request, response)])
        opened.end_run(RunEnd("r_failed", 1_700_000_002 * 10**9, "RuntimeError"))
        opened.end_run(RunEnd("r_fine", 1_700_000_002 * 10**9, None))
        opened.keep_open("r_cut")  # as a recorder killed mid-run leaves it
    target = tmp_path / "target"
    for run_id in ("r_failed", "r_cut", "r_fine"):
        bundle = tmp_path / run_id
        assert invoke("export", run_id, str(bundle), "--store", str(source)).exit_code == 0
        assert invoke("import", str(bundle), "--store", str(target)).exit_code == 0
    ended = {
        run["run_id"]: (run["status"], run["error_type"])
        for run in json.loads(invoke("runs", "--json", "--store", str(target)).stdout)
    }
    assert ended == {
        "r_failed": ("error", "RuntimeError"),
        "r_cut": ("incomplete", None),
        "r_fine": ("ok", None),
    }
    failed = invoke("runs", "--failed", "--json", "--store", str(target)).stdout
    assert [run["run_id"] for run in json.loads(failed)] == ["r_failed"]
    fine = json.loads((tmp_path / "r_fine" / "bundle.json").read_text())["run"]
    assert "status" not in fine and "error_type" not in fine


def test_a_bundle_of_semantic_steps_is_imported_as_spans(
    invoke: Invoke, recording: Recorded, tmp_path: Path
) -> None:
    # The official instrumentation's run, known from its GenAI attributes only, exported:
    # its steps have no span in the bundle and no bytes to store, and come in all the same.
    path = tmp_path / "official.json"
    path.write_text(json.dumps(protobuf_json(recording.official)))
    first, again = tmp_path / "first", tmp_path / "again"
    assert invoke("import", str(path), "--store", str(first)).exit_code == 0
    trace_id = f"{recording.official[0].context.trace_id:032x}"
    bundle = tmp_path / "bundle"
    assert invoke("export", trace_id, str(bundle), "--store", str(first)).exit_code == 0
    result = invoke("import", str(bundle), "--store", str(again))
    assert result.stdout.splitlines()[0] == (
        f"{trace_id}: imported 2 steps (0 exact, 2 semantic), 0 stored with their bytes"
    )
    before, after = load_run(trace_id, store=str(first)), load_run(trace_id, store=str(again))
    assert [s.step.response_body for s in after.steps] == [
        s.step.response_body for s in before.steps
    ]
    assert {s.fidelity for s in after.steps} == {"semantic"}
    shown = invoke("show", trace_id, "--store", str(again), "--json")
    assert [step["index"] for step in json.loads(shown.stdout)["steps"]] == [0, 1]
