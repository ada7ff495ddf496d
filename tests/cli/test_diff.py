"""``otel-replay diff RUN_A RUN_B``: two runs' steps aligned, the first divergence, exit status.

The store holds the real recordings of ``_recording``; runs that differ from the support run
in known ways are added through the real ``Store`` API: its fixtures again under another run
id, with a request or a response changed (and its hash recomputed) or a step left out.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from otel_replay._canonical import sha256_tag
from otel_replay.step import RunFacts, Step
from otel_replay.store import Store
from tests.cli._checks import assert_bad_input
from tests.cli._recording import CLAUDE, ERRORS, SUPPORT, Recorded

Invoke = Callable[..., Result]

CLI = str(Path(sys.executable).with_name("otel-replay"))
OTHER = "r_20261121T100000_0bbbbbbb"
ROW = re.compile(r"^(\d+|-)\s+(\d+|-)\s+(\w+)\s+(.+?)\s{3,}(\S.*)$")


def _put_run(store: Path, run_id: str, steps: list[Step], *, mode: str = "record") -> None:
    """``steps`` as run ``run_id`` (numbered again from 0), steps only."""
    parent = None if mode == "record" else SUPPORT
    facts = RunFacts(run_id, mode=mode, seed=7, parent_run_id=parent)
    renumbered = [
        dataclasses.replace(step, run_id=run_id, run=facts, index=index)
        for index, step in enumerate(steps)
    ]
    with Store.open(store, create=False) as opened:
        opened.put(renumbered)


def _with_request(step: Step, **fields: object) -> Step:
    """``step`` whose JSON request body has ``fields`` set, its hash recomputed."""
    body = json.dumps({**json.loads(step.request_body), **fields}).encode()
    return dataclasses.replace(step, request_body=body, request_hash=sha256_tag(body))


def _with_response(step: Step, old: bytes, new: bytes) -> Step:
    """``step`` whose response has ``old`` replaced by ``new`` (as one chunk), hash recomputed."""
    body = step.response_body.replace(old, new, 1)
    assert body != step.response_body
    first = step.chunks[0][1] if step.chunks else 0
    return dataclasses.replace(
        step, response_body=body, response_hash=sha256_tag(body), chunks=[(len(body), first)]
    )


def _changed_run(store: Path, recorded: Recorded) -> None:
    """The support run with step 2 asking another model and step 4 (the weather tool's HTTP
    call) left out."""
    steps = list(recorded.steps[SUPPORT])
    steps[2] = _with_request(steps[2], model="gpt-4o")
    del steps[4]
    _put_run(store, OTHER, steps)


def _rows(stdout: str) -> list[tuple[str, str, str, str, str]]:
    """The aligned table's rows: a, b, kind, call, result."""
    out = []
    for line in stdout.splitlines():
        match = ROW.match(line)
        if match:
            a, b, kind, call, result = match.groups()
            out.append((a, b, kind, call, result))
    return out


def _diff(invoke: Invoke, store: Path, *args: str) -> Result:
    return invoke("diff", *args, "--store", str(store))


@pytest.mark.parametrize(("run", "steps"), [(SUPPORT, 9), (ERRORS, 2), (CLAUDE, 1)])
def test_a_run_against_itself_is_identical(
    invoke: Invoke, store: Path, run: str, steps: int
) -> None:
    result = _diff(invoke, store, run, run)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"A: run {run}  ") and lines[1].startswith(f"B: run {run}  ")
    rows = _rows(result.stdout)
    assert [(a, b, status) for a, b, _, _, status in rows] == [
        (str(i), str(i), "same") for i in range(steps)
    ]
    assert lines[-1] == f"identical: {steps} step{'s' if steps > 1 else ''}"
    assert "first divergence" not in result.stdout


