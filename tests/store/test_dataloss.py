"""Ways a store used to lose or mix what users recorded, each closed for good."""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from otel_replay.errors import CorruptBlobError, StoreError, StoreNotWritableError
from otel_replay.store import Retention, Store, _repack, _rows, _sync
from otel_replay.store._format import record_path
from otel_replay.store._objects import manifest_refs
from otel_replay.store._pack import KIND_MANIFEST
from tests.store._data import chat_bodies, make_step, span, tag
from tests.store._writer import bodies, spawn

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).with_name("otel-replay"))
KEEP = Retention(ok_days=10**6, error_days=10**6)
NONE = Retention(ok_days=0, error_days=0)
DAY = 86_400.0

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


def _store_files(root: Path) -> dict[str, bytes]:
    """The store's files but its index (which gc may vacuum)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and not p.name.startswith("index.sqlite")
    }


def _record(store: Store, run_id: str, turns: int = 2, seed: int = 0) -> None:
    for index, (request, response) in enumerate(chat_bodies(turns, seed)):
        store.put([make_step(run_id, index, request, response)], [span(run_id, index)])
    store.flush()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], check=False, capture_output=True, text=True)


def test_hostile_run_ids_stay_inside_the_store_and_gc_keeps_what_it_must(tmp_path: Path) -> None:
    root = tmp_path / "inside" / "s"
    root.parent.mkdir()
    outside = _listing(tmp_path)
    with Store.open(root) as store:
        for n, run_id in enumerate(HOSTILE_IDS):
            _record(store, run_id, seed=n)
    new = _listing(tmp_path) - outside
    assert new and all(path == "inside" or path.startswith("inside/s") for path in new)
    recorded = _store_files(root)
    with Store.open(root, retention=KEEP) as store:
        assert sorted(r.run_id for r in store.runs()) == sorted(HOSTILE_IDS)
        for n, run_id in enumerate(HOSTILE_IDS):
            assert store.run(run_id).step_count == 2
            for index, (request, response) in enumerate(chat_bodies(2, n)):
                assert store.request_body(run_id, index) == request
                assert store.response_body(run_id, index) == response
            assert [s["attributes"]["replay.run.id"] for s in store.spans(run_id)] == [run_id] * 2
        report = store.gc(now=time.time() + 30 * DAY)
        assert (report.runs_removed, report.blobs_removed, report.files_removed) == ((), 0, 0)
        store.pin("..")
        store.pin("caf\udce9")
    assert _store_files(root).keys() - recorded.keys() == {
        f"pins/{name}" for name in os.listdir(root / "pins")
    }
    assert {k: v for k, v in _store_files(root).items() if k in recorded} == recorded
    with Store.open(root, retention=NONE) as store:
        report = store.gc(now=time.time() + DAY)
        assert sorted(report.runs_removed) == sorted(set(HOSTILE_IDS) - {"..", "caf\udce9"})
        assert sorted(r.run_id for r in store.runs()) == sorted(["..", "caf\udce9"])
        assert store.request_body("..", 1) == chat_bodies(2, 0)[1][0]
        assert store.request_body("caf\udce9", 1) == chat_bodies(2, 7)[1][0]
        assert [p for p in store.verify() if p.damage] == []
    assert all(p.startswith("inside") for p in _listing(tmp_path) - outside)
    with Store.rebuild(root) as store:  # the ids come back from the records, pins and all
        assert {(r.run_id, r.pinned) for r in store.runs()} == {("..", True), ("caf\udce9", True)}


def _otlp_line(n: int, run_id: str, request: bytes, response: bytes) -> str:
    """One OTLP JSON document holding an LLM step span with its bodies inline."""
    attrs: dict[str, dict[str, str]] = {
        "replay.run.id": {"stringValue": run_id},
        "replay.step.index": {"intValue": "0"},
        "replay.step.kind": {"stringValue": "llm"},
        "gen_ai.operation.name": {"stringValue": "chat"},
        "gen_ai.provider.name": {"stringValue": "openai"},
        "gen_ai.request.model": {"stringValue": "m"},
        "http.request.method": {"stringValue": "POST"},
        "url.full": {"stringValue": "https://api.openai.com/v1/chat/completions"},
        "replay.request.body": {"stringValue": request.decode()},
        "replay.request.hash": {"stringValue": tag(request)},
        "replay.response.body": {"stringValue": response.decode()},
        "replay.response.hash": {"stringValue": tag(response)},
        "replay.response.status_code": {"intValue": "200"},
        "replay.response.content_type": {"stringValue": "application/json"},
    }
    span_json = {
        "traceId": f"{n + 1:032x}",
        "spanId": f"{n + 1:016x}",
        "name": "chat m",
        "kind": 3,
        "startTimeUnixNano": str(time.time_ns()),
        "endTimeUnixNano": str(time.time_ns() + 10**9),
        "attributes": [{"key": key, "value": value} for key, value in attrs.items()],
    }
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span_json]}]}]})


def _chat_step(n: int) -> tuple[bytes, bytes]:
    request = json.dumps({"model": "m", "messages": [{"role": "user", "content": f"q{n}"}]})
    response = json.dumps(
        {
            "id": f"c{n}",
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": f"a{n}"},
                    "finish_reason": "stop",
                }
            ],
        }
    )
    return request.encode(), response.encode()


@pytest.mark.subprocess
def test_hostile_run_ids_through_import(tmp_path: Path) -> None:
    ids = [run_id for run_id in HOSTILE_IDS if run_id != "caf\udce9"]
    lines = [_otlp_line(n, run_id, *_chat_step(n)) for n, run_id in enumerate(ids)]
    source = tmp_path / "traces.jsonl"
    source.write_text("\n".join(lines) + "\n")
    root = tmp_path / "inside" / "s"
    root.parent.mkdir()
    outside = _listing(tmp_path)
    done = _cli("import", str(source), "--store", str(root))
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith(f"{len(ids)} runs imported into {root}\n")
    assert all(p.startswith("inside") for p in _listing(tmp_path) - outside)
    recorded = _store_files(root)
    with Store.open(root, create=False, retention=KEEP) as store:
        assert sorted(r.run_id for r in store.runs()) == sorted(ids)
        for n, run_id in enumerate(ids):
            assert (store.request_body(run_id, 0), store.response_body(run_id, 0)) == (
                _chat_step(n)
            )
        report = store.gc()
        assert (report.runs_removed, report.blobs_removed, report.files_removed) == ((), 0, 0)
        assert len(store.runs()) == len(ids)
        store.pin("..")
        store.pin("a/../../x")
    assert {k: v for k, v in _store_files(root).items() if k in recorded} == recorded
    with Store.open(root, retention=NONE) as store:
        report = store.gc(now=time.time() + DAY)
        assert sorted(report.runs_removed) == sorted(set(ids) - {"..", "a/../../x"})
        assert sorted(r.run_id for r in store.runs()) == ["..", "a/../../x"]
        assert store.request_body("a/../../x", 0) == _chat_step(ids.index("a/../../x"))[0]
        assert [p for p in store.verify() if p.damage] == []
    assert all(p.startswith("inside") for p in _listing(tmp_path) - outside)


@pytest.mark.subprocess
def test_hostile_run_ids_are_printed_escaped(tmp_path: Path) -> None:
    """An id holding NUL, a newline, a terminal escape or a bidi override is shown escaped by
    every verb that prints it, so it can neither break a listing nor drive the terminal;
    ``--json`` keeps it exact."""
    ids = {
        "x\x00y": "x\\x00y",
        "line\nbreak": "line\\x0abreak",
        "red\x1b[31mrun": "red\\x1b[31mrun",
        "evil\u202eexe.txt": "evil\\u202eexe.txt",
    }
    root = tmp_path / "s"
    with Store.open(root) as store:
        for run_id in ids:
            _record(store, run_id, turns=1)
    done = _cli("runs", "--store", str(root))
    assert done.returncode == 0, done.stderr
    for shown in ids.values():
        assert shown in done.stdout
    assert not set("\x00\x1b\u202e") & set(done.stdout)
    listed = json.loads(_cli("runs", "--json", "--store", str(root)).stdout)
    assert sorted(run["run_id"] for run in listed) == sorted(ids)
    shown = _cli("show", "line", "--store", str(root))  # by prefix
    assert shown.returncode == 0 and "run line\\x0abreak" in shown.stdout.splitlines()[0]
    pinned = _cli("pin", "red", "--store", str(root))
    assert pinned.stdout == "Pinned red\\x1b[31mrun: gc keeps it until it is unpinned.\n"
    missing = _cli("show", "no\x1b]0;owned\x07", "--store", str(root))
    assert missing.returncode == 2 and "\x1b" not in missing.stderr
    assert missing.stderr.count("\n") == 1


@pytest.mark.subprocess
def test_an_id_that_otlp_json_cannot_carry_is_refused_by_import(tmp_path: Path) -> None:
    """A lone surrogate is not Unicode: an OTLP file naming such an id is refused whole, in one
    line naming the line, and nothing is written."""
    source = tmp_path / "traces.jsonl"
    source.write_text(_otlp_line(0, "caf\udce9", *_chat_step(0)) + "\n")
    before = _listing(tmp_path)
    done = _cli("import", str(source), "--store", str(tmp_path / "s"))
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1 and f"{source}:1: invalid" in done.stderr
    assert _listing(tmp_path) == before


@pytest.mark.subprocess
def test_four_processes_sharing_a_run_id_keep_four_runs(tmp_path: Path) -> None:
    root = tmp_path / "s"
    Store.open(root).close()
    go = tmp_path / "go"
    procs = [spawn(root, "shared", 100, "--pid", "--go", str(go)) for _ in range(4)]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    go.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    with Store.open(root) as store:
        runs = store.runs()
        assert sorted(r.run_id for r in runs) == ["shared", "shared@2", "shared@3", "shared@4"]
        assert [r.step_count for r in runs] == [100] * 4
        assert {(r.recorded_id, r.status) for r in runs} == {("shared", "ok")}
        pids = set()
        for run in runs:
            requests = [store.request_body(s) for s in store.steps(run.run_id)]
            (pid,) = {json.loads(request)["pid"] for request in requests}  # one process a run
            pids.add(pid)
            expected = bodies("shared", 100, pid=pid)
            assert requests == [q for q, _ in expected]
            assert [store.response_body(s) for s in store.steps(run.run_id)] == [
                r for _, r in expected
            ]
            assert len(store.spans(run.run_id)) == 100
        assert pids == {proc.pid for proc in procs}
        assert [p for p in store.verify() if p.damage] == []


@pytest.mark.subprocess
def test_a_deleted_index_is_rebuilt_from_the_files_on_open(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with Store.open(root) as store:
        _record(store, "a", turns=3)
        _record(store, "b", seed=1)
        store.put([make_step("c", 0, b"q", None, error_type="ConnectError")])
        store.pin("b")
    with Store.open(root) as store:
        runs = store.runs()
        assert [(r.run_id, r.status, r.pinned) for r in runs] == [
            ("a", "ok", False),
            ("b", "ok", True),
            ("c", "ok", False),  # a step failed; the run did not
        ]
    (root / "index.sqlite").unlink()
    listed = _cli("runs", "--json", "--store", str(root))
    assert listed.returncode == 0, listed.stderr
    assert sorted((r["run_id"], r["step_count"]) for r in json.loads(listed.stdout)) == [
        ("a", 3),
        ("b", 2),
        ("c", 1),
    ]
    (root / "index.sqlite").unlink()
    checked = _cli("verify", "--store", str(root))
    assert checked.returncode == 0 and "3 runs, 6 steps" in checked.stdout
    for opened in (Store.open, Store.rebuild):
        (root / "index.sqlite").unlink()
        with opened(root) as store:
            assert store.runs() == runs  # statuses, facts and the pin too
            for run_id, turns, seed in (("a", 3, 0), ("b", 2, 1)):
                pairs = chat_bodies(turns, seed)
                assert [store.request_body(s) for s in store.steps(run_id)] == [q for q, _ in pairs]
                assert [store.response_body(s) for s in store.steps(run_id)] == [
                    r for _, r in pairs
                ]
            assert len(store.spans("a")) == 3
            assert store.verify() == []


@pytest.mark.subprocess
def test_an_empty_index_file_is_rebuilt_from_the_files_not_taken_for_an_empty_store(
    tmp_path: Path,
) -> None:
    # A zero-byte index.sqlite (a writer cut off before its first commit, a disk mishap) was
    # opened as a new, empty index: `runs` said "No runs in the store yet", `show` named no
    # such run, and the files stayed unread until someone thought of --rebuild-index.
    root = tmp_path / "s"
    with Store.open(root) as store:
        _record(store, "a", turns=3)
        _record(store, "b", seed=1)
        store.pin("b")
    with Store.open(root) as store:
        runs = store.runs()
    (root / "index.sqlite").write_bytes(b"")
    listed = _cli("runs", "--json", "--store", str(root))
    assert listed.returncode == 0, listed.stderr
    assert sorted((r["run_id"], r["step_count"]) for r in json.loads(listed.stdout)) == [
        ("a", 3),
        ("b", 2),
    ]
    (root / "index.sqlite").write_bytes(b"")
    with Store.open(root) as store:
        assert store.runs() == runs  # statuses and the pin too
        pairs = chat_bodies(3, 0)
        assert [store.response_body(s) for s in store.steps("a")] == [r for _, r in pairs]
        assert store.verify() == []


@pytest.mark.subprocess
def test_a_writer_killed_before_its_index_commit_loses_nothing(tmp_path: Path) -> None:
    """Its pack and record are published, the index never hears of them: verify names them as
    unindexed (a notice), and a rebuild reads them."""
    root = tmp_path / "s"
    with Store.open(root) as store:
        _record(store, "before", turns=2)
    script = (
        "import os, sys\n"
        "from otel_replay.store import Store\n"
        "from otel_replay.store._index import Index\n"
        "from tests.store._data import chat_bodies, make_step\n"
        "store = Store.open(sys.argv[1])\n"
        "store.put([make_step('cut', n, q, r) for n, (q, r) in enumerate(chat_bodies(3, 5))])\n"
        "name_runs = Index.transaction\n"
        "def dying(self):  # the first transaction names the run; the second indexes the files\n"
        "    Index.transaction = lambda self: os._exit(9)\n"
        "    return name_runs(self)\n"
        "Index.transaction = dying\n"
        "store.flush()\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(root)], cwd=ROOT, check=False)
    assert done.returncode == 9
    with Store.open(root) as store:
        assert [r.run_id for r in store.runs()] == ["before"]
        problems = store.verify()
        assert all(not p.damage for p in problems)
        unindexed = sorted(p.path or "" for p in problems if p.kind == "unindexed")
        assert len(unindexed) == 2
        assert unindexed[0].startswith("objects/") and unindexed[0].endswith(".pack")
        assert unindexed[1].startswith("runs/") and unindexed[1].endswith(".rec")
    # What the command says: each notice on a line of its own, and the store is sound (exit 0).
    temp = root / "objects" / "ab" / ".tmp-4242-0badcafe"  # as a writer killed mid-write leaves
    temp.parent.mkdir(parents=True, exist_ok=True)
    temp.write_bytes(b"cut off")
    done = _cli("verify", "--store", str(root))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"notice (temp): temporary file {temp} (a writer was cut off)",
        f"notice (unindexed): pack {root}/{unindexed[0]} is not in the index (a writer was cut "
        "off before its commit, or another process wrote it); `verify --rebuild-index` reads it",
        f"notice (unindexed): record file {root}/{unindexed[1]} is not in the index",
        f"The store at {root} is intact: 1 run, 2 steps, every body re-hashed.",
    ]
    done = _cli("verify", "--rebuild-index", "--store", str(root))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == [
        "notice (incomplete): run 'cut' was not closed by its recorder (cut off, still "
        "recording, or imported before its last spans arrived): 3 steps stored",
        f"The store at {root} is intact: 2 runs, 5 steps, every body re-hashed.",
    ]
    temp.unlink()
    with Store.rebuild(root) as store:
        assert [(r.run_id, r.status) for r in store.runs()] == [
            ("before", "ok"),
            ("cut", "incomplete"),
        ]
        assert [store.request_body(s) for s in store.steps("cut")] == [
            q for q, _ in chat_bodies(3, 5)
        ]
        assert [p.kind for p in store.verify()] == ["incomplete"]


def test_a_rebuild_keeps_the_names_and_pins_of_a_reused_ids_recordings(tmp_path: Path) -> None:
    root = tmp_path / "s"
    now = time.time_ns()
    early, late = Store.open(root), Store.open(root)
    # The recording that started first commits its first flush second (its call was slower).
    late.put([make_step("same", 0, b"started second", start_ns=now)])
    late.flush()
    early.put([make_step("same", 0, b"started first", start_ns=now - 10**9)])
    early.flush()
    early.close()
    late.close()
    with Store.open(root) as store:
        names = {r.run_id: store.request_body(r.run_id, 0) for r in store.runs()}
        assert names == {"same": b"started second", "same@2": b"started first"}
        store.pin("same")
    with Store.rebuild(root) as store:
        assert {r.run_id: store.request_body(r.run_id, 0) for r in store.runs()} == names
        assert store.run("same").pinned and not store.run("same@2").pinned
    with Store.open(root, retention=NONE) as store:
        store.gc(now=time.time() + DAY)
        assert [store.request_body(r.run_id, 0) for r in store.runs()] == [b"started second"]


def _frames_touched(store: Store, digest_tag: str | None) -> set[tuple[str, int]]:
    """The (pack, frame offset) of every object a body is assembled from."""
    if digest_tag is None:
        return set()
    touched: set[tuple[str, int]] = set()
    todo = [bytes.fromhex(digest_tag[7:])]
    while todo:
        digest = todo.pop()
        where = store._locate(digest)
        assert where is not None
        touched.add((where.pack, where.frame_offset))
        kind, data = store._reader.raw(digest)
        if kind == KIND_MANIFEST:
            todo.extend(manifest_refs(data))
    return touched


def test_a_flipped_byte_in_a_frame_costs_only_the_bodies_that_use_the_frame(
    tmp_path: Path,
) -> None:
    root = tmp_path / "s"
    rng = random.Random(3)
    blobs = [(rng.randbytes(90_000), rng.randbytes(30_000)) for _ in range(12)]
    chat = chat_bodies(12, seed=4)
    with Store.open(root) as store:
        store.put(make_step("blobs", n, q, r) for n, (q, r) in enumerate(blobs))
        store.put(make_step("chat", n, q, r) for n, (q, r) in enumerate(chat))
        store.flush()
    expected = {"blobs": blobs, "chat": chat}
    with Store.open(root) as store:
        touched = {
            (s.run_id, s.index): (
                _frames_touched(store, s.request_hash),
                _frames_touched(store, s.response_hash),
            )
            for run_id in expected
            for s in store.steps(run_id)
        }
    frames = sorted({frame for pair in touched.values() for side in pair for frame in side})
    (pack,) = {name for name, _ in frames}
    assert len(frames) >= 2, frames
    # A frame some steps use and others do not.
    target = frames[len(frames) // 2]
    pack_file = root / "objects" / pack[:2] / f"{pack}.pack"
    data = bytearray(pack_file.read_bytes())
    after = sorted(at for _, at in frames if at > target[1])
    end = after[0] if after else len(data) - 100  # the table and footer are never touched
    data[(target[1] + end) // 2] ^= 0x55
    pack_file.write_bytes(bytes(data))
    damaged = {key for key, (req, resp) in touched.items() if target in req | resp}
    assert damaged and len(damaged) < len(touched)

    with Store.rebuild(root) as store:
        assert {r.run_id: r.step_count for r in store.runs()} == {"blobs": 12, "chat": 12}
        for (run_id, index), (req, resp) in touched.items():
            request, response = expected[run_id][index]
            for frames_used, read, body in (
                (req, store.request_body, request),
                (resp, store.response_body, response),
            ):
                if target in frames_used:
                    with pytest.raises(CorruptBlobError, match=rf"sha256:[0-9a-f]{{64}}.*{pack}"):
                        read(run_id, index)
                else:
                    assert read(run_id, index) == body
            if (run_id, index) not in damaged:
                assert store.read_step(run_id, index).request_body == request
        problems = store.verify()
        rel = f"objects/{pack[:2]}/{pack}.pack"
        assert any(p.kind == "pack" and p.path == rel for p in problems)
        assert any(f"frame at byte {target[1]}" in p.message for p in problems)
        assert {(p.run_id, p.step_index) for p in problems if p.kind == "body"} == damaged


@pytest.mark.subprocess
@pytest.mark.parametrize("with_index", [True, False])
def test_a_read_only_store_is_read(tmp_path: Path, with_index: bool) -> None:
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is needed for a read-only mount")
    root = tmp_path / "s"
    pairs = chat_bodies(3)
    with Store.open(root) as store:
        for index, (request, response) in enumerate(pairs):
            store.put([make_step("ro-run", index, request, response, kind="http")])
        store.put([make_step("other", 0, b"q", b"a", error_type="E")])
    if not with_index:
        (root / "index.sqlite").unlink()
    before = _store_files(root)
    check = (
        "import sys; from otel_replay.store import Store; s = Store.open(sys.argv[1]); "
        "body = sys.stdin.buffer.read(); "
        "print(s.read_only, len(s.runs()), s.request_body('ro-run', 2) == body)"
    )
    script = " && ".join(
        [
            f"mount --bind -o ro {root} {root}",
            f"{CLI} runs --json --store {root} > {tmp_path}/runs.json",
            f"{CLI} show ro-run --json --store {root} > {tmp_path}/show.json",
            f"{CLI} verify --store {root} > {tmp_path}/verify.txt",
            f'{sys.executable} -c "{check}" {root} < {tmp_path}/body > {tmp_path}/ro.txt',
        ]
    )
    (tmp_path / "body").write_bytes(pairs[2][0])
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], check=False, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    listed = json.loads((tmp_path / "runs.json").read_text())
    assert sorted((r["run_id"], r["step_count"], r["status"]) for r in listed) == [
        ("other", 1, "ok"),
        ("ro-run", 3, "ok"),
    ]
    shown = json.loads((tmp_path / "show.json").read_text())["steps"]
    assert [step["request_body"] for step in shown] == [q.decode() for q, _ in pairs]
    assert [step["response_body"] for step in shown] == [r.decode() for _, r in pairs]
    assert "is intact: 2 runs, 4 steps" in (tmp_path / "verify.txt").read_text()
    assert (tmp_path / "ro.txt").read_text() == "True 2 True\n"
    assert _store_files(root) == before
    assert (root / "index.sqlite").exists() == with_index


REPLAYED_PROGRAM = """
import json, sys
import httpx
with httpx.Client() as client:
    for body in json.load(open(sys.argv[1])):
        url = "https://api.example.test/v1/chat/completions"
        headers = {"content-type": "application/json"}
        answer = client.post(url, content=body.encode(), headers=headers)
        print(answer.status_code, json.dumps(answer.text))
