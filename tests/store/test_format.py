"""Format version 2: packs in their run's directory, each fact kept once, version 1 refused."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest

from otel_replay.errors import CorruptBlobError, StoreFormatError
from otel_replay.store import Store
from otel_replay.store._format import FORMAT_VERSION
from otel_replay.store._pack import (
    FOOTER,
    KIND_SEGMENT,
    decompress_frame,
    encode_pack,
    parse_footer,
    parse_trailer,
)
from tests.export._support import stored_bytes
from tests.store._data import chat_bodies, fixture, span, tag


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _version_1_store(root: Path) -> Path:
    """A store as version 1 laid it out: a directory per stream."""
    stream = root / "packs" / "run-old" / "s0123456789abcdef"
    stream.mkdir(parents=True)
    (stream / "00000000-00000003.pack").write_bytes(b"(\xb5/\xfd version 1 pack")
    (root / "index.sqlite").write_bytes(b"SQLite format 3\x00" + bytes(496))
    (root / "FORMAT").write_text(json.dumps({"format": "otel-replay-store", "version": 1}))
    return root


def test_a_version_1_store_is_refused_and_left_alone(tmp_path: Path) -> None:
    root = _version_1_store(tmp_path / "old")
    before = _snapshot(root)
    for opening in (Store.open, Store.rebuild):
        with pytest.raises(StoreFormatError) as info:
            opening(root)
        message = str(info.value)
        assert str(root / "FORMAT") in message and "\n" not in message
        assert "format version 1" in message and f"reads version {FORMAT_VERSION}" in message
    assert _snapshot(root) == before


def _steps_and_spans(run_id: str, turns: int) -> tuple[list[Any], list[dict[str, Any]]]:
    fixtures, spans = [], []
    for index, (request, response) in enumerate(chat_bodies(turns)):
        fixtures.append(fixture(run_id, index, request, response))
        spans.append(
            span(
                run_id,
                index,
                **{
                    "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "gpt-test" if index < 2 else "gpt-other",
                    "gen_ai.usage.input_tokens": 100 + index,
                    "gen_ai.usage.output_tokens": 10 + index,
                    "replay.request.hash": tag(request),
                    "replay.response.hash": tag(response),
                    "replay.prompt.hash": tag(b"prompt %d" % index),  # the hash of nothing stored
                    "replay.request.body": request.decode(),
                    "note": "sha256:" + "AB" * 32,  # not lowercase: not a hash, kept as it is
                },
            )
        )
    return fixtures, spans


def test_packs_sit_in_their_run_directory_named_by_stream(tmp_path: Path) -> None:
    root = tmp_path / "s"
    for run_ids in (["a", "b"], ["a"]):  # two writers: run a gets two streams
        with Store.open(root) as store:
            for run_id in run_ids:
                store.put([fixture(run_id, 0, b"q", b"r")])
            store.flush()
    directories = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_dir())
    assert directories == ["packs", "packs/a", "packs/b"]
    names = sorted(p.name for p in (root / "packs" / "a").iterdir())
    assert len(names) == 2 and len({name.split("-")[0] for name in names}) == 2
    assert all(re.fullmatch(r"[0-9a-f]{16}-0{8}-0{7}[0-9a-f]\.pack", name) for name in names)


def test_a_flush_of_new_runs_fsyncs_each_run_directory_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    with Store.open(tmp_path / "s") as store:
        store.put([fixture("warm-up", 0, b"q")])
        store.flush()
        store.put([fixture(f"run-{n}", 0, b"q", b"r") for n in range(5)])
        monkeypatch.setattr(os, "fsync", fsync)
        store.flush()
        monkeypatch.undo()
    # a pack per run, each run's new directory, and packs/ which gained them
    assert sorted(synced) == ["dir"] * 6 + ["file"] * 5


def test_the_index_alone_holds_the_hashes_and_a_rebuild_computes_them(tmp_path: Path) -> None:
    root = tmp_path / "s"
    fixtures, spans = _steps_and_spans("run-h", 4)
    with Store.open(root) as store:
        for item, given in zip(fixtures, spans, strict=True):
            store.put([item], [given])
            store.flush()
    packs = stored_bytes(root / "packs")
    for item in fixtures:
        assert item.request_hash[7:].encode() not in packs
        assert item.response_hash is not None and item.response_hash[7:].encode() not in packs
    assert packs.count(tag(b"prompt 2")[7:].encode()) == 1  # not an object's hash: kept as is
    with Store.open(root) as store:
        steps, runs = store.steps("run-h"), store.runs()
    (root / "index.sqlite").unlink()
    with Store.rebuild(root) as store:
        assert store.steps("run-h") == steps and store.runs() == runs
        assert [s.request_hash for s in steps] == [f.request_hash for f in fixtures]
        assert [s.response_size for s in steps] == [len(f.response_body) for f in fixtures]
        assert [s.model for s in steps] == ["gpt-test", "gpt-test", "gpt-other", "gpt-other"]
        assert [s.tokens_in for s in steps] == [100, 101, 102, 103]
        assert runs[0].models == ("gpt-test", "gpt-other")
        assert store.spans("run-h") == spans
        assert store.verify() == []


def test_steps_without_a_model_stay_without_one(tmp_path: Path) -> None:
    """A step's model is stored relative to its run's: none, the run's, or another."""
    root = tmp_path / "s"
    given = [
        span("run-m", 0),
        span("run-m", 1, **{"gen_ai.request.model": "m1", "gen_ai.provider.name": "p"}),
        span("run-m", 2, **{"gen_ai.request.model": "m2"}),
        span("run-m", 3, **{"gen_ai.request.model": "m1", "gen_ai.provider.name": "p"}),
    ]
    with Store.open(root) as store:
        for index, item in enumerate(given):
            store.put([fixture("run-m", index, b"q%d" % index, b"a")], [item])
            store.flush()
        steps = store.steps("run-m")
        assert [(s.provider, s.model) for s in steps] == [
            (None, None),
            ("p", "m1"),
            (None, "m2"),
            ("p", "m1"),
        ]
        assert store.run("run-m").models == ("m1", "m2")
    with Store.rebuild(root) as store:
        assert store.steps("run-m") == steps