def test_a_copy_of_a_run_is_identical_and_names_resolve_as_in_show(
    invoke: Invoke, store: Path, recorded: Recorded
) -> None:
    _put_run(store, OTHER, list(recorded.steps[SUPPORT]), mode="replay")
    # A unique prefix on one side, a replay (steps only, no spans) on the other.
    result = _diff(invoke, store, SUPPORT[:20], OTHER)
    assert result.exit_code == 0, result.output
    assert f"B: run {OTHER}  ok  replay of {SUPPORT}" in result.stdout
    assert result.stdout.splitlines()[-1] == "identical: 9 steps"
    # `latest` is the newest recording (CLAUDE), never the replay.
    latest = _diff(invoke, store, "latest", CLAUDE)
    assert latest.exit_code == 0 and f"A: run {CLAUDE}  " in latest.stdout


def test_a_changed_request_and_a_removed_step(
    invoke: Invoke, store: Path, recorded: Recorded
) -> None:
    _changed_run(store, recorded)
    result = _diff(invoke, store, SUPPORT, OTHER)
    assert result.exit_code == 1, result.output
    assert result.stderr == ""
    rows = _rows(result.stdout)
    assert [(a, b, kind, status) for a, b, kind, _, status in rows] == [
        ("0", "0", "llm", "same"),
        ("1", "1", "http", "same"),
        ("2", "2", "llm", "changed: model"),
        ("3", "3", "llm", "same"),
        ("4", "-", "http", "removed (only in A)"),
        ("5", "4", "llm", "same"),
        ("6", "5", "llm", "same"),
        ("7", "6", "http", "same"),
        ("8", "7", "llm", "same"),
    ]
    assert rows[4][3] == "GET /tools/weather"
    lines = result.stdout.splitlines()
    at = lines.index("first divergence: step 2 (openai.chat_completions gpt-4o-mini): model")
    assert lines[at + 1] == "  model: gpt-4o-mini → gpt-4o"
    assert lines[-1] == "9 aligned steps: 7 same, 1 changed, 1 removed, 0 added"


def test_the_other_way_round_the_step_is_added(
    invoke: Invoke, store: Path, recorded: Recorded
) -> None:
    _changed_run(store, recorded)
    result = _diff(invoke, store, OTHER, SUPPORT)
    assert result.exit_code == 1, result.output
    rows = _rows(result.stdout)
    assert ("-", "4", "http", "GET /tools/weather", "added (only in B)") in rows
    assert ("2", "2", "llm", "openai.chat_completions", "changed: model") in rows
    assert "  model: gpt-4o → gpt-4o-mini" in result.stdout.splitlines()


def test_a_removed_step_first(invoke: Invoke, store: Path, recorded: Recorded) -> None:
    """Leaving out an early step shifts the later ones without making them differ."""
    steps = list(recorded.steps[SUPPORT])
    del steps[1]
    _put_run(store, OTHER, steps)
    result = _diff(invoke, store, SUPPORT, OTHER)
    assert result.exit_code == 1, result.output
    rows = _rows(result.stdout)
    assert [(a, b, status) for a, b, _, _, status in rows] == [
        ("0", "0", "same"),
        ("1", "-", "removed (only in A)"),
        *[(str(i), str(i - 1), "same") for i in range(2, 9)],
    ]
    assert (
        "first divergence: step 1 (GET /tools/orders/A-1234) of A is not in B"
        in result.stdout.splitlines()
    )

    reverse = _diff(invoke, store, OTHER, SUPPORT)
    assert (
        "first divergence: step 1 (GET /tools/orders/A-1234) of B is not in A"
        in reverse.stdout.splitlines()
    )


