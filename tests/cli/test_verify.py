"""``otel-replay verify``: exit 0 on an intact store, 1 naming each damaged thing."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import Result
from rich.console import Console

from otel_replay.cli._common import progress
from tests.cli._checks import assert_bad_input
from tests.cli._recording import SUPPORT

Invoke = Callable[..., Result]


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def _pack(store: Path) -> Path:
    """The store's one pack (the recording wrote every run in one flush)."""
    (pack,) = (store / "objects").rglob("*.pack")
    return pack


def _record(store: Path, run_id: str) -> Path:
    """The record file of ``run_id`` (one: its recorder merged them at close)."""
    with closing(sqlite3.connect(store / "index.sqlite")) as index, index:
        (path,) = index.execute(
            "SELECT path FROM records JOIN runs ON runs.id = records.run WHERE runs.name = ?",
            (run_id,),
        ).fetchone()
    return store / path


def test_an_intact_store_passes(invoke: Invoke, store: Path) -> None:
    result = invoke("verify", "--store", str(store))
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"The store at {store} is intact: 3 runs, 12 steps, every body re-hashed.\n"
    )
    document = json.loads(invoke("verify", "--json", "--store", str(store)).stdout)
    assert document == {"store": str(store), "ok": True, "runs": 3, "steps": 12, "problems": []}


def test_flipped_bytes_in_a_pack_are_named(invoke: Invoke, store: Path) -> None:
    pack = _pack(store)
    _flip(pack, 40)  # in its first frame, which holds objects of every run
    before = pack.read_bytes()
    result = invoke("verify", "--store", str(store))
    assert result.exit_code == 1 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert any(line.startswith(f"damaged pack: {pack}: ") for line in lines), lines
    bodies = [line for line in lines if line.startswith("damaged body: ")]
    assert any(f"run {SUPPORT!r} step " in line for line in bodies)
    assert all("sha256:" in line for line in bodies)
    assert lines[-1].startswith(f"{len(lines) - 1} problems in the store at {store}")
    assert SUPPORT in lines[-1] and lines[-1].endswith(". Nothing was changed.")
    assert pack.read_bytes() == before  # nothing repaired or rewritten

    result = invoke("verify", "--json", "--store", str(store))
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert document["ok"] is False and len(document["problems"]) == len(lines) - 1
    kinds = {p["kind"] for p in document["problems"]}
    assert "pack" in kinds and "body" in kinds
    damaged = [p for p in document["problems"] if p["kind"] == "body"]
    assert all(p["run_id"] and p["blob"].startswith("sha256:") for p in damaged)


def test_the_other_runs_still_show_after_damage(invoke: Invoke, store: Path) -> None:
    record = _record(store, SUPPORT)
    _flip(record, 20)
    assert invoke("show", "latest", "--store", str(store)).exit_code == 0
    result = invoke("verify", "--store", str(store))
    assert result.exit_code == 1 and f"damaged record: record file {record}" in result.stdout


def test_progress_is_drawn_only_on_a_terminal() -> None:
    terminal = io.StringIO()
    console = Console(file=terminal, force_terminal=True, width=80)
    with progress("verifying", console) as report:
        for done in range(1, 4):
            report(done, 3)
    assert "verifying" in terminal.getvalue() and "3/3" in terminal.getvalue()
    pipe = io.StringIO()
    with progress("verifying", Console(file=pipe, force_terminal=False)) as report:
        report(1, 1)
    assert pipe.getvalue() == ""


def test_rebuild_index_replaces_a_damaged_index(invoke: Invoke, store: Path) -> None:
    intact = invoke("verify", "--json", "--store", str(store)).stdout
    index = store / "index.sqlite"
    index.write_bytes(index.read_bytes()[: index.stat().st_size // 2])
    truncated = index.read_bytes()
    line = assert_bad_input(invoke("verify", "--store", str(store)), str(index))
    assert "otel-replay verify --rebuild-index" in line
    result = invoke("verify", "--rebuild-index", "--json", "--store", str(store))
    assert result.exit_code == 0, result.output
    assert result.stdout == intact
    (kept,) = store.glob("index.sqlite.broken-*[0-9]")
    assert kept.read_bytes() == truncated  # set aside, never deleted
    assert invoke("verify", "--store", str(store)).exit_code == 0


def test_rebuild_index_computes_the_hashes_only_the_index_held(invoke: Invoke, store: Path) -> None:
    """The packs keep no body hash or size: a rebuilt index shows every step as before."""
    shown = {
        run: invoke("show", run, "--json", "--store", str(store)).stdout
        for run in _runs(invoke, store)
    }
    runs = invoke("runs", "--json", "--store", str(store)).stdout
    steps = [step for text in shown.values() for step in json.loads(text)["steps"]]
    assert steps and all(step["request_hash"].startswith("sha256:") for step in steps)
    (store / "index.sqlite").unlink()
    result = invoke("verify", "--rebuild-index", "--store", str(store))
    assert result.exit_code == 0, result.output
    assert invoke("runs", "--json", "--store", str(store)).stdout == runs
    for run, text in shown.items():
        assert invoke("show", run, "--json", "--store", str(store)).stdout == text


def _runs(invoke: Invoke, store: Path) -> list[str]:
    return [
        run["run_id"] for run in json.loads(invoke("runs", "--json", "--store", str(store)).stdout)
    ]


def test_rebuild_index_names_a_run_whose_pack_is_damaged(invoke: Invoke, store: Path) -> None:
    pack = _pack(store)
    _flip(pack, 30)
    result = invoke("verify", "--rebuild-index", "--store", str(store))
    assert result.exit_code == 1
    assert f"damaged pack: {pack}: " in result.stdout
    assert "damaged body: run " in result.stdout
    # Every run and step is still listed: the records are intact, only bodies are damaged.
    assert len(_runs(invoke, store)) == 3
    assert invoke("verify", "--store", str(store)).exit_code == 1  # still named afterwards
    assert pack.exists()


def test_rebuild_index_of_no_store_is_bad_input(invoke: Invoke, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    line = assert_bad_input(invoke("verify", "--rebuild-index", "--store", str(missing)))
    assert line == f"Error: no otel-replay store at {missing} (check --store)"
    assert not missing.exists()


@pytest.mark.subprocess
def test_a_fifo_planted_in_the_store_is_neither_read_nor_removed(store: Path) -> None:
    """A FIFO under a record file's name (and among the pins) once made verify, gc and
    verify --rebuild-index wait forever for a writer; a rebuild cut off there left an index
    without a run. A FIFO is no file of the store: passed over, and left where it is."""
    record = _record(store, SUPPORT)
    fifos = [record.with_name("eeeeeeeeeeeeeeee-00000000-00000000.rec"), store / "pins" / "p"]
    fifos[1].parent.mkdir(exist_ok=True)
    for fifo in fifos:
        os.mkfifo(fifo)
        os.utime(fifo, (0, 0))  # long past gc's grace
    recorded = record.read_bytes()
    cli = Path(sys.executable).parent / "otel-replay"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_REPLAY_")}
    for verb in (["verify"], ["verify", "--rebuild-index"], ["gc"], ["runs", "--json"]):
        done = subprocess.run(
            [str(cli), *verb, "--store", str(store)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, (verb, done.stdout, done.stderr)
        assert done.stderr == ""
    assert len(json.loads(done.stdout)) == 3  # every run still listed
    assert all(stat.S_ISFIFO(fifo.lstat().st_mode) for fifo in fifos)
    assert record.read_bytes() == recorded
