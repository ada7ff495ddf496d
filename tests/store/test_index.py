"""Runs and steps in the index: fields derived from fixtures and spans, lookups, errors."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from otel_replay.errors import RunNotFoundError, StoreError
from otel_replay.store import Store, _index
from otel_replay.store._index import Index
from otel_replay.store._rows import step_row
from tests.store._data import fixture, span, tag


def _llm_span(run_id: str, index: int, model: str, tokens: tuple[int, int]) -> dict:
    return span(
        run_id,
        index,
        **{
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": model,
            "gen_ai.usage.input_tokens": tokens[0],
            "gen_ai.usage.output_tokens": tokens[1],
            "vcs.ref.head.revision": "c0ffee" * 6 + "abcd",
            "replay.seed": 7,
        },
    )


def test_run_and_step_fields(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s") as store:
        store.put(
            [fixture("r1", 0, b"q0", b"a0"), fixture("r1", 1, b"q1", b"a1", kind="http")],
            [_llm_span("r1", 0, "gpt-a", (10, 3)), _llm_span("r1", 1, "gpt-b", (0, 2))],
        )
        store.flush()
        store.put([fixture("r1", 2, b"q2", b"a2")], [_llm_span("r1", 2, "gpt-a", (5, 1))])
        store.flush()
        (run,) = store.runs()
        assert run.run_id == "r1" and run.status == "ok" and run.step_count == 3
        assert (run.tokens_in, run.tokens_out) == (15, 6)
        assert run.bytes == 12 and run.models == ("gpt-a", "gpt-b")
        assert run.commit == "c0ffee" * 6 + "abcd" and run.seed == 7 and not run.pinned
        assert run.start_ns == 1_700_000_000 * 10**9
        assert run.end_ns == 1_700_000_002 * 10**9 + 5_000_000
        steps = store.steps("r1")
        assert [s.model for s in steps] == ["gpt-a", "gpt-b", "gpt-a"]
        first = steps[0]
        assert first.request_hash == tag(b"q0") and first.response_hash == tag(b"a0")
        assert first.provider == "openai" and first.kind == "llm" and steps[1].kind == "http"
        assert first.trace_id == 0x1234_5678_9ABC_DEF0_1234_5678_9ABC_DEF0 and first.span_id == 1000
        assert (first.tokens_in, first.tokens_out, first.status_code) == (10, 3, 200)
        assert first.complete and first.error_type is None
        assert (first.request_size, first.response_size) == (2, 2)
        assert store.step("r1", 2) == steps[2]


def test_a_failed_step_makes_the_run_an_error(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s") as store:
        store.put(
            [fixture("bad", 0, b"q"), fixture("bad", 1, b"q", None, error_type="ConnectError")]
        )
        store.put([fixture("good", 0, b"q")])
        store.flush()
        assert store.run("bad").status == "error" and store.run("good").status == "ok"
        assert store.step("bad", 1).error_type == "ConnectError"


def test_an_error_span_makes_the_run_an_error(tmp_path: Path) -> None:
    failing = span("r2", None)
    failing["status"] = {"code": "ERROR", "description": "boom"}
    with Store.open(tmp_path / "s") as store:
        store.put([fixture("r2", 0, b"q")])
        store.flush()
        assert store.run("r2").status == "ok"
        store.put(spans=[failing])
        store.flush()
        assert store.run("r2").status == "error"


def test_unknown_runs_and_steps_are_named(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s") as store:
        store.put([fixture("r3", 0, b"q")])
        store.flush()
        with pytest.raises(RunNotFoundError, match="'nope'"):
            store.run("nope")
        with pytest.raises(RunNotFoundError, match="'nope'"):
            store.steps("nope")
        with pytest.raises(RunNotFoundError, match="no step 5"):
            store.request_body(("r3", 5))
        with pytest.raises(LookupError):
            store.pin("nope")


def test_replacing_a_step_keeps_the_aggregates_right(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s") as store:
        store.put([fixture("r4", 0, b"first")])
        store.flush()
        store.put([fixture("r4", 0, b"second!")])
        store.flush()
        assert store.run("r4").step_count == 1
        assert store.request_body(("r4", 0)) == b"second!"
        assert store.verify() == []


def test_runs_are_listed_oldest_first(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s") as store:
        store.put([fixture("late", 0, b"q", start_ns=2_000_000_000 * 10**9)])
        store.put([fixture("early", 0, b"q", start_ns=1_000_000_000 * 10**9)])
        store.flush()
        assert [r.run_id for r in store.runs()] == ["early", "late"]


def test_pin_is_kept_in_a_marker_file(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s") as store:
        store.put([fixture("r5", 0, b"q")])
        store.flush()
        store.pin("r5")
        assert store.run("r5").pinned
        assert (tmp_path / "s" / "pins" / "r5").exists()
        store.pin("r5", pinned=False)
        assert not store.run("r5").pinned and not (tmp_path / "s" / "pins" / "r5").exists()


def test_compact_rows_read_back_exactly(tmp_path: Path) -> None:
    """Kinds stored as numbers, the run's trace stored once, starts relative to the run's,
    ends as durations, object numbers relative to the request's."""
    steps = [
        fixture("r3", 0, b"q0", b"a0", kind="llm"),
        fixture("r3", 1, b"q1", b"a1", kind="http"),
        fixture("r3", 2, b"q2", b"a2", kind="tool"),
        fixture("r3", 3, b"q3", b"a0", kind="websocket"),  # an earlier response: an older object
        fixture("r3", 4, b"q4", b"a4"),
        fixture("r3", 5, b"q5", None),  # no response
    ]
    steps[4].trace_id = 0xABC  # another trace than the run's
    steps[4].end_ns = steps[4].start_ns + 3 * 3600 * 10**9 + 1
    steps[3].start_ns -= 3 * 10**9  # before the run's first step
    steps[3].end_ns -= 3 * 10**9
    with Store.open(tmp_path / "s") as store:
        store.put(steps)
        store.flush()
        got = store.steps("r3")
        assert [s.kind for s in got] == ["llm", "http", "tool", "websocket", "llm", "llm"]
        assert [s.trace_id for s in got] == [steps[0].trace_id] * 4 + [0xABC] * 1 + [
            steps[0].trace_id
        ]
        assert [(s.start_ns, s.end_ns) for s in got] == [(f.start_ns, f.end_ns) for f in steps]
        assert store.step("r3", 4) == got[4]
        assert [store.fixture(s) for s in got] == steps
    with Store.rebuild(tmp_path / "s") as store:
        assert store.steps("r3") == got
        assert [store.fixture(s) for s in got] == steps


