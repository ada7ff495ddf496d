"""``otel-replay migrate``: a version-2 store written by the last version-2 code becomes a
version-4 store holding every run, step, span and pin; the old store is kept."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_replay.errors import StoreFormatError
from otel_replay.store import Store
from otel_replay.store._migrate import migrate
from otel_replay.store._v2 import read_v2

DATA = Path(__file__).with_name("data")
EXPECTED: list[dict[str, Any]] = json.loads((DATA / "v2-store.json").read_text())
CLI = str(Path(sys.executable).with_name("otel-replay"))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], check=False, capture_output=True, text=True)


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    shutil.copytree(DATA / "v2-store", root)
    return root


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _as_listed(store: Store, run_id: str) -> list[dict[str, Any]]:
    """A run's steps in the shape the expected file lists them."""
    out = []
    for info in store.steps(run_id):
        step = store.read_step(info)
        out.append(
            {
                "index": step.index,
                "kind": step.kind,
                "method": step.method,
                "url": step.url,
                "request_headers": [list(h) for h in step.request_headers],
                "request_hash": step.request_hash,
                "status_code": step.status_code,
                "response_headers": [list(h) for h in step.response_headers],
                "response_hash": step.response_hash,
                "chunks": [list(c) for c in step.chunks],
                "complete": step.complete,
                "error_type": step.error_type,
                "start_ns": step.start_ns,
                "end_ns": step.end_ns,
                "trace_id": step.trace_id,
                "span_id": step.span_id,
                "provider": info.provider,
                "model": info.model,
                "tokens_in": info.tokens_in,
                "tokens_out": info.tokens_out,
            }
        )
    return out


def test_the_reader_gives_back_what_version_2_held() -> None:
    runs = {run.run_id: run for run in read_v2(DATA / "v2-store")}
    assert sorted(runs) == sorted(run["run_id"] for run in EXPECTED)
    for expected in EXPECTED:
        run = runs[expected["run_id"]]
        assert run.problems == [] and run.pinned == expected["pinned"]
        assert [s.index for s in run.steps] == [s["index"] for s in expected["steps"]]
        for step, want in zip(run.steps, expected["steps"], strict=True):
            assert (step.request_hash, step.response_hash) == (
                want["request_hash"],
                want["response_hash"],
            )
            assert (step.model, step.tokens_in, step.tokens_out) == (
                want["model"],
                want["tokens_in"],
                want["tokens_out"],
            )
        assert sorted(json.dumps(s, sort_keys=True) for s in run.spans) == sorted(
            json.dumps(s, sort_keys=True) for s in expected["spans"]
        )