def test_changed_responses_field_by_field_and_as_text(
    invoke: Invoke, store: Path, recorded: Recorded
) -> None:
    steps = list(recorded.steps[SUPPORT])
    steps[1] = _with_response(steps[1], b"in transit", b"delivered")  # the tool's JSON
    steps[8] = _with_response(steps[8], b"approved", b"declined")  # the streamed answer
    _put_run(store, OTHER, steps, mode="replay")
    result = _diff(invoke, store, SUPPORT, OTHER)
    assert result.exit_code == 1, result.output
    statuses = [(a, status) for a, _, _, _, status in _rows(result.stdout)]
    assert statuses == [(str(i), "changed: response" if i in (1, 8) else "same") for i in range(9)]
    lines = result.stdout.splitlines()
    at = lines.index("first divergence: step 1 (GET /tools/orders/A-1234): response")
    assert lines[at + 1] == "  response $.status: in transit → delivered"

    document = json.loads(_diff(invoke, store, SUPPORT, OTHER, "--json").stdout)
    said, stream = document["pairs"][8]["changes"]
    assert said["field"] == "response message 0"
    assert stream["field"] == "response body"
    assert stream["before"] == recorded.steps[SUPPORT][8].response_body.decode()
    assert stream["after"] == steps[8].response_body.decode()
    assert stream["before"][stream["differs_at"] :].startswith("approved")


def test_a_long_value_is_shown_around_its_change(
    invoke: Invoke, store: Path, recorded: Recorded
) -> None:
    """The first divergence in a long text (the streamed answer) is the window around the
    change, A above B, and a caret under where they part."""
    steps = list(recorded.steps[SUPPORT])
    steps[8] = _with_response(steps[8], b"approved", b"declined")
    _put_run(store, OTHER, steps)
    lines = _diff(invoke, store, SUPPORT, OTHER).stdout.splitlines()
    at = lines.index("first divergence: step 8 (openai.chat_completions gpt-4o-mini): response")
    at = next(i for i, line in enumerate(lines) if i > at and line.startswith("  response body"))
    head, a, b, caret = lines[at : at + 4]
    assert head.startswith("  response body: differs from character ")
    assert a.startswith("    A: …") and "approved" in a
    assert b.startswith("    B: …") and "declined" in b
    assert caret.strip() == "^" and a[len(caret) - 1 : len(caret) + 7] == "approved"


def test_a_changed_answer_is_named_before_the_bytes_that_carry_it(
    invoke: Invoke, store: Path, recorded: Recorded
) -> None:
    """A fork's answer to a streamed call first differs from the recorded bytes at an id or a
    timestamp (``"created":0``); the diff says what the model answered instead, message by
    message as ``show`` reads them, before the bytes."""
    steps = list(recorded.steps[SUPPORT])
    body = steps[8].response_body
    created = re.search(rb'"created":\d+', body)
    assert created is not None and created.start() < body.index(b"approved")
    steps[8] = _with_response(steps[8], created.group(), b'"created":0')
    steps[8] = _with_response(steps[8], b"approved", b"declined")
    _put_run(store, OTHER, steps, mode="fork")
    result = _diff(invoke, store, SUPPORT, OTHER)
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    at = lines.index("first divergence: step 8 (openai.chat_completions gpt-4o-mini): response")
    head, a, b, caret = lines[at + 1 : at + 5]
    assert head.startswith("  response message 0: differs from character ")
    assert a.startswith("    A: ") and "approved" in a
    assert b.startswith("    B: ") and "declined" in b and "created" not in b
    assert a[len(caret) - 1 : len(caret) + 7] == "approved"

    document = json.loads(_diff(invoke, store, SUPPORT, OTHER, "--json").stdout)
    said = document["first_divergence"]["changes"][0]
    assert said["field"] == "response message 0"
    assert said["before"].startswith("assistant: ") and "approved" in said["before"]
    assert said["after"] == said["before"].replace("approved", "declined")


