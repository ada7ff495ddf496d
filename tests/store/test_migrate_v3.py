"""``otel-replay migrate`` from format version 3: a store written by the last version-3 code
(``data/make_v3_store.py``: real SDK runs against the stand-in, a pin, a foreign span and an
edited one) becomes version 4 in place, every run, step and span read back exactly."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_replay.errors import CorruptBlobError, StoreFormatError
from otel_replay.store import Store
from otel_replay.store._migrate import migrate
from otel_replay.store._records import decode_records, merge_frames, read_frames

DATA = Path(__file__).with_name("data")
EXPECTED: list[dict[str, Any]] = json.loads((DATA / "v3-store.json").read_text())
CLI = str(Path(sys.executable).with_name("otel-replay"))


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    shutil.copytree(DATA / "v3-store", root)
    return root


def _size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _derived(root: Path) -> int:
    return sum(
        entry.derived is not None
        for path in (root / "runs").rglob("*.rec")
        for record in decode_records(path.read_bytes()).records
        for entry in record.spans
    )


def test_version_3_is_refused_with_the_hint(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    with pytest.raises(StoreFormatError, match=r"format version 3; .*`otel-replay migrate`"):
        Store.open(root, create=False)


def test_migrate_keeps_every_run_step_and_span_and_frees_space_at_gc(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    assert _derived(root) == 0
    result = migrate(root)
    assert (result.version, result.problems, result.backup) == (3, [], None)
    assert result.runs == len(EXPECTED)
    assert result.steps == sum(len(run["steps"]) for run in EXPECTED)
    assert json.loads((root / "FORMAT").read_text())["version"] == 4
    assert _derived(root) > 0  # the spans' content is left out of the records now
    before = _size(root)
    with Store.open(root, create=False) as store:
        listed = {run.run_id: run for run in store.runs()}
        assert sorted(listed) == sorted(run["run_id"] for run in EXPECTED)
        for expected in EXPECTED:
            run = listed[expected["run_id"]]
            assert (run.pinned, run.status) == (expected["pinned"], expected["status"])
            steps = [
                {
                    "index": info.index,
                    "request_hash": info.request_hash,
                    "response_hash": info.response_hash,
                    "headers": [list(h) for h in store.read_step(info).response_headers],
                }
                for info in store.steps(run.run_id)
            ]
            assert steps == expected["steps"]
            spans = store.spans(run.run_id)
            assert spans == expected["spans"]
            assert [list(s["attributes"]) for s in spans] == [
                list(s["attributes"]) for s in expected["spans"]
            ]
        assert [p for p in store.verify() if p.damage] == []
        store.gc()
        assert [p for p in store.verify() if p.damage] == []
        assert [store.spans(run["run_id"]) for run in EXPECTED] == [
            run["spans"] for run in EXPECTED
        ]
    assert _size(root) < before
    with pytest.raises(StoreFormatError, match="version 4"):
        migrate(root)


def test_a_migration_cut_off_is_run_again(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    records = sorted((root / "runs").rglob("*.rec"))
    # As if cut off after rewriting the first record file: run again, it finishes.
    first = _copy(tmp_path / "done")
    migrate(first)
    shutil.copyfile(first / records[0].relative_to(root), records[0])
    result = migrate(root)
    assert result.problems == []
    with Store.open(root, create=False) as store:
        assert [store.spans(run["run_id"]) for run in EXPECTED] == [
            run["spans"] for run in EXPECTED
        ]


def test_a_damaged_record_file_is_named_and_left_as_it_was(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    path = max((root / "runs").rglob("*.rec"), key=lambda p: p.stat().st_size)
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))
    result = migrate(root)
    assert len(result.problems) == 1 and path.name in result.problems[0]
    assert "left as it was" in result.problems[0]
    assert path.read_bytes() == bytes(data)


@pytest.mark.subprocess
def test_the_cli_migrates_version_3(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    refused = subprocess.run(
        [CLI, "runs", "--store", str(root)], check=False, capture_output=True, text=True
    )
    assert refused.returncode == 2 and "otel-replay migrate" in refused.stderr
    assert len(refused.stderr.splitlines()) == 1
    done = subprocess.run(
        [CLI, "migrate", "--store", str(root)], check=False, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "to format version 4" in done.stdout and "otel-replay gc" in done.stdout
    listed = subprocess.run(
        [CLI, "runs", "--json", "--store", str(root)], check=False, capture_output=True, text=True
    )
    assert listed.returncode == 0 and len(json.loads(listed.stdout)) == len(EXPECTED)


def test_a_span_whose_content_does_not_rebuild_is_named(tmp_path: Path) -> None:
    """A derived attribute that no longer comes back as recorded (a codec that reads the
    body differently, a damaged record) is damage: named by verify, and by spans()."""
    root = _copy(tmp_path)
    migrate(root)
    path = next(
        p
        for p in sorted((root / "runs").rglob("*.rec"))
        if any(e.derived for r in decode_records(p.read_bytes()).records for e in r.spans)
    )
    lines = []
    for raw in read_frames(path.read_bytes()).records:
        value = json.loads(raw)
        for item in value["spans"]:
            if item.get("derived"):
                item["derived"]["crc"] ^= 1
                span_id = item["span"]["span_id"]
        lines.append(json.dumps(value, separators=(",", ":")).encode())
    path.write_bytes(merge_frames(lines, 3))
    run_id = decode_records(path.read_bytes()).records[0].run_id
    with Store.rebuild(root) as store:
        named = [p for p in store.verify() if p.damage]
        assert named and all(p.kind == "record" and path.name in p.message for p in named)
        assert any(span_id in p.message for p in named)
        with pytest.raises(
            CorruptBlobError, match=f"span [0-9a-f]{{16}} of record file .*{path.name}"
        ):
            store.spans(run_id)


def test_a_format_4_store_written_today_reads_back_as_recorded(tmp_path: Path) -> None:
    """``data/v4-store`` is ``data/v3-store`` migrated and gc'd by the first format-4 code, and
    committed as it was written. Its spans' content is rebuilt by the codecs on every read: a
    codec that comes to read a stored body differently would make those spans unreadable,
    losing recorded content, and fails here first. Such a change needs the old reading kept."""
    root = tmp_path / "store"
    shutil.copytree(DATA / "v4-store", root)
    assert _derived(root) > 0
    with Store.open(root, create=False) as store:
        assert [p for p in store.verify() if p.damage] == []
        for expected in EXPECTED:
            spans = store.spans(expected["run_id"])
            assert spans == expected["spans"]
            assert [list(s["attributes"]) for s in spans] == [
                list(s["attributes"]) for s in expected["spans"]
            ]
