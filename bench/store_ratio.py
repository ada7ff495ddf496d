"""Store size: one 30-turn chat run as raw bytes, as a vcrpy JSON cassette, and in our store.

The run is ``bench/_chat.py``'s synthetic support agent: every request re-sends the whole
history (system prompt, six tools, the messages so far). Measured in one process, on the same
interactions:

* raw — request + response bodies, as sent and received;
* cassette — the same interactions written by vcrpy's own JSON serializer and persister;
* store — recorded the way the exporter records (``put`` + ``flush`` per step), then closed
  (which merges what the session wrote). Once with the steps only (what the cassette holds),
  once with the spans too (each step's span carries the inline bodies and
  ``gen_ai.input.messages``, as the capture produces them). Reported as (a) packs + records,
  the fixtures themselves; (b) plus the index; (c) what a second, different 30-turn run adds
  to the same store. The index has SQLite's default page size, so its first pages are paid
  once per store, not per run.

Beside them: the Collector's file exporter archive of the run's spans (``bench/_archive.py``:
OTLP JSON, raw, ``zstd -3`` and ``zstd -19 --long``), against the store with spans.

Where the bytes go: the packs' objects by kind (chunks, manifests; compressed bytes are each
frame's size shared out by the raw bytes of each kind in it), the packs' own framing and
tables, the record files, the index (pages by table), ``FORMAT`` and ``LOCK``. Also the cost of
a flush (one step, durable on return) against writing each body safely on its own file. And
the floors: the same content as one zstd stream (``_chat.stream_floor``).

    python bench/store_ratio.py [--turns 30] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from vcr.persisters.filesystem import FilesystemPersister
from vcr.request import Request
from vcr.serializers import jsonserializer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._archive import archive_sizes, otlp_json
from bench._chat import RUN_ID, conversation, prose_ratio, raw_bytes, stream_floor
from otel_replay.step import Step
from otel_replay.store import Store
from otel_replay.store._records import read_frames

TARGET_RAW = 30.0
TARGET_CASSETTE = 25.0
KINDS = {0: "chunks", 1: "manifests"}


def cassette_size(steps: list[Step], folder: Path) -> int:
    """Bytes of the same interactions as a vcrpy JSON cassette written by vcrpy itself."""
    requests, responses = [], []
    for step in steps:
        requests.append(
            Request(step.method, step.url, step.request_body, dict(step.request_headers))
        )
        response_headers: dict[str, list[str]] = {}
        for name, value in step.response_headers:
            response_headers.setdefault(name, []).append(value)
        responses.append(
            {
                "status": {"code": step.status_code, "message": "OK"},
                "headers": response_headers,
                "body": {"string": step.response_body},
            }
        )
    path = folder / "cassette.json"
    FilesystemPersister.save_cassette(
        path, {"requests": requests, "responses": responses}, serializer=jsonserializer
    )
    return path.stat().st_size


def du(folder: Path) -> dict[str, int]:
    """Every file under ``folder`` (relative path) and its size."""
    sizes: dict[str, int] = {}
    for dirpath, _, files in os.walk(folder):
        for name in files:
            path = Path(dirpath) / name
            sizes[path.relative_to(folder).as_posix()] = path.stat().st_size
    return sizes


def step_bytes(files: dict[str, int]) -> int:
    """Packs and record files: the steps, without the index and the store's markers."""
    return sum(size for rel, size in files.items() if rel.startswith(("objects/", "runs/")))


def index_bytes(files: dict[str, int]) -> int:
    return sum(size for rel, size in files.items() if rel.startswith("index.sqlite"))


Run = tuple[list[Step], list[dict] | None]
"""A run's steps, and its spans (None: steps only)."""


@dataclass
class Recorded:
    """Files of the store before the first close, then after each run's close; where the
    bytes of the first run went; each flush's seconds and the fsync calls it made from Python
    (SQLite's own commit fsync comes on top)."""

    files: list[dict[str, int]] = field(default_factory=list)
    where: list[str] = field(default_factory=list)
    chunks: int = 0
    """Compressed bytes of the first run's chunks, as the packs hold them."""
    flushes: list[float] = field(default_factory=list)
    syncs: list[int] = field(default_factory=list)