def test_json(invoke: Invoke, store: Path, recorded: Recorded) -> None:
    _changed_run(store, recorded)
    result = _diff(invoke, store, SUPPORT, OTHER, "--json")
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert document["a"]["run_id"] == SUPPORT and document["b"]["run_id"] == OTHER
    assert document["identical"] is False
    assert document["counts"] == {"same": 7, "changed": 1, "removed": 1, "added": 0, "inside": 0}
    pairs = document["pairs"]
    assert [(p["a"], p["b"], p["status"]) for p in pairs] == [
        (0, 0, "same"),
        (1, 1, "same"),
        (2, 2, "changed"),
        (3, 3, "same"),
        (4, None, "removed"),
        (5, 4, "same"),
        (6, 5, "same"),
        (7, 6, "same"),
        (8, 7, "same"),
    ]
    assert pairs[4]["kind"] == "http" and pairs[4]["endpoint"] == "GET /tools/weather"
    assert pairs[2]["changes"] == [
        {
            "field": "model",
            "kind": "changed",
            "before": "gpt-4o-mini",
            "after": "gpt-4o",
            "differs_at": len("gpt-4o"),
        }
    ]
    assert document["first_divergence"] == pairs[2]

    same = json.loads(_diff(invoke, store, SUPPORT, SUPPORT, "--json").stdout)
    assert same["identical"] is True and same["first_divergence"] is None
    assert {p["status"] for p in same["pairs"]} == {"same"}


def test_bad_input(invoke: Invoke, store: Path, tmp_path: Path) -> None:
    line = assert_bad_input(_diff(invoke, store, SUPPORT, "r_nope"), "'r_nope'", str(store))
    assert "otel-replay runs" in line
    assert_bad_input(_diff(invoke, store, "r_2026", SUPPORT), "ambiguous")
    missing = tmp_path / "nowhere"
    line = assert_bad_input(invoke("diff", SUPPORT, SUPPORT, "--store", str(missing)))
    assert line == f"Error: no otel-replay store at {missing} (check --store)"
    usage = assert_bad_input(invoke("diff", SUPPORT, "--store", str(store)), "--help")
    assert "RUN_B" in usage
    # A run id too long to be a file name: the run is not found, as `show` says, not an
    # OSError's "[Errno 36] File name too long" with the whole id.
    long = "r_" + "x" * 300
    for args in ((long, SUPPORT), (SUPPORT, long)):
        line = assert_bad_input(_diff(invoke, store, *args), "no run 'r_xxx")
        assert "Errno" not in line and len(line) < 300


def test_a_truncated_index(invoke: Invoke, store: Path) -> None:
    index = store / "index.sqlite"
    index.write_bytes(index.read_bytes()[: index.stat().st_size // 2])
    before = index.read_bytes()
    line = assert_bad_input(_diff(invoke, store, SUPPORT, SUPPORT), str(index))
    assert "rebuild" in line
    assert index.read_bytes() == before


def test_help_names_the_exit_statuses(invoke: Invoke) -> None:
    result = invoke("diff", "--help")
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert "diff [OPTIONS] RUN_A RUN_B" in text
    assert "0 the runs are identical; 1 they differ; 2 bad input" in text
    assert "--store" in text and "--json" in text


def _files(root: Path) -> list[tuple[str, bytes]]:
    return sorted((str(p), p.read_bytes()) for p in root.rglob("*") if p.is_file())


@pytest.mark.subprocess
def test_a_read_only_store(store: Path, recorded: Recorded, tmp_path: Path) -> None:
    """On a store mounted read-only (a CI cache) diff reads both runs and writes nothing."""
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is needed for a read-only mount")
    _changed_run(store, recorded)
    before = _files(store)
    script = " && ".join(
        [
            f"mount --bind -o ro {store} {store}",
            f"{{ {CLI} diff {SUPPORT} {OTHER} --json --store {store} > {tmp_path}/diff.json; "
            f"echo $? > {tmp_path}/status; }}",
            f"{CLI} diff {SUPPORT} {SUPPORT} --store {store} > {tmp_path}/same.txt",
        ]
    )
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], check=False, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "status").read_text() == "1\n"
    document = json.loads((tmp_path / "diff.json").read_text())
    assert document["first_divergence"]["a"] == 2
    assert document["counts"] == {"same": 7, "changed": 1, "removed": 1, "added": 0, "inside": 0}
    assert (tmp_path / "same.txt").read_text().splitlines()[-1] == "identical: 9 steps"
    assert _files(store) == before