def _rows(run_id: str, indexes: range) -> list[tuple[Any, ...]]:
    rows = []
    for at in indexes:
        fx = fixture(run_id, at, b"q%d" % at, b"a%d" % at)
        body = (hashlib.sha256(fx.request_body).digest(), len(fx.request_body))
        answer = (hashlib.sha256(fx.response_body).digest(), len(fx.response_body))
        rows.append(step_row(3 * at + 2, at, (3 * at, 3 * at + 1), fx, None, body, answer))
    return rows


def test_the_index_holds_two_tables_and_their_compact_statements(tmp_path: Path) -> None:
    """No secondary index (runs are found by slot), no spaces SQLite would keep in the file."""
    with Store.open(tmp_path / "s") as store:
        store.put([fixture("r1", 0, b"q0")])
        store.flush()
    with sqlite3.connect(tmp_path / "s" / "index.sqlite") as conn:
        schema = conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
    assert [(kind, name) for kind, name, _ in schema] == [("table", "runs"), ("table", "steps")]
    assert all(", " not in sql and "( " not in sql for _, _, sql in schema)


def test_runs_sharing_their_slots_are_found_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every id maps to the same few slots here: each run takes the next free one, lookups
    compare ids, and a run with no free slot left is refused with an error naming it."""
    monkeypatch.setattr(_index, "run_slots", lambda run_id: (64, 66))
    with Store.open(tmp_path / "s") as store:
        for run_id in ("a", "b", "c"):
            store.put([fixture(run_id, 0, run_id.encode()), fixture(run_id, 1, b"q")])
            store.flush()
        assert [store.request_body(s) for s in store.steps("b")] == [b"b", b"q"]
        assert store.run("c").step_count == 2
        with pytest.raises(RunNotFoundError):
            store.run("d")
    index = Index(tmp_path / "s" / "index.sqlite")
    try:
        with pytest.raises(StoreError, match="'d'"), index.write() as conn:
            Index.add_run(conn, "d", None)
        index.delete_runs(["b"])
        with index.write() as conn:
            assert Index.add_run(conn, "d", None) == 65  # b's slot, free again
        assert sorted(run.run_id for run in index.runs()) == ["a", "c", "d"]
        assert [s.index for s in index.steps("c")] == [0, 1] and index.steps("d") == []
    finally:
        index.close()


def test_a_run_left_without_steps_gives_back_its_number(tmp_path: Path) -> None:
    """Step keys lead with the run's number, given with its first steps and taken back with
    its last: the numbers in use are always the steps table's, so none is given twice."""
    index = Index(tmp_path / "index.sqlite")
    try:
        with index.write() as conn:
            a = Index.add_run(conn, "a", None)
            first = Index.set_stream(conn, a, 0xA1, 9)
            Index.set_stream(conn, a, 0xA2, 1)  # a stream without steps (spans only)
            Index.add_steps(conn, a, first, _rows("a", range(3)))
            Index.refresh_run(conn, a)
        with index.write() as conn:
            Index.drop_stream(conn, "a", 0xA1)  # a keeps its other stream, no step
        assert index.steps("a") == [] and index.run("a").step_count == 0
        with index.write() as conn:
            b = Index.add_run(conn, "b", None)
            Index.add_steps(conn, b, Index.set_stream(conn, b, 0xB1, 9), _rows("b", range(2)))
            Index.refresh_run(conn, b)
            Index.add_steps(conn, a, 1, _rows("a", range(5, 7)))  # a's steps again
            Index.refresh_run(conn, a)
        assert [(s.run_id, s.index) for s in index.steps("a")] == [("a", 5), ("a", 6)]
        assert [(s.run_id, s.index) for s in index.steps("b")] == [("b", 0), ("b", 1)]
        assert index.run("a").step_count == 2 and index.run("b").step_count == 2
        refs = index.step_refs()
        assert [(r.run_id, r.index, r.stream) for r in refs] == [
            ("b", 0, 0xB1),
            ("b", 1, 0xB1),
            ("a", 5, 0xA2),
            ("a", 6, 0xA2),
        ]
        assert index.step_ref("a", 6) == refs[3] and index.step_ref("a", 0) is None
    finally:
        index.close()


def test_lookups_by_run_search_by_key(tmp_path: Path) -> None:
    """Every statement a flush and the reads of one run make finds its rows through a rowid
    (a run's slots, a step's key), never by scanning runs or steps."""
    statements: list[str] = []
    with Store.open(tmp_path / "s") as store:
        store.put([fixture("r0", 0, b"q")])
        store.flush()
        store._index._conn().set_trace_callback(statements.append)
        store.put([fixture("r1", 0, b"q0"), fixture("r1", 1, b"q1")], [span("r1", 0)])
        store.flush()
        store.run("r1"), store.steps("r1"), store.step("r1", 1)
        store.request_body(store.step("r1", 0))
        store.pin("r1")
        store._index.delete_runs(["r0"])
    queries = [q for q in statements if q.split()[0] in ("SELECT", "UPDATE", "DELETE", "INSERT")]
    assert len(queries) > 10
    with sqlite3.connect(tmp_path / "s" / "index.sqlite") as conn:
        for query in queries:
            plan = [row[-1] for row in conn.execute("EXPLAIN QUERY PLAN " + query)]
            assert not [p for p in plan if re.match(r"SCAN (runs|steps|r|s)\b", p)], (query, plan)