def record(runs: list[Run], folder: Path) -> Recorded:
    """Record each run step by step into one store, each run in a store opening of its own."""
    out = Recorded()
    real_fsync = os.fsync
    counted = [0]

    def counting_fsync(fd: int) -> None:
        counted[0] += 1
        real_fsync(fd)

    for steps, spans in runs:
        with Store.open(folder) as store:
            os.fsync = counting_fsync
            try:
                for position, step in enumerate(steps):
                    store.put([step], [spans[position]] if spans else [])
                    before = counted[0]
                    started = time.perf_counter()
                    store.flush()
                    out.flushes.append(time.perf_counter() - started)
                    out.syncs.append(counted[0] - before)
            finally:
                os.fsync = real_fsync
            if spans:
                store.put(spans=spans[len(steps) :])
                store.flush()
            if not out.files:
                out.files.append(du(folder))
        out.files.append(du(folder))
        if not out.where:
            out.where, out.chunks = where_bytes_go(folder)
    with Store.open(folder) as store:  # the runs read back byte-exact
        for steps, spans in runs:
            run_id = steps[0].run_id
            for info in store.steps(run_id):
                assert store.request_body(info) == steps[info.index].request_body
                assert store.response_body(info) == steps[info.index].response_body
            if spans:
                assert store.spans(run_id) == json.loads(json.dumps(spans))
        assert store.verify() == []
    return out


def where_bytes_go(folder: Path) -> tuple[list[str], int]:
    """Lines saying what the store's files hold, read from its index and files; and the
    compressed bytes of its chunks."""
    files = du(folder)
    with (
        closing(sqlite3.connect(f"file:{folder / 'index.sqlite'}?mode=ro", uri=True)) as conn,
        conn,
    ):
        rows = conn.execute(
            "SELECT pack, frame_offset, frame_size, kind, size FROM objects"
        ).fetchall()
        packs = conn.execute("SELECT count(*), coalesce(sum(size), 0) FROM packs").fetchone()
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        try:
            pages = conn.execute(
                "SELECT name, count(*) FROM dbstat GROUP BY name ORDER BY count(*) DESC"
            ).fetchall()
        except sqlite3.Error:  # an SQLite built without dbstat
            pages = []
    frames: dict[tuple[int, int], int] = {}
    frame_raw: dict[tuple[int, int], int] = defaultdict(int)
    for pack, offset, frame_size, _, size in rows:
        frames[pack, offset] = frame_size
        frame_raw[pack, offset] += size
    count: dict[int, int] = defaultdict(int)
    raw: dict[int, int] = defaultdict(int)
    packed: dict[int, float] = defaultdict(float)
    for pack, offset, frame_size, kind, size in rows:
        count[kind] += 1
        raw[kind] += size
        packed[kind] += frame_size * size / max(1, frame_raw[pack, offset])
    objects = ", ".join(
        f"{KINDS.get(kind, kind)} {count[kind]} ({raw[kind]:,} B raw -> ~{packed[kind]:,.0f} B)"
        for kind in sorted(count)
    )
    records = {rel: size for rel, size in files.items() if rel.startswith("runs/")}
    record_json = sum(
        len(line) for rel in records for line in read_frames((folder / rel).read_bytes()).records
    )
    markers = files.get("FORMAT", 0) + files.get("LOCK", 0)
    other = sum(files.values()) - step_bytes(files) - index_bytes(files) - markers
    lines = [
        f"packs     {packs[1]:>9,} B in {packs[0]} file(s): {objects}; "
        f"framing + tables {packs[1] - sum(frames.values()):,} B",
        f"records   {sum(records.values()):>9,} B in {len(records)} file(s) "
        f"({record_json:,} B of JSON: headers, timing, facts, spans)",
        f"index     {index_bytes(files):>9,} B ({page_size} B pages: "
        + ", ".join(f"{name} {n}" for name, n in pages)
        + f"; {free} free)",
        f"FORMAT {files.get('FORMAT', 0)} B, LOCK {files.get('LOCK', 0)} B, other files {other} B",
    ]
    return lines, round(packed[0])