def test_migrate_carries_everything_over_and_keeps_the_old_store(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    before = _tree(root)
    result = migrate(root)
    assert result.problems == []
    assert (result.runs, result.steps) == (len(EXPECTED), sum(len(r["steps"]) for r in EXPECTED))
    assert result.backup == tmp_path / "store.v2-backup" and _tree(result.backup) == before
    assert json.loads((root / "FORMAT").read_text())["version"] == 4
    with Store.open(root, create=False) as store:
        listed = {run.run_id: run for run in store.runs()}
        assert sorted(listed) == sorted(run["run_id"] for run in EXPECTED)
        for expected in EXPECTED:
            run = listed[expected["run_id"]]
            assert run.pinned == expected["pinned"] and run.status != "incomplete"
            assert (run.seed, run.commit) == (expected["seed"], expected["commit"])
            assert _as_listed(store, run.run_id) == expected["steps"]
            spans = sorted(json.dumps(s, sort_keys=True) for s in store.spans(run.run_id))
            assert spans == sorted(json.dumps(s, sort_keys=True) for s in expected["spans"])
        assert [p for p in store.verify() if p.damage] == []


@pytest.mark.subprocess
def test_the_cli_migrates_once_and_names_the_backup(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    refused = _cli("runs", "--store", str(root))
    assert refused.returncode == 2 and "otel-replay migrate" in refused.stderr
    done = _cli("migrate", "--store", str(root))
    assert done.returncode == 0, done.stderr
    assert f"the version-2 store is kept at {root}.v2-backup" in done.stdout
    listed = _cli("runs", "--json", "--store", str(root))
    assert listed.returncode == 0 and len(json.loads(listed.stdout)) == len(EXPECTED)
    again = _cli("migrate", "--store", str(root))
    assert again.returncode == 2 and "version 4" in again.stderr
    assert len(again.stderr.splitlines()) == 1


def test_damage_in_the_old_store_is_named_and_the_rest_carried_over(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    pack = max((root / "packs").rglob("*.pack"), key=lambda p: p.stat().st_size)
    data = bytearray(pack.read_bytes())
    data[10] ^= 0xFF
    pack.write_bytes(bytes(data))
    result = migrate(root)
    assert result.problems and all("\n" not in p for p in result.problems)
    assert any(pack.name in p for p in result.problems)
    assert (result.backup / pack.relative_to(root)).read_bytes() == bytes(data)  # kept as is
    with Store.open(root, create=False) as store:
        assert [p for p in store.verify() if p.damage] == []
        assert store.runs()  # the readable runs are all there


@pytest.mark.subprocess
def test_a_migration_cut_between_its_renames_is_finished(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    result = migrate(root)
    migrated = _tree(root)
    root.rename(tmp_path / "store.v4-new")  # as if cut off after the first rename
    again = migrate(root)
    assert again.backup == result.backup and _tree(root) == migrated
    assert again.resumed and again.problems == []
    root.rename(tmp_path / "store.v4-new")
    done = _cli("migrate", "--store", str(root))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Finished a migration that was cut off:")
    assert "not migrated" not in done.stdout and _tree(root) == migrated


def test_only_versions_2_and_3_are_migrated(tmp_path: Path) -> None:
    Store.open(tmp_path / "new").close()
    with pytest.raises(StoreFormatError, match="version 4"):
        migrate(tmp_path / "new")


PACKS = sorted(str(p.relative_to(DATA / "v2-store")) for p in (DATA / "v2-store").rglob("*.pack"))


@pytest.mark.subprocess
@pytest.mark.parametrize("pack", PACKS)
def test_a_missing_pack_costs_only_its_steps_and_names_each(tmp_path: Path, pack: str) -> None:
    """With a whole pack gone (its records too), migrate names every step the old index
    lists and the new store lacks (run, step, the objects it lacks), carries the others,
    exits 1, and keeps the old store as it was."""
    root = _copy(tmp_path)
    (root / pack).unlink()
    before = _tree(root)
    done = _cli("migrate", "--store", str(root))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1
    assert _tree(tmp_path / "store.v2-backup") == before
    expected = {(run["run_id"], step["index"]): step for run in EXPECTED for step in run["steps"]}
    with Store.open(root, create=False) as store:
        carried = {
            (run.run_id, step["index"]): step
            for run in store.runs()
            for step in _as_listed(store, run.run_id)
        }
        assert [p for p in store.verify() if p.damage] == []
    assert carried and all(expected[key] == step for key, step in carried.items())
    named = {
        (line.split("'")[1], int(line.split(" step ")[1].split(":")[0]))
        for line in done.stdout.splitlines()
        if line.startswith("not migrated: run ")
    }
    assert named == set(expected) - set(carried), done.stdout
    stream = Path(pack).name.split("-", 1)[0]
    assert all(
        f"no pack of stream {stream} holds its record (object" in line
        for line in done.stdout.splitlines()
        if line.startswith("not migrated: ")
    )
    total = len(expected)
    assert f"and {len(carried)} of {total} steps to format version 4" in done.stdout


def test_an_old_index_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    """Without version 2's index, a step lost with a whole pack could not be named: the
    migration carries everything readable and says so, with exit 1."""
    root = _copy(tmp_path)
    (root / "index.sqlite").unlink()
    result = migrate(root)
    assert (result.runs, result.steps) == (len(EXPECTED), sum(len(r["steps"]) for r in EXPECTED))
    assert len(result.problems) == 1 and "index.sqlite cannot be read" in result.problems[0]