"""


@pytest.mark.subprocess
@pytest.mark.parametrize("with_index", [True, False])
def test_a_read_only_store_is_replayed(tmp_path: Path, with_index: bool) -> None:
    """``otel-replay replay`` serves a run from a store mounted read-only (a CI cache): the
    program gets every recorded answer, the report says identical, and nothing changes."""
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is needed for a read-only mount")
    root = tmp_path / "s"
    pairs = chat_bodies(3)
    with Store.open(root) as store:
        for index, (request, response) in enumerate(pairs):
            store.put([make_step("ro-run", index, request, response, kind="http")])
    if not with_index:
        (root / "index.sqlite").unlink()
    before = _store_files(root)
    (tmp_path / "bodies.json").write_text(json.dumps([q.decode() for q, _ in pairs]))
    (tmp_path / "program.py").write_text(REPLAYED_PROGRAM)
    script = (
        f"mount --bind -o ro {root} {root} && {CLI} replay ro-run --store {root} -- "
        f"{sys.executable} {tmp_path}/program.py {tmp_path}/bodies.json"
    )
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], check=False, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    printed = [f"200 {json.dumps(r.decode())}" for _, r in pairs]
    assert done.stdout.splitlines()[:3] == printed
    assert "replay of run ro-run" in done.stdout and "identical" in done.stdout
    assert "network attempts: 0" in done.stdout
    assert _store_files(root) == before
    assert (root / "index.sqlite").exists() == with_index


@pytest.mark.subprocess
@pytest.mark.parametrize("with_index", [True, False])
def test_a_read_only_store_refuses_writes(tmp_path: Path, with_index: bool) -> None:
    root = tmp_path / "s"
    with Store.open(root) as store:
        _record(store, "w")
    if not with_index:
        (root / "index.sqlite").unlink()
    script = (
        f'mount --bind -o ro {root} {root} && {sys.executable} -c "'
        "from otel_replay.store import Store; from tests.store._data import make_step; "
        f"s = Store.open('{root}'); assert s.read_only; print(len(s.runs()), flush=True); "
        "s.put([make_step('x', 0, b'q', b'a')]); s.flush()\""
    )
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], check=False, capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 1 and done.stdout == "1\n"
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"otel_replay.errors.{StoreNotWritableError.__name__}: ")
    assert "read-only" in last


@pytest.mark.subprocess
def test_gc_keeps_what_a_recording_reuses_from_an_expired_run(tmp_path: Path) -> None:
    """A writer reuses the system prompt of an expired run while gc removes that run: the
    writer relies on the stored copy, so gc must keep it (or a copy of it)."""
    root = tmp_path / "s"
    old = time.time_ns() - int(40 * DAY * 1e9)
    with Store.open(root) as store:
        for index, (request, response) in enumerate(chat_bodies(3, 1, shared=True)):
            store.put([make_step("old", index, request, response, start_ns=old)])
    go = tmp_path / "go"
    steps = 40
    # A pause between steps keeps it recording while several gcs run, however loaded the
    # machine is.
    writer = spawn(root, "live", steps, "--shared", "--go", str(go), "--pause", "0.02")
    assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
    removed: list[str] = []
    gcs = 0
    # The old run is long expired; the live one never is (while recording: it is recent and
    # incomplete; once closed: a day has not passed).
    with Store.open(root, retention=Retention(ok_days=1, error_days=1)) as store:
        go.touch()
        while writer.poll() is None:  # gc, again and again, while it records and closes
            removed += store.gc().runs_removed
            gcs += 1
        out, err = writer.communicate()
        assert writer.returncode == 0, err
        assert out.endswith(f"flushed {steps - 1}\nclosed\n")
        assert removed == ["old"] and gcs > 5
        # A gc that raced the writer may have left copies behind (leftover notices, now and
        # then under load; see the next test): never damage, and the next gc removes them.
        assert [problem for problem in store.verify() if problem.damage] == []
        store.gc()
    with Store.open(root, retention=KEEP) as store:
        assert [(r.run_id, r.status) for r in store.runs()] == [("live", "ok")]
        expected = bodies("live", steps, shared=True)
        assert [store.request_body(s) for s in store.steps("live")] == [q for q, _ in expected]
        assert [store.response_body(s) for s in store.steps("live")] == [r for _, r in expected]
        assert store.verify() == []


def test_a_gc_merging_a_writers_records_as_it_closes_leaves_a_copy_the_next_removes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gc merges a writer's record files while the writer records once more and closes,
    merging them all itself: gc's merged file, of the first ones only, is published after the
    writer's took their place. It is a copy (a leftover notice, no damage), and the next gc
    removes it; every step stays."""
    root = tmp_path / "s"
    pairs = chat_bodies(4)
    now = time.time_ns()
    writer = Store.open(root)
    for index in range(3):
        writer.put([make_step("live", index, *pairs[index], start_ns=now)], [span("live", index)])
        writer.flush()
    real = _repack.merge_frames

    def read_then_the_writer_closes(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(_repack, "merge_frames", real)
        writer.put([make_step("live", 3, *pairs[3], start_ns=now)], [span("live", 3)])
        writer.close()
        return real(*args, **kwargs)

    with Store.open(root, retention=Retention(ok_days=1, error_days=1)) as store:
        monkeypatch.setattr(_repack, "merge_frames", read_then_the_writer_closes)
        store.gc()
        assert [(problem.kind, problem.path) for problem in store.verify()] == [
            ("leftover", record_path("live", writer.recording, 0, 2))
        ]
        assert [store.request_body(step) for step in store.steps("live")] == [q for q, _ in pairs]
        store.gc()
        assert store.verify() == []
        assert [store.request_body(step) for step in store.steps("live")] == [q for q, _ in pairs]


def test_a_sync_forgets_nothing_another_process_writes_while_it_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gc and refresh sync the index with the files. Another process's flush that lands
    between the sync's listing and its reading of the index (a file published, then indexed)
    is not taken for a file that is gone: its steps and objects stay in the index."""
    root = tmp_path / "s"
    pairs = chat_bodies(2)
    with Store.open(root) as store:
        store.put([make_step("a", 0, *pairs[0])])
    real = _sync.list_files

    def listing_then_another_flush(backend: Any) -> Any:
        listed = real(backend)
        with Store.open(root) as other:
            other.put([make_step("b", 0, *pairs[1])])
        return listed

    with Store.open(root) as store:
        monkeypatch.setattr(_sync, "list_files", listing_then_another_flush)
        store.refresh()
        monkeypatch.setattr(_sync, "list_files", real)
        assert {r.run_id: r.step_count for r in store.runs()} == {"a": 1, "b": 1}
        assert store.request_body("b", 0) == pairs[1][0]
        assert store.verify() == []


def test_verify_finds_a_step_the_index_lost_and_the_rebuild_brings_it_back(tmp_path: Path) -> None:
    root = tmp_path / "s"
    pairs = chat_bodies(3)
    with Store.open(root) as store:
        store.put([make_step("a", index, *pair) for index, pair in enumerate(pairs)])
    with closing(sqlite3.connect(root / "index.sqlite")) as conn, conn:
        conn.execute("DELETE FROM steps WHERE step_index = 1")
    with Store.open(root) as store:
        assert [s.index for s in store.steps("a")] == [0, 2]
        (problem,) = store.verify()
        assert problem.damage and (problem.run_id, problem.step_index) == ("a", 1)
        assert "holds 1 step(s) the index lacks (run 'a' step 1 first)" in problem.message
    with Store.rebuild(root) as store:
        assert [store.request_body(s) for s in store.steps("a")] == [q for q, _ in pairs]
        assert store.verify() == []


def test_a_flush_retried_after_its_index_commit_failed_keeps_each_span_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The files of a flush are published, then its index commit fails (the index stayed
    locked): the store keeps the batch and the next flush writes it. Nothing is stored twice,
    not even once a rebuild has read every file, nor after the close merged them."""
    root = tmp_path / "s"
    pairs = chat_bodies(3)
    spans = [span("retried", index) for index in range(3)]
    real = _rows.add_steps
    failures = [sqlite3.OperationalError("database is locked")]

    def locked_once(*args: Any, **kwargs: Any) -> None:
        if failures:
            raise failures.pop()
        real(*args, **kwargs)

    monkeypatch.setattr(_rows, "add_steps", locked_once)
    with Store.open(root) as store:
        store.put([make_step("retried", 0, *pairs[0])], spans[:1])
        with pytest.raises(StoreError, match="locked"):
            store.flush()
        store.put([make_step("retried", n, *pairs[n]) for n in (1, 2)], spans[1:])
        store.flush()
        assert store.spans("retried") == spans
        copy = tmp_path / "copy"
        shutil.copytree(root, copy)
    for opened in (Store.rebuild(copy), Store.rebuild(root)):
        with opened as store:
            assert store.spans("retried") == spans
            assert [s.index for s in store.steps("retried")] == [0, 1, 2]
            assert [p for p in store.verify() if p.damage] == []