def per_file_write(folder: Path, size: int = 2048, count: int = 200) -> float:
    """Seconds to write one blob safely on its own: temp file, fsync, rename, dir fsync."""
    folder.mkdir()
    data = os.urandom(size)
    started = time.perf_counter()
    for n in range(count):
        tmp = folder / f".tmp{n}"
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, folder / f"blob{n}")
        fd = os.open(folder, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    return (time.perf_counter() - started) / count


def _row(label: str, size: int, raw: int, cassette: int | None, target: str = "") -> str:
    versus = f"{cassette / size:7.1f}x" if cassette else " " * 8
    return f"  {label:<38} {size:>10,} B  {raw / size:7.1f}x  {versus}  {target}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    steps, spans = conversation(args.turns, args.seed)
    other = conversation(args.turns, args.seed + 1, run_id=RUN_ID + "-2")
    raw, other_raw = raw_bytes(steps), raw_bytes(other[0])
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cassette = cassette_size(steps, folder)
        bare = record([(steps, None), (other[0], None)], folder / "bare")
        full = record([(steps, spans), other], folder / "full")
        safe_write = per_file_write(folder / "fsync")
    print(
        f"{args.turns}-turn run, each request re-sending the history "
        f"(text zstd-19: {prose_ratio():.2f}x)"
    )
    print(f"  raw request+response bodies   {raw:>10,} B")
    print(f"  vcrpy JSON cassette           {cassette:>10,} B")
    print(f"  spans as handed to the store  {len(json.dumps(spans).encode()):>10,} B  (JSON)")
    print()
    print(f"  {'':<38} {'bytes':>12}  {'raw/that':>8}  {'vcr/that':>8}  target")
    for label, recorded in (("store, steps only", bare), ("store, steps + spans", full)):
        opened, files, two = recorded.files
        print(f"  {label}")
        stored = step_bytes(files)
        target = f"raw >= {TARGET_RAW:.0f}x, vcr >= {TARGET_CASSETTE:.0f}x"
        print(_row("(a) packs + records", stored, raw, cassette, target))
        print(_row("    chunks alone (as packed)", recorded.chunks, raw, cassette))
        print(_row("(b) + index", stored + index_bytes(files), raw, cassette))
        print(_row("    whole directory", sum(files.values()), raw, cassette))
        print(_row("    packs + records before close", step_bytes(opened), raw, cassette))
        added = step_bytes(two) - stored
        added_all = sum(two.values()) - sum(files.values())
        print(_row("(c) 2nd run adds: packs + records", added, other_raw, None))
        print(_row("    2nd run adds: whole directory", added_all, other_raw, None))
        print("    where the bytes go (one run):")
        for line in recorded.where:
            print(f"      {line}")
    archive = archive_sizes(otlp_json(spans))
    whole = sum(full.files[1].values())
    print("  the Collector's OTLP JSON file of the run's spans (what the store holds of it)")
    for key, size in archive.items():
        print(_row(f"OTLP JSON file, {key}", size, raw, cassette))
    print(
        f"  store (steps + spans, whole directory) / zstd -3 file: "
        f"{whole / archive['zstd -3']:.2f}x, / zstd -19 --long file: "
        f"{whole / archive['zstd -19 --long']:.2f}x"
    )
    print("  floors: the same content as one zstd-19 stream (no random access, no addressing)")
    for label, size in stream_floor([(steps, spans)]).items():
        print(_row(label, size, raw, cassette))
    flushes = bare.flushes
    print()
    print(
        f"  flush of one step (durable)   median {statistics.median(flushes) * 1e3:.2f} ms, "
        f"p90 {sorted(flushes)[int(len(flushes) * 0.9)] * 1e3:.2f} ms; "
        f"fsyncs from Python: median {statistics.median(bare.syncs):.0f} + the SQLite commit"
    )
    print(
        f"  one 2 KB file written safely  {safe_write * 1e3:.2f} ms "
        "(temp file, fsync, rename, directory fsync: the price of a file per body)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