def _rewrite_segment(pack: Path, old: bytes, new: bytes) -> None:
    """Re-encode ``pack`` (a sound pack: checksums, trailer and all) with ``old`` replaced
    by ``new`` in the segment that holds it: only a recipe's check can tell."""
    data = pack.read_bytes()
    size, crc = parse_footer(data[-FOOTER.size :])
    index = parse_trailer(data[-FOOTER.size - size : -FOOTER.size], crc, len(data))
    entries = []
    for oid in range(index.first, index.last + 1):
        where = index.locate(oid)
        frame = decompress_frame(
            data[where.frame_start : where.frame_end], index.frames[where.frame][2]
        )
        item = frame[where.offset : where.offset + where.length]
        entries.append((where.kind, item.replace(old, new) if where.kind == KIND_SEGMENT else item))
    assert entries != [], pack
    pack.write_bytes(encode_pack(index.first, entries, 3))


@pytest.mark.parametrize("damaged_turn", [0, 2])
def test_a_body_rebuilt_wrongly_is_caught_by_its_recipe_check(
    tmp_path: Path, damaged_turn: int, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "s"
    pairs = chat_bodies(4)
    with Store.open(root) as store:
        for index, (request, response) in enumerate(pairs):
            store.put([fixture("run-r", index, request, response)])
            store.flush()
    # a message first sent by turn ``damaged_turn``, changed inside its segment
    marker = json.loads(pairs[damaged_turn][0])["messages"][-1]["content"][:40].encode()
    (pack,) = root.rglob("*.pack")
    _rewrite_segment(pack, marker, marker.upper())
    with (
        Store.open(root) as store,  # the index's hash catches it on read
        pytest.raises(CorruptBlobError, match="does not match its hash"),
    ):
        store.request_body(("run-r", damaged_turn))
    (root / "index.sqlite").unlink()
    with Store.rebuild(root) as store:  # no index hash to check against: the recipe's check
        indexed = [s.index for r in store.runs() for s in store.steps(r.run_id)]
        assert indexed == list(range(damaged_turn))
        problems = store.verify()
        assert problems and any("fail its check" in p.message for p in problems)
        assert all(p.path and pack.name.split("-")[0] in p.path for p in problems)
        if not indexed:  # gc keeps a stream it cannot index: damage, not a writer's leftover
            store.gc(now=4_000_000_000.0)
    assert pack.exists() and "fail its check" in caplog.text
