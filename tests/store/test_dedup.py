"""Content addressing store-wide: what a run costs does not depend on who recorded it, in
which process, or how its steps were flushed; and the index is plain SQL."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from otel_replay.step import RunFacts
from otel_replay.store import Store
from otel_replay.store._pack import entries, parse_table
from tests.store._data import chat_bodies, make_step, shared_system, span, tag
from tests.store._writer import bodies, spawn


def _pack_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in (root / "objects").rglob("*.pack"))


def _query(root: Path, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(root / "index.sqlite")) as conn, conn:
        return conn.execute(sql, params).fetchall()


def _packs_holding(root: Path, digest: bytes) -> list[Path]:
    """The pack files whose table lists ``digest``."""
    return [
        pack
        for pack in (root / "objects").rglob("*.pack")
        if any(
            e.digest == digest for e in entries(parse_table(pack.read_bytes(), pack.stat().st_size))
        )
    ]


def _record_chat(root: Path, run_id: str, turns: int, seed: int, every: int = 1) -> None:
    with Store.open(root) as store:
        for index, (request, response) in enumerate(chat_bodies(turns, seed, shared=True)):
            store.put([make_step(run_id, index, request, response)])
            if (index + 1) % every == 0:
                store.flush()


def test_dedup_is_store_wide(tmp_path: Path) -> None:
    """Two runs (two recordings: each its own open store) sending the same 4 KB system prompt
    and tool list: the second stores only its own messages."""
    root, alone = tmp_path / "s", tmp_path / "alone"
    _record_chat(root, "first", turns=2, seed=1)
    first = _pack_bytes(root)
    _record_chat(root, "second", turns=2, seed=2)
    second = _pack_bytes(root) - first
    _record_chat(alone, "second", turns=2, seed=2)
    assert len(shared_system()) > 4000
    assert second < first / 3 and second < _pack_bytes(alone) / 3
    assert len(_packs_holding(root, hashlib.sha256(shared_system()).digest())) == 1
    with Store.open(root) as store:
        for seed, run_id in ((1, "first"), (2, "second")):
            assert [store.request_body(s) for s in store.steps(run_id)] == [
                q for q, _ in chat_bodies(2, seed, shared=True)
            ]


def test_dedup_does_not_depend_on_the_flush_size(tmp_path: Path) -> None:
    """A 20-turn conversation flushed after every step, every 8 steps, or once: the same
    objects are stored, and about the same bytes."""
    stored: dict[int, set[bytes]] = {}
    sizes: dict[int, int] = {}
    for every in (1, 8, 20):
        root = tmp_path / f"every-{every}"
        _record_chat(root, "chat", turns=20, seed=9, every=every)
        sizes[every] = _pack_bytes(root)
        stored[every] = {bytes(row[0]) for row in _query(root, "SELECT digest FROM objects")}
        with Store.open(root) as store:
            assert [store.request_body(s) for s in store.steps("chat")] == [
                q for q, _ in chat_bodies(20, 9, shared=True)
            ]
    assert stored[1] == stored[8] == stored[20]
    assert max(sizes.values()) < 1.1 * min(sizes.values()), sizes


@pytest.mark.subprocess
def test_processes_writing_at_once_store_a_shared_prompt_once(tmp_path: Path) -> None:
    root = tmp_path / "s"
    Store.open(root).close()
    go = tmp_path / "go"
    procs = [spawn(root, f"run-{n}", 12, "--shared", "--go", str(go)) for n in range(3)]
    for proc in procs:  # every process is ready: their first flushes race
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    go.touch()
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert out.endswith("flushed 11\nclosed\n")
    with Store.open(root) as store:
        assert [p for p in store.verify() if p.damage] == []
        for n in range(3):
            expected = bodies(f"run-{n}", 12, shared=True)
            assert [store.request_body(s) for s in store.steps(f"run-{n}")] == [
                q for q, _ in expected
            ]
            assert [store.response_body(s) for s in store.steps(f"run-{n}")] == [
                r for _, r in expected
            ]
    system = hashlib.sha256(shared_system()).digest()
    assert _query(root, "SELECT kind, size FROM objects WHERE digest = ?", (system,)) == [
        (0, len(shared_system()))
    ]
    assert len(_packs_holding(root, system)) == 1
    # No object has a second copy in any pack the index lists.
    ((listed,),) = _query(root, "SELECT SUM(objects) FROM packs")
    ((distinct,),) = _query(root, "SELECT COUNT(*) FROM objects")
    assert listed == distinct


def test_the_index_can_be_read_by_hand(tmp_path: Path) -> None:
    root = tmp_path / "s"
    pairs = chat_bodies(3, seed=2)
    facts = RunFacts("by-hand", seed=5, commit="abc", code_dirty=True, start_ns=123)
    with Store.open(root) as store:
        for index, (request, response) in enumerate(pairs):
            step = make_step("by-hand", index, request, response)
            step.run, step.provider, step.model = facts, "openai", "gpt-test"
            step.tokens_in, step.tokens_out = 10 + index, 20 + index
            store.put([step], [span("by-hand", index)])
        store.put([make_step("failed", 0, b"tiny", None, error_type="ConnectError")])
        store.flush()
        store.pin("by-hand")
    runs = _query(
        root,
        "SELECT name, run_id, number, mode, started_ns, ended_ns IS NOT NULL, error_type, "
        "commit_sha, code_dirty, seed, pinned FROM runs ORDER BY name",
    )
    assert runs == [
        ("by-hand", "by-hand", 1, "record", 123, 1, None, "abc", 1, 5, 1),
        ("failed", "failed", 1, None, None, 1, None, None, None, None, 0),
    ]
    steps = _query(
        root,
        "SELECT step_index, kind, provider, model, request_hash, request_size, response_hash, "
        "response_size, status_code, steps.error_type, complete, tokens_in, tokens_out "
        "FROM steps JOIN runs ON runs.id = steps.run WHERE runs.name = ? ORDER BY step_index",
        ("by-hand",),
    )
    assert steps == [
        (
            n,
            "llm",
            "openai",
            "gpt-test",
            bytes.fromhex(tag(q)[7:]),
            len(q),
            bytes.fromhex(tag(r)[7:]),
            len(r),
            200,
            None,
            1,
            10 + n,
            20 + n,
        )
        for n, (q, r) in enumerate(pairs)
    ]
    assert _query(
        root,
        "SELECT status_code, response_hash, steps.error_type, complete FROM steps JOIN runs "
        "ON runs.id = steps.run WHERE runs.name = 'failed'",
    ) == [(None, None, "ConnectError", 0)]
    # Every body is an object: a chat request is a manifest of its messages, a short body
    # one chunk; each message is a chunk of its own.
    kinds = dict(_query(root, "SELECT digest, kind FROM objects"))
    assert kinds[bytes.fromhex(tag(pairs[2][0])[7:])] == 1
    assert kinds[bytes.fromhex(tag(b"tiny")[7:])] == 0
    message = json.dumps(json.loads(pairs[0][0])["messages"][1], separators=(",", ":"))
    assert kinds[hashlib.sha256(message.encode()).digest()] == 0
    # Each pack and record file the index lists is a file of that name and size.
    for name, size, count in _query(root, "SELECT name, size, objects FROM packs"):
        pack = root / "objects" / str(name)[:2] / f"{name}.pack"
        assert pack.stat().st_size == size
        assert hashlib.sha256(pack.read_bytes()).hexdigest() == name
        assert len(entries(parse_table(pack.read_bytes(), pack.stat().st_size))) == count
    for path, size in _query(root, "SELECT path, size FROM records"):
        assert (root / str(path)).stat().st_size == size
    ((records,),) = _query(root, "SELECT COUNT(DISTINCT record) FROM steps")
    assert records == 2  # one record file per run, merged at close
    # The docs' query by hand (tokens per run of one provider) runs as printed there.
    docs = (Path(__file__).resolve().parents[2] / "docs" / "store.md").read_text()
    printed = re.search(r'sqlite3 \.otel-replay/index\.sqlite \\\n\s*"([^"]+)"', docs)
    assert printed is not None, "docs/store.md shows an SQL query of the index"
    assert _query(root, printed[1]) == [("by-hand", 3, 33, 63)]
