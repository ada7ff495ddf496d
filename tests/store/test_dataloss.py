"""Ways a store used to lose or mix what users recorded, each closed for good."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from otel_replay.errors import StoreNotWritableError
from otel_replay.store import Retention, Store
from tests.store._data import chat_bodies, fixture, span
from tests.store._writer import bodies

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).with_name("otel-replay"))

HOSTILE_IDS = [
    "..",
    ".",
    "a/../../x",
    "/",
    "x\x00y",
    "line\nbreak",
    "x" * 5000,
    "caf\udce9",  # not UTF-8: an id decoded from raw bytes
    "pins",
    "objects",
]


def _listing(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _record(store: Store, run_id: str, turns: int = 2, seed: int = 0) -> None:
    for index, (request, response) in enumerate(chat_bodies(turns, seed)):
        store.put([fixture(run_id, index, request, response)], [span(run_id, index)])
    store.flush()


def test_hostile_run_ids_stay_inside_the_store_and_gc_keeps_what_it_must(tmp_path: Path) -> None:
    root = tmp_path / "inside" / "s"
    root.parent.mkdir()
    outside = _listing(tmp_path)
    with Store.open(root) as store:
        for n, run_id in enumerate(HOSTILE_IDS):
            _record(store, run_id, seed=n)
    new = _listing(tmp_path) - outside
    assert new and all(path == "inside" or path.startswith("inside/s") for path in new)
    keep = Retention(ok_days=10**6, error_days=10**6)
    with Store.open(root, retention=keep) as store:
        assert sorted(r.run_id for r in store.runs()) == sorted(HOSTILE_IDS)
        for n, run_id in enumerate(HOSTILE_IDS):
            assert store.request_body((run_id, 1)) == chat_bodies(2, n)[1][0]
            assert store.spans(run_id)[0]["attributes"]["replay.run.id"] == run_id
        store.pin("..")
        store.pin("caf\udce9")
        report = store.gc()
        assert report.runs_removed == () and report.blobs_removed == 0
    with Store.open(root, retention=Retention(ok_days=0, error_days=0)) as store:
        report = store.gc(now=time.time() + 86_400)
        assert sorted(report.runs_removed) == sorted(set(HOSTILE_IDS) - {"..", "caf\udce9"})
        assert sorted(r.run_id for r in store.runs()) == sorted(["..", "caf\udce9"])
        assert store.request_body(("..", 0)) == chat_bodies(2, 0)[0][0]
        assert [p for p in store.verify() if p.damage] == []
    with Store.rebuild(root) as store:  # the ids come back from the records, pins and all
        assert {(r.run_id, r.pinned) for r in store.runs()} == {("..", True), ("caf\udce9", True)}


def test_hostile_run_ids_through_import(tmp_path: Path) -> None:
    lines = []
    for n, run_id in enumerate(["..", "a/../../x", "x\x00y", "line\nbreak"]):
        attrs = [
            {"key": "replay.run.id", "value": {"stringValue": run_id}},
            {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
            {"key": "gen_ai.provider.name", "value": {"stringValue": "openai"}},
            {"key": "gen_ai.request.model", "value": {"stringValue": "m"}},
            {
                "key": "gen_ai.output.messages",
                "value": {
                    "stringValue": json.dumps(
                        [{"role": "assistant", "parts": [{"type": "text", "content": "hi"}]}]
                    )
                },
            },
            {"key": "replay.step.index", "value": {"intValue": "0"}},
        ]
        span_json = {
            "traceId": f"{n + 1:032x}",
            "spanId": f"{n + 1:016x}",
            "name": "chat m",
            "kind": 3,
            "startTimeUnixNano": str(1_700_000_000 * 10**9),
            "endTimeUnixNano": str(1_700_000_001 * 10**9),
            "attributes": attrs,
        }
        lines.append(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span_json]}]}]}))
    source = tmp_path / "traces.jsonl"
    source.write_text("\n".join(lines) + "\n")
    root = tmp_path / "inside" / "s"
    root.parent.mkdir()
    outside = _listing(tmp_path)
    done = subprocess.run(
        [CLI, "import", str(source), "--store", str(root)],
        check=False,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert all(p.startswith("inside") for p in _listing(tmp_path) - outside)
    keep = Retention(ok_days=10**6, error_days=10**6)
    with Store.open(root, create=False, retention=keep) as store:
        assert sorted(r.run_id for r in store.runs()) == sorted(
            ["..", "a/../../x", "x\x00y", "line\nbreak"]
        )
        store.gc()
        assert len(store.runs()) == 4


def test_four_processes_sharing_a_run_id_keep_four_runs(tmp_path: Path) -> None:
    root = tmp_path / "s"
    Store.open(root).close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.store._writer", str(root), "shared", "100"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    with Store.open(root) as store:
        runs = store.runs()
        assert sorted(r.run_id for r in runs) == ["shared", "shared@2", "shared@3", "shared@4"]
        assert [r.step_count for r in runs] == [100] * 4
        assert {r.recorded_id for r in runs} == {"shared"}
        expected = bodies("shared", 100)
        for run in runs:
            assert [store.request_body(s) for s in store.steps(run.run_id)] == [
                q for q, _ in expected
            ]
        assert store.verify() == []


def test_processes_writing_at_once_share_their_objects(tmp_path: Path) -> None:
    alone = tmp_path / "alone"
    with Store.open(alone) as store:
        _record(store, "one", turns=12)
    together = tmp_path / "together"
    Store.open(together).close()
    script = (
        "import sys\n"
        "from otel_replay.store import Store\n"
        "from tests.store._data import chat_bodies, fixture, span\n"
        "with Store.open(sys.argv[1]) as store:\n"
        "    for index, (q, r) in enumerate(chat_bodies(12, 0)):\n"
        "        store.put([fixture(sys.argv[2], index, q, r)], [span(sys.argv[2], index)])\n"
        "        store.flush()\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(together), f"run-{n}"], cwd=ROOT)
        for n in range(3)
    ]
    assert [proc.wait(timeout=120) for proc in procs] == [0, 0, 0]
    with Store.open(together) as store:
        store.compact()  # copies of an object two writers raced to store are merged away
        assert len(store.runs()) == 3

    def pack_bytes(root: Path) -> int:
        return sum(p.stat().st_size for p in (root / "objects").rglob("*.pack"))

    packs = list((together / "objects").rglob("*.pack"))
    assert len(packs) == 1, packs
    assert pack_bytes(together) < 1.2 * pack_bytes(alone)


def test_a_deleted_index_is_rebuilt_from_the_files_on_open(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with Store.open(root) as store:
        _record(store, "a")
        _record(store, "b", seed=1)
    (root / "index.sqlite").unlink()
    listed = subprocess.run(
        [CLI, "runs", "--json", "--store", str(root)], check=False, capture_output=True, text=True
    )
    assert listed.returncode == 0, listed.stderr
    assert sorted(r["run_id"] for r in json.loads(listed.stdout)) == ["a", "b"]
    checked = subprocess.run(
        [CLI, "verify", "--store", str(root)], check=False, capture_output=True, text=True
    )
    assert checked.returncode == 0 and "2 runs, 4 steps" in checked.stdout


@pytest.mark.parametrize("with_index", [True, False])
def test_a_read_only_store_is_read(tmp_path: Path, with_index: bool) -> None:
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is needed for a read-only mount")
    root = tmp_path / "s"
    with Store.open(root) as store:
        _record(store, "ro-run", turns=3)
    if not with_index:
        (root / "index.sqlite").unlink()
    before = _listing(root)
    script = " && ".join(
        [
            f"mount --bind -o ro {root} {root}",
            f"{CLI} runs --json --store {root} > {tmp_path}/runs.json",
            f"{CLI} show ro-run --json --store {root} > {tmp_path}/show.json",
            f"{CLI} verify --store {root} > {tmp_path}/verify.txt",
            f'{sys.executable} -c "import sys; from otel_replay.store import Store; '
            f"s = Store.open('{root}'); print(s.read_only)\" > {tmp_path}/ro.txt",
        ]
    )
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], check=False, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert [r["run_id"] for r in json.loads((tmp_path / "runs.json").read_text())] == ["ro-run"]
    assert len(json.loads((tmp_path / "show.json").read_text())["steps"]) == 3
    assert "is intact: 1 run, 3 steps" in (tmp_path / "verify.txt").read_text()
    assert (tmp_path / "ro.txt").read_text().strip() == "True"
    assert _listing(root) == before


def test_a_read_only_store_refuses_writes(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with Store.open(root) as store:
        _record(store, "w")
    script = (
        f'mount --bind -o ro {root} {root} && {sys.executable} -c "'
        "from otel_replay.store import Store; from tests.store._data import fixture; "
        f"s = Store.open('{root}'); s.put([fixture('x', 0, b'q', b'a')]); s.flush()\""
    )
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], check=False, capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 1 and StoreNotWritableError.__name__ in done.stderr
    assert "read-only" in done.stderr
