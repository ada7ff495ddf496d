"""``otel-replay runs``: the table and the JSON, on a store of real recordings."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from otel_replay.store import Store
from tests.cli._recording import CLAUDE, ERRORS, SUPPORT, Recorded
from tests.store._data import chat_bodies, make_step, span

Invoke = Callable[..., Result]


def _rows(stdout: str) -> dict[str, list[str]]:
    """Table rows by run id, split on the column gaps."""
    rows = {}
    for line in stdout.splitlines():
        if line.startswith("r_"):
            cells = [cell.strip() for cell in line.split("   ") if cell.strip()]
            rows[cells[0]] = cells
    return rows


def test_the_table_lists_every_run_newest_first(
    invoke: Invoke, store: Path, recorded: Recorded
) -> None:
    result = invoke("runs", "--store", str(store))
    assert result.exit_code == 0 and result.stderr == ""
    ids = [line.split()[0] for line in result.stdout.splitlines() if line.startswith("r_")]
    assert ids == [CLAUDE, ERRORS, SUPPORT]
    header = result.stdout.splitlines()[0].split()
    assert header[:5] == ["run", "when", "status", "mode", "steps"]
    rows = _rows(result.stdout)
    support = rows[SUPPORT]
    assert support[2:6] == ["ok", "record", "9", "gpt-4o-mini"]
    tokens_in, tokens_out = _usage(recorded, SUPPORT)
    assert tokens_in is not None and tokens_in > 3000
    assert support[6] == f"{tokens_in:,} / {tokens_out:,}"
    assert support[7].endswith(" KB")
    # The run failed: with the exception that ended it, as the docs say (the table said "error").
    assert rows[ERRORS][2:6] == [
        "error (openai.APIConnectionError)",
        "record",
        "2 (2 failed)",
        "standin-error, standin-cut",
    ]
    # Neither failed call reported usage: no token count is shown, rather than "0 / 0".
    assert _usage(recorded, ERRORS) == (None, None) and rows[ERRORS][6].endswith("B")
    assert " / " not in " ".join(rows[ERRORS])
    assert rows[CLAUDE][2:6] == ["ok", "record", "1", "claude-sonnet-4-6"]
    assert rows[CLAUDE][6] == "{:,} / {:,}".format(*_usage(recorded, CLAUDE))
    # Recorded when the session's fixtures were made: minutes ago on a busy machine.
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \((just now|\d+ min ago)\)", support[1])
    assert result.stdout.rstrip().endswith(f"3 runs in {store}")


def _usage(recorded: Recorded, run_id: str) -> tuple[int | None, int | None]:
    """Tokens in and out, summed over the recorded spans' ``gen_ai.usage.*``; None where no
    span reported any (unknown, not zero)."""
    spans = [s["attributes"] for s in recorded.spans[run_id]]
    counts = []
    for key in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"):
        reported = [a[key] for a in spans if key in a]
        counts.append(sum(reported) if reported else None)
    return counts[0], counts[1]


def test_json_is_for_machines(invoke: Invoke, store: Path, recorded: Recorded) -> None:
    result = invoke("runs", "--json", "--store", str(store))
    assert result.exit_code == 0
    runs = json.loads(result.stdout)
    assert [run["run_id"] for run in runs] == [CLAUDE, ERRORS, SUPPORT]
    by_id = {run["run_id"]: run for run in runs}
    support = by_id[SUPPORT]
    assert support["status"] == "ok" and support["step_count"] == 9 and support["seed"] == 7
    assert support["models"] == ["gpt-4o-mini"] and support["pinned"] is False
    raw = sum(len(s.request_body) + len(s.response_body) for s in recorded.steps[SUPPORT])
    assert support["bytes"] == raw
    assert support["start_ns"] <= support["end_ns"] and support["start"].startswith("20")
    assert by_id[ERRORS]["status"] == "error"
    assert {(run["mode"], run["parent_run_id"]) for run in runs} == {("record", None)}
    for run_id in (SUPPORT, ERRORS, CLAUDE):
        assert (by_id[run_id]["tokens_in"], by_id[run_id]["tokens_out"]) == _usage(recorded, run_id)


def test_limit_keeps_the_newest(invoke: Invoke, store: Path) -> None:
    result = invoke("runs", "-n", "1", "--store", str(store))
    assert list(_rows(result.stdout)) == [CLAUDE]
    assert "1 of 3 runs" in result.stdout


def test_the_store_defaults_to_the_environment(invoke: Invoke, store: Path) -> None:
    result = invoke("runs", env={"OTEL_REPLAY_STORE": str(store)})
    assert result.exit_code == 0 and set(_rows(result.stdout)) == {SUPPORT, ERRORS, CLAUDE}


def test_an_empty_store_variable_means_the_default_store(
    invoke: Invoke, store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``OTEL_REPLAY_STORE=`` (a deployment template rendering an unset value) is unset, as
    OpenTelemetry reads its own variables: ``./.otel-replay``, not the working directory."""
    work = tmp_path / "work"
    work.mkdir()
    store.rename(work / ".otel-replay")
    monkeypatch.chdir(work)
    result = invoke("runs", env={"OTEL_REPLAY_STORE": ""})
    assert result.exit_code == 0, result.stderr
    assert set(_rows(result.stdout)) == {SUPPORT, ERRORS, CLAUDE}


def test_an_empty_store_says_so(invoke: Invoke, tmp_path: Path) -> None:
    Store.open(tmp_path / "empty").close()
    result = invoke("runs", "--store", str(tmp_path / "empty"))
    assert result.exit_code == 0
    assert result.stdout == f"No runs in the store at {tmp_path / 'empty'} yet.\n"
    assert json.loads(invoke("runs", "--json", "--store", str(tmp_path / "empty")).stdout) == []


def test_the_table_shows_the_newest_fifty_unless_asked_for_more(
    invoke: Invoke, tmp_path: Path
) -> None:
    folder = tmp_path / "many"
    with Store.open(folder) as opened:
        for n in range(55):
            run_id = f"r_many_{n:02d}"
            request, response = chat_bodies(1, seed=n)[0]
            step = make_step(run_id, 0, request, response, start_ns=(1_700_000_000 + n) * 10**9)
            opened.put([step], [span(run_id, 0), span(run_id, None)])
        opened.flush()

    table = invoke("runs", "--store", str(folder)).stdout
    assert list(_rows(table)) == [f"r_many_{n:02d}" for n in range(54, 4, -1)]
    assert table.rstrip().endswith(f"50 of 55 runs in {folder} (--limit N or --all for more)")

    every = invoke("runs", "--all", "--store", str(folder)).stdout
    assert len(_rows(every)) == 55
    assert every.rstrip().endswith(f"55 runs in {folder}")
    assert len(json.loads(invoke("runs", "--json", "--store", str(folder)).stdout)) == 55
    assert len(_rows(invoke("runs", "-n", "53", "--store", str(folder)).stdout)) == 53

    both = invoke("runs", "--all", "-n", "3", "--store", str(folder))
    assert both.exit_code == 2
    assert "--all and --limit cannot be used together" in both.stderr


def test_a_store_path_prints_as_it_is_never_as_markup(invoke: Invoke, tmp_path: Path) -> None:
    location = tmp_path / "[red]runs[/red] :smile: [link=http://x]y"
    with Store.open(location) as opened:
        opened.put([make_step("r_markup", 0, *chat_bodies(1)[0])])
    result = invoke("runs", "--store", str(location))
    assert result.exit_code == 0, result.output
    assert result.stdout.rstrip().endswith(f"1 run in {location}")
    assert "😄" not in result.stdout
