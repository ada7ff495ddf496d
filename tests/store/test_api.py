"""The rest of the public surface: defaults from settings, progress, bursts, span shapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from otel_replay.errors import ConfigError
from otel_replay.store import Retention, Store
from tests.store._data import chat_bodies, make_step, span


def test_location_defaults_to_the_setting(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OTEL_REPLAY_STORE", str(tmp_path / "from-env"))
    with Store.open() as store:
        assert store.location == str(tmp_path / "from-env")
    assert (tmp_path / "from-env" / "FORMAT").exists()


@pytest.mark.parametrize("value", ["-1", "soon", "nan", "inf"])
def test_bad_retention_settings_name_the_variable(monkeypatch, value: str) -> None:
    monkeypatch.setenv("OTEL_REPLAY_RETAIN_ERROR_DAYS", value)
    with pytest.raises(ConfigError, match="OTEL_REPLAY_RETAIN_ERROR_DAYS"):
        Retention.from_env()


def test_a_new_store_gets_its_parent_directories(tmp_path: Path) -> None:
    root = tmp_path / "team" / "agents" / "store"
    with Store.open(root) as store:
        store.put([make_step("nested", 0, b"q", b"r")])
    with Store.open(root, create=False) as store:
        assert [r.run_id for r in store.runs()] == ["nested"]
        assert store.request_body("nested", 0) == b"q"


def test_a_step_is_a_step_info_or_a_run_id_and_an_index(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s") as store:
        store.put([make_step("r", 0, b"q0", b"r0"), make_step("r", 1, b"q1", b"r1")])
        store.flush()
        info = store.step("r", 1)
        assert store.request_body(info) == store.request_body("r", 1) == b"q1"
        assert store.response_body(info) == store.response_body("r", 1) == b"r1"
        assert store.read_step(info) == store.read_step("r", 1)
        for read in (store.request_body, store.response_body, store.read_step):
            with pytest.raises(TypeError, match="a StepInfo, or a run id and an index"):
                read(("r", 1))  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="a StepInfo, or a run id and an index"):
                read("r")
            with pytest.raises(TypeError, match="a StepInfo, or a run id and an index"):
                read(info, 0)


def test_a_store_opened_by_a_relative_path_stays_there(tmp_path: Path, monkeypatch) -> None:
    # Its files were reached through the relative path: after the application changed its
    # directory, writing failed (or went into a directory of the same name elsewhere).
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    with Store.open("rel") as store:
        store.put([make_step("moved", 0, b"q0", b"r0")])
        store.flush()
        monkeypatch.chdir(tmp_path / "elsewhere")
        store.put([make_step("moved", 1, b"q1", b"r1")])
    assert list((tmp_path / "elsewhere").iterdir()) == []
    with Store.open(tmp_path / "rel", create=False) as store:
        assert [s.index for s in store.steps("moved")] == [0, 1]
        assert store.response_body("moved", 1) == b"r1"
        assert [p for p in store.verify() if p.damage] == []


def test_verify_reports_progress(tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    with Store.open(tmp_path / "s") as store:
        for index, (request, response) in enumerate(chat_bodies(5)):
            store.put([make_step("p", index, request, response)])
        store.flush()
        problems = store.verify(progress=lambda done, total: calls.append((done, total)))
        assert [p.kind for p in problems] == ["incomplete"]  # not closed yet
    # One pack, one record file, five steps.
    assert calls == [(n, 7) for n in range(1, 8)]


def test_a_burst_in_one_flush(tmp_path: Path) -> None:
    bodies = [
        (f'{{"n": {n}, "pad": "{"x" * 3000}"}}'.encode(), b"y" * (n % 700)) for n in range(1500)
    ]
    with Store.open(tmp_path / "s") as store:
        store.put(make_step("burst", n, q, r) for n, (q, r) in enumerate(bodies))
        store.flush()
        assert store.run("burst").step_count == 1500
        assert store.request_body("burst", 1499) == bodies[1499][0]
        assert [p for p in store.verify() if p.damage] == []
    assert len(list((tmp_path / "s").rglob("*.pack"))) == 1


def test_compact_merges_small_packs_and_records(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s") as store:
        for seed, run_id in enumerate(("a", "b")):
            for index, (request, response) in enumerate(chat_bodies(3, seed)):
                store.put([make_step(run_id, index, request, response)])
                store.flush()
        assert len(list((tmp_path / "s" / "objects").rglob("*.pack"))) == 6
        assert store.compact() >= 5 + 4  # 6 packs into 1; 3 record files into 1, per run
        assert len(list((tmp_path / "s" / "objects").rglob("*.pack"))) == 1
        assert len(list((tmp_path / "s" / "runs").rglob("*.rec"))) == 2
        for seed, run_id in enumerate(("a", "b")):
            assert [store.request_body(s) for s in store.steps(run_id)] == [
                q for q, _ in chat_bodies(3, seed)
            ]
        assert [p for p in store.verify() if p.damage] == []


def test_steps_known_by_their_spans_alone_count_through_merges_and_gc(tmp_path: Path) -> None:
    """A step whose span the store holds and whose bytes it does not (imported semantic) is
    one of its run's steps, with its model, tokens and error; merging the run's record files,
    rebuilding the index and removing the run keep the count right."""
    run_id = "r_spans_only"

    def step_span(index: int, **attributes: Any) -> dict[str, Any]:
        return span(run_id, index, **{"replay.step.kind": "llm", **attributes})

    with Store.open(tmp_path / "s") as store:
        request, response = chat_bodies(1)[0]
        store.put([make_step(run_id, 0, request, response)], [step_span(0)])
        store.flush()
        for index in (1, 2):
            usage = {"gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 2}
            store.put(spans=[step_span(index, **{"gen_ai.request.model": "m2", **usage})])
            store.flush()
        store.put(spans=[step_span(2), step_span(3, **{"error.type": "429"})])
        store.put(spans=[span(run_id, None)])  # the run's own span: no step
        store.flush()
        (info,) = store.runs()
        assert (info.step_count, info.error_steps) == (4, 1)
        assert info.models[-1] == "m2" and info.tokens_in == 10
        assert store.compact() > 0
        assert store.runs() == [info]
    with Store.open(tmp_path / "s") as store:
        (info,) = store.runs()
        assert (info.status, info.step_count) == ("ok", 4)
    with Store.rebuild(tmp_path / "s") as store:
        assert store.runs() == [info]
        store.discard(run_id)
        assert store.runs() == []


def test_the_newest_runs_are_read_alone(tmp_path: Path) -> None:
    """``runs(limit=N)`` is the N runs that started last, each as whole as ``runs()`` says
    (steps, tokens, status), whether its start comes from its recorder (a run's facts) or
    from its first step; ``run_count`` and ``run_ids`` name every run."""
    from otel_replay.step import RunEnd, RunFacts

    (request, response), *_ = chat_bodies(1, seed=3)
    base = 1_750_000_000 * 10**9
    with Store.open(tmp_path / "s") as store:
        for n in range(12):
            start = base + (n * 7 % 12) * 60 * 10**9  # not in the order they are written
            steps = [make_step(f"run-{n}", i, request, response, start_ns=start) for i in range(2)]
            if n % 3 == 0:
                steps[0].run = RunFacts(run_id=f"run-{n}", mode="record", start_ns=start - 10**9)
            store.put(steps)
            if n % 2:
                store.end_run(RunEnd(f"run-{n}", start + 5 * 10**9))
        store.flush()
        every = store.runs()
        newest = store.runs(limit=5)
        assert newest == every[-5:]
        assert [r.step_count for r in newest] == [2] * 5
        assert store.runs(limit=100) == every
        assert store.run_count() == 12
        assert sorted(store.run_ids()) == sorted(r.run_id for r in every)


def test_the_newest_runs_come_in_order_among_equal_starts(tmp_path: Path) -> None:
    """Runs that started at the same nanosecond, whether that start is their recorder's word
    or their first step's, and runs whose id is not UTF-8 come in the order every run is
    listed, newest last, for every ``limit``."""
    from otel_replay.step import RunFacts

    base = 1_750_000_000 * 10**9
    ids = ["b", "a", "c", "\udcff-raw", "d", "e", "f", "\udcfe"]
    with Store.open(tmp_path / "s") as store:
        for n, run_id in enumerate(ids):
            start = base + (n % 3) * 10**9  # three starts, shared
            step = make_step(run_id, 0, f"q{n}".encode(), b"r", start_ns=start)
            if n % 2:  # half of them from their facts, the others from their first step
                step.run = RunFacts(run_id=run_id, mode="record", start_ns=start)
            store.put([step])
        store.flush()
        every = store.runs()
        assert len(every) == len(ids)
        for limit in range(1, len(ids) + 2):
            assert store.runs(limit=limit) == every[-limit:]


def test_the_newest_runs_are_not_sorted_from_every_run(tmp_path: Path) -> None:
    """``runs(limit=N)`` reads the newest runs through the index of their starts: no query
    it makes scans the runs (at 100,000 runs, a sort of all of them cost 45 ms)."""
    (request, response), *_ = chat_bodies(1, seed=3)
    with Store.open(tmp_path / "s") as store:
        for n in range(20):
            store.put([make_step(f"run-{n}", 0, request, response, start_ns=n * 10**9 + 1)])
        store.flush()
        conn = store._index.conn()
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        try:
            assert [r.run_id for r in store.runs(limit=3)] == ["run-17", "run-18", "run-19"]
        finally:
            conn.set_trace_callback(None)
        runs = [s for s in statements if "FROM runs" in s and s.lstrip().startswith("SELECT")]
        assert runs
        for statement in runs:
            plan = " / ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + statement))
            assert "SCAN runs" not in plan, (statement, plan)


def test_a_run_named_but_never_written_is_not_listed(tmp_path: Path) -> None:
    """A run row a writer made but whose record it never wrote (it was killed between the
    two) is in no listing, even among the newest runs: not in ``runs(limit=N)``, not
    counted, not found by a prefix."""
    from otel_replay.step import RunFacts
    from otel_replay.store import _rows

    (request, response), *_ = chat_bodies(1, seed=3)
    base = 1_750_000_000 * 10**9
    with Store.open(tmp_path / "s") as store:
        for n in range(3):
            store.put([make_step(f"run-{n}", 0, request, response, start_ns=base + n * 10**9)])
        store.flush()
        with store._index.transaction() as tx:
            for n in range(10, 20):  # more than the newest few, which are read first
                facts = RunFacts(run_id=f"run-{n}", start_ns=base + n * 10**9)
                _rows.ensure_run(tx.conn, f"run-{n}", store.recording, facts, store.location)
        assert [r.run_id for r in store.runs(limit=2)] == ["run-1", "run-2"]
        assert [r.run_id for r in store.runs()] == ["run-0", "run-1", "run-2"]
        assert store.run_count() == 3
        assert sorted(store.run_ids("run-")) == ["run-0", "run-1", "run-2"]


def test_runs_are_found_by_a_prefix_of_their_id(tmp_path: Path) -> None:
    """``run_ids(prefix)`` names every run whose id starts with ``prefix`` and no other: an id
    recorded again (``<id>@2``), ids past the last code point, and ids that are not UTF-8
    (the index keeps them apart, as BLOBs) included."""
    ids = ["a", "ab", "abc", "ab\U0010ffff", "ab\U0010ffffz", "b", "caf", "café", "caf\udce9"]
    (request, response), *_ = chat_bodies(1, seed=3)
    with Store.open(tmp_path / "s") as store:
        for run_id in [*ids, "caf\udce9x"]:
            store.put([make_step(run_id, 0, request, response)])
    with Store.open(tmp_path / "s") as store:
        store.put([make_step("ab", 0, request, response)])  # kept apart as ab@2
    with Store.open(tmp_path / "s") as store:
        every = [info.run_id for info in store.runs()]
        assert "ab@2" in every and len(every) == len(ids) + 2
        for prefix in ["", *ids, "ab@", "c", "z", "\udce9", "ab\U0010ffffz!"]:
            found = store.run_ids(prefix)
            assert sorted(found) == sorted(r for r in every if r.startswith(prefix)), prefix
